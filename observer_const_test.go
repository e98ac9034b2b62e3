package ax

import (
	"testing"

	"github.com/axsched/ax/internal/observe"
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
		DispatchNoHandler: observe.NoHandler, DispatchStopping: observe.Stopping, DispatchStuck: observe.Stuck,
		DispatchLeaseEnded: observe.LeaseEnded, DispatchBusy: observe.Busy, DispatchFenced: observe.Fenced,
		DispatchUnreachable: observe.Unreachable, DispatchRefused: observe.Refused,
		ScheduleDispatched: observe.Dispatched, ScheduleMisfired: observe.Misfired, ScheduleCaughtUp: observe.CaughtUp,
		ScheduleSkippedOverlap: observe.SkippedOverlap,
		string(Scheduled):      string(store.Scheduled), string(Dispatching): string(store.Dispatching), string(Running): string(store.Running),
		string(Succeeded): string(store.Succeeded), string(Failed): string(store.Failed), string(Cancelled): string(store.Cancelled),
		string(Skipped): string(store.Skipped), DefaultNamespace: store.DefaultNamespace,
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
	if MaxLeadershipHistory != store.MaxLeadershipHistory {
		t.Errorf("MaxLeadershipHistory = %d, the store's is %d", MaxLeadershipHistory, store.MaxLeadershipHistory)
	}
}
