package driverkit_test

import (
	"slices"
	"testing"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

func TestAddClaimed(t *testing.T) {
	ids := func(ts []store.Task) (out []int64) {
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	// All started, nothing before: the slice itself becomes Started.
	all := []store.Task{{ID: 1, Status: store.Running}, {ID: 2, Status: store.Running}}
	var res store.ClaimResult
	driverkit.AddClaimed(&res, all)
	if !slices.Equal(ids(res.Started), []int64{1, 2}) || &res.Started[0] != &all[0] || res.Claimed != nil {
		t.Fatalf("all started: Started %v (aliased %v), Claimed %v", ids(res.Started), &res.Started[0] == &all[0], ids(res.Claimed))
	}

	// Mixed, after an earlier chunk: split by status, appended to what was there.
	mixed := []store.Task{{ID: 3, Status: store.Dispatching}, {ID: 4, Status: store.Running}, {ID: 5, Status: store.Dispatching}}
	driverkit.AddClaimed(&res, mixed)
	if !slices.Equal(ids(res.Started), []int64{1, 2, 4}) || !slices.Equal(ids(res.Claimed), []int64{3, 5}) {
		t.Fatalf("mixed: Started %v, Claimed %v", ids(res.Started), ids(res.Claimed))
	}

	// All started, with Started already holding some: appended, not replaced.
	more := []store.Task{{ID: 6, Status: store.Running}}
	driverkit.AddClaimed(&res, more)
	if !slices.Equal(ids(res.Started), []int64{1, 2, 4, 6}) {
		t.Fatalf("appended: Started %v", ids(res.Started))
	}
}
