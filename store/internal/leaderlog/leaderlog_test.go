package leaderlog

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

func TestAcquiredReason(t *testing.T) {
	for _, c := range []struct {
		name string
		prev *store.LeadershipChange
		want string
	}{
		{"first", nil, "no earlier leader recorded"},
		{"after an end", &store.LeadershipChange{Epoch: 4, Holder: "7 C1 node-a", Kind: store.LeadershipEnded, Reason: "stopping"},
			"node-a ended its term of epoch 4: stopping"},
		{"after a start", &store.LeadershipChange{Epoch: 4, Holder: "node-a", Kind: store.LeadershipAcquired, Reason: "x"},
			"node-a recorded no end of its term of epoch 4: its lease was not released (it crashed, froze or lost its store)"},
	} {
		if got := AcquiredReason(c.prev); got != c.want {
			t.Errorf("%s: AcquiredReason = %q, want %q", c.name, got, c.want)
		}
	}
	long := &store.LeadershipChange{Epoch: 1, Holder: "a", Kind: store.LeadershipEnded, Reason: strings.Repeat("é", store.MaxLeadershipReason)}
	if got := AcquiredReason(long); len(got) > store.MaxLeadershipReason || !utf8.ValidString(got) {
		t.Errorf("AcquiredReason of a long reason: %d bytes, valid UTF-8 %v; want at most %d, valid", len(got), utf8.ValidString(got), store.MaxLeadershipReason)
	}
}

func TestClip(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("x", store.MaxLeadershipReason), strings.Repeat("x", 999) + "é", strings.Repeat("€", 600)} {
		got := Clip(s)
		if len(got) > store.MaxLeadershipReason || !utf8.ValidString(got) || !strings.HasPrefix(s, got) {
			t.Errorf("Clip(%d bytes) = %d bytes, valid %v, a prefix %v", len(s), len(got), utf8.ValidString(got), strings.HasPrefix(s, got))
		}
		if len(s) <= store.MaxLeadershipReason && got != s {
			t.Errorf("Clip(%d bytes) cut a text within the limit", len(s))
		}
	}
}
