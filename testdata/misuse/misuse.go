// Package misuse holds option misuses that must not compile; TestOptionMisuseDoesNotCompile
// builds it and expects exactly these errors. (testdata is outside ./..., so the
// module's own builds never see it.)
package misuse

import (
	"context"
	"time"

	"github.com/axsched/ax"
)

func handler(context.Context, *ax.Task) error { return nil }

func misuse(ctx context.Context, s *ax.Scheduler) {
	s.HandleFunc("a", handler, ax.WithPayload(nil))                                              // MISUSE: a per-task option on a handler
	s.HandleFunc("b", handler, ax.WithTaskKey("k"))                                              // MISUSE: a per-task option on a handler
	s.Delay(ctx, "c", "k", time.Second, ax.WithMisfire(ax.MisfireSkip))                          // MISUSE: a schedule option on a task
	s.At(ctx, "d", "k", time.Now(), ax.WithTimeZone(time.UTC))                                   // MISUSE: a schedule option on a task
	s.Every("e", time.Minute, ax.WithTx(nil))                                                    // MISUSE: a per-task option on a schedule
	s.Cron("f", "@daily", ax.WithTaskKey("k"))                                                   // MISUSE: a per-task option on a schedule
	s.SubmitMany(ctx, []ax.TaskSpec{{Options: []ax.TaskOption{ax.WithMisfire(ax.MisfireSkip)}}}) // MISUSE: a schedule option in a TaskSpec
}
