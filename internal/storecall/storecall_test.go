package storecall

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// fences records the fence each fenced write was given.
type fences struct {
	store.Store // nil: only the fenced writes are called
	got         map[string]store.Fence
}

func (f *fences) Claim(_ context.Context, fence store.Fence, _ []store.Claim) (*store.ClaimResult, error) {
	f.got["Claim"] = fence
	return &store.ClaimResult{}, nil
}

func (f *fences) ClaimStart(_ context.Context, fence store.Fence, _ store.StartOn, _ []store.Claim) (*store.ClaimResult, error) {
	f.got["ClaimStart"] = fence
	return &store.ClaimResult{}, nil
}

func (f *fences) Start(_ context.Context, fence store.Fence, _ []store.StartParams) ([]store.StartResult, error) {
	f.got["Start"] = fence
	return nil, nil
}

func (f *fences) Finish(_ context.Context, fence store.Fence, _ []store.Finish) ([]bool, error) {
	f.got["Finish"] = fence
	return nil, nil
}

func (f *fences) Requeue(_ context.Context, fence store.Fence, _ []store.Requeue) ([]bool, error) {
	f.got["Requeue"] = fence
	return nil, nil
}

func (f *fences) FireSchedule(_ context.Context, p store.FireParams) (*store.FireResult, error) {
	f.got["FireSchedule"] = p.Fence
	return &store.FireResult{}, nil
}

// TestBoundedPassesFences: every fenced write reaches the store with its fence, so that
// the store can refuse a stale leader's.
func TestBoundedPassesFences(t *testing.T) {
	inner := &fences{got: map[string]store.Fence{}}
	st := Bounded(inner, time.Second)
	ctx := context.Background()
	f := store.Fence{Namespace: "ns", Token: 7}
	st.Claim(ctx, f, nil)
	st.ClaimStart(ctx, f, store.StartOn{}, nil)
	st.Start(ctx, f, nil)
	st.Finish(ctx, f, nil)
	st.Requeue(ctx, f, nil)
	st.FireSchedule(ctx, store.FireParams{Fence: f})
	for _, op := range []string{"Claim", "ClaimStart", "Start", "Finish", "Requeue", "FireSchedule"} {
		if got, ok := inner.got[op]; !ok || got != f {
			t.Errorf("%s reached the store with fence %+v (called: %v), want %+v", op, got, ok, f)
		}
	}
}
