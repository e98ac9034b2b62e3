package ax

import (
	"errors"
	"strings"
	"testing"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/leadership"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// The exported constants are written as literals, so that go doc shows their values;
// each must equal the value the kernel reports or the store keeps.
func TestConstantsMatchTheKernel(t *testing.T) {
	kinds := map[EventKind]observe.Kind{
		EventSubmitted: observe.Submitted, EventClaimed: observe.Claimed, EventStarted: observe.Started,
		EventFinished: observe.Finished, EventDispatchFailed: observe.DispatchFailed, EventRetryScheduled: observe.RetryScheduled,
		EventOrphanRecovered: observe.OrphanRecovered, EventStuckClaimHandedBack: observe.StuckClaimHandedBack,
		EventSkipped: observe.Skipped, EventScheduleFired: observe.ScheduleFired, EventClockOffset: observe.ClockOffset,
		EventWheelSize: observe.WheelSize, EventTaskCounts: observe.TaskCounts, EventUnhandled: observe.Unhandled,
		EventLeadership: observe.Leadership, EventFenceRejected: observe.FenceRejected, EventLease: observe.LeaseState,
		EventExecutorRequest: observe.ExecutorRequest, EventPruned: observe.Pruned,
	}
	if len(kinds) != int(observe.Pruned) {
		t.Errorf("%d event kinds compared, the kernel has %d", len(kinds), observe.Pruned)
	}
	for ours, kernel := range kinds {
		if int(ours) != int(kernel) {
			t.Errorf("%v = %d, the kernel's is %d", ours, ours, kernel)
		}
	}
	for ours, kernel := range map[string]string{
		string(OutcomeSucceeded): observe.Succeeded, string(OutcomeFailed): observe.Failed, string(OutcomePanicked): observe.Panicked,
		string(OutcomeTimedOut): observe.TimedOut, string(OutcomeReleased): observe.Released, string(OutcomeOrphaned): observe.Orphaned,
		string(OutcomeSnoozed): observe.Snoozed, string(OutcomeCancelled): observe.Cancelled,
		string(DispatchNoHandler): observe.NoHandler, string(DispatchStopping): observe.Stopping, string(DispatchStuck): observe.Stuck,
		string(DispatchLeaseEnded): observe.LeaseEnded, string(DispatchBusy): observe.Busy, string(DispatchFenced): observe.Fenced,
		string(DispatchUnreachable): observe.Unreachable, string(DispatchRefused): observe.Refused,
		"part " + string(FencedClaim): "part " + observe.FencedClaim, "part " + string(FencedSchedule): "part " + observe.FencedSchedule,
		"part " + string(FencedRecovery): "part " + observe.FencedRecovery,
		"request " + string(ExecutorOK):  "request " + observe.RequestOK, "request " + string(ExecutorBusy): "request " + observe.RequestBusy,
		"request " + string(ExecutorUnreachable): "request " + observe.RequestUnreachable,
		"request " + string(ExecutorFenced):      "request " + observe.RequestFenced,
		"request " + string(ExecutorTooLarge):    "request " + observe.RequestTooLarge, "request " + string(ExecutorError): "request " + observe.RequestError,
		"pruned " + string(PruneSucceeded): "pruned " + strings.ToLower(string(store.Succeeded)),
		"pruned " + string(PruneFailed):    "pruned " + strings.ToLower(string(store.Failed)),
		"pruned " + string(PruneCancelled): "pruned " + strings.ToLower(string(store.Cancelled)),
		"pruned " + string(PruneSkipped):   "pruned " + strings.ToLower(string(store.Skipped)),
		"pruned " + string(PruneAudit):     "pruned " + observe.PrunedAudit, "pruned " + string(PruneSlotGaps): "pruned " + observe.PrunedSlotGaps,
		"pruned " + string(PruneStats): "pruned " + observe.PrunedStats, "pruned " + string(PruneLeadership): "pruned " + observe.PrunedLeadership,
		"pruned " + string(PruneKeyStarts): "pruned " + observe.PrunedKeyStarts,
		ScheduleDispatched:                 observe.Dispatched, ScheduleMisfired: observe.Misfired, ScheduleCaughtUp: observe.CaughtUp,
		ScheduleSkippedOverlap: observe.SkippedOverlap,
		string(Scheduled):      string(store.Scheduled), string(Dispatching): string(store.Dispatching), string(Running): string(store.Running),
		string(Succeeded): string(store.Succeeded), string(Failed): string(store.Failed), string(Cancelled): string(store.Cancelled),
		string(Skipped): string(store.Skipped), string(Snoozed): string(store.Snoozed), DefaultNamespace: store.DefaultNamespace,
		"hold " + string(HoldLive): "hold " + string(store.HoldLive), "hold " + string(HoldActive): "hold " + string(store.HoldActive),
		"hold " + string(HoldForever):    "hold " + string(store.HoldForever),
		"overlap " + string(OverlapSkip): "overlap " + string(store.OverlapSkip), "overlap " + string(OverlapQueue): "overlap " + string(store.OverlapQueue),
		"overlap " + string(OverlapAllow):    "overlap " + string(store.OverlapAllow),
		"misfire " + string(MisfireFireOnce): "misfire " + string(store.MisfireFireOnce), "misfire " + string(MisfireSkip): "misfire " + string(store.MisfireSkip),
		"misfire " + string(MisfireCatchUp): "misfire " + string(store.MisfireCatchUp),
		"leadership " + LeadershipAcquired:  "leadership " + store.LeadershipAcquired, "leadership " + LeadershipEnded: "leadership " + store.LeadershipEnded,
	} {
		if ours != kernel {
			t.Errorf("%q, the kernel's or the store's is %q", ours, kernel)
		}
	}
	if MaxNameLen != store.MaxNameLen || MaxKeyLen != store.MaxKeyLen {
		t.Errorf("MaxNameLen, MaxKeyLen = %d, %d; the store's are %d, %d", MaxNameLen, MaxKeyLen, store.MaxNameLen, store.MaxKeyLen)
	}
	if MaxLeadershipHistory != store.MaxLeadershipHistory {
		t.Errorf("MaxLeadershipHistory = %d, the store's is %d", MaxLeadershipHistory, store.MaxLeadershipHistory)
	}
}

// The reasons of EventLeadership are the scheduler's, not the kernel's: each cause
// of a term's end must map to its constant.
func TestTermEndReasonsMatchTheScheduler(t *testing.T) {
	for _, c := range []struct {
		cause error
		want  TermEndReason
	}{
		{elect.ErrLost, TermLost},
		{errors.New("anything else"), TermLost},
		{elect.ErrResigned, TermResigned},
		{store.ErrFenced, TermFenced},
		{remote.ErrFenced, TermFenced},
		{leadership.ErrStopping, TermStopping},
		{leadership.ErrStoreDown, TermStoreDown},
	} {
		if got := endReason(c.cause); got != string(c.want) {
			t.Errorf("endReason(%v) = %q, want %q", c.cause, got, c.want)
		}
	}
}
