package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
)

// BenchmarkClaim claims batches of due tasks: one op is one Claim call. "plain" tasks
// have no key and take the one-statement path; "keyed" tasks each have their own
// key (Overlap queue), so all are claimed, through the holder lookup and the
// key-checking UPDATE; "contended" tasks share ten keys, so ten are claimed and the
// rest blocked.
func BenchmarkClaim(b *testing.B) {
	kinds := []struct {
		name string
		key  func(i int) string
	}{
		{"plain", func(int) string { return "" }},
		{"keyed", func(i int) string { return fmt.Sprintf("key-%d", i) }},
		{"contended", func(i int) string { return fmt.Sprintf("key-%d", i%10) }},
	}
	for _, size := range []int{1, store.MaxBatch} {
		for _, kind := range kinds {
			b.Run(fmt.Sprintf("size=%d/%s", size, kind.name), func(b *testing.B) {
				s, err := sqlite.Open(filepath.Join(b.TempDir(), "ax.db"))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := b.Context()
				n, op := 0, 0
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					op++
					nts := make([]store.NewTask, size)
					for i := range nts {
						n++
						nts[i] = store.NewTask{Name: "bench", Key: fmt.Sprintf("bench-%d", n),
							DueAt: time.Now().Add(-time.Second), Payload: []byte(`{"order":42}`)}
						if k := kind.key(i); k != "" {
							// A fresh key space per op: the previous op's winners still hold theirs.
							nts[i].TaskKey, nts[i].Overlap = fmt.Sprintf("%d/%s", op, k), store.OverlapQueue
						}
					}
					res, err := s.Insert(ctx, nts)
					if err != nil {
						b.Fatal(err)
					}
					claims := make([]store.Claim, len(res))
					for i, r := range res {
						claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d", r.Task.ID)}
					}
					b.StartTimer()
					if _, err := s.Claim(ctx, store.Fence{}, claims); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
