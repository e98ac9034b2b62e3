package ax_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax"
)

func TestDescribeSpec(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	for _, tc := range []struct {
		spec string
		loc  *time.Location
		want string
	}{
		{"30 2 * * *", berlin, "at 02:30 every day, Europe/Berlin"},
		{"*/5 * * * *", nil, "every 5 minutes, UTC"},
		{"0 9 * * mon-fri", mustLoad(t, "America/New_York"), "at 09:00 on Monday through Friday, America/New_York"},
		{"@every 30s", berlin, "every 30s"},
	} {
		got, err := ax.DescribeSpec(tc.spec, tc.loc)
		if err != nil || got != tc.want {
			t.Errorf("DescribeSpec(%q, %v) = %q, %v; want %q", tc.spec, tc.loc, got, err, tc.want)
		}
	}
	for _, spec := range []string{"", "61 * * * *", "0 0 30 2 *"} {
		if got, err := ax.DescribeSpec(spec, nil); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("DescribeSpec(%q) = %q, %v; want ErrInvalid", spec, got, err)
		}
	}
	if got, err := ax.DescribeSpec("* * * * *", time.FixedZone("X", 3600)); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("DescribeSpec in a fixed zone = %q, %v; want ErrInvalid", got, err)
	}
	sc := ax.Schedule{Spec: "30 2 * * *", TimeZone: "Europe/Berlin"}
	if got := sc.Describe(); got != "at 02:30 every day, Europe/Berlin" {
		t.Errorf("Schedule.Describe() = %q", got)
	}
	if got := (ax.Schedule{Spec: "30 2 * * *", TimeZone: "Nowhere/Atlantis"}).Describe(); got != "30 2 * * *" {
		t.Errorf("Schedule.Describe() in an unknown zone = %q, want the spec", got)
	}
}

// FireTimes marks the fire times after a clock change, pinned or flowing.
func TestFireTimesMarkOffsetChanges(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	from := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC) // spring forward on 03-29 at 01:00Z
	got, err := ax.FireTimes("30 2 * * *", berlin, from, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		at      string
		local   string
		zone    string
		changed bool
	}{
		{"2026-03-28T01:30:00Z", "02:30", "CET", false},
		{"2026-03-29T01:00:00Z", "03:00", "CEST", true}, // 02:30 does not exist: at the jump
		{"2026-03-30T00:30:00Z", "02:30", "CEST", false},
		{"2026-03-31T00:30:00Z", "02:30", "CEST", false},
	}
	if len(got) != len(want) {
		t.Fatalf("FireTimes = %+v, want %d", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.At.Format(time.RFC3339) != w.at || g.Local.Format("15:04") != w.local || g.Zone != w.zone || g.OffsetChanged != w.changed {
			t.Errorf("FireTimes[%d] = %s %s %s changed=%v, want %s %s %s changed=%v", i,
				g.At.Format(time.RFC3339), g.Local.Format("15:04"), g.Zone, g.OffsetChanged, w.at, w.local, w.zone, w.changed)
		}
	}
	// Flowing across the fall change: the repeated hour fires twice, the second
	// time with the winter offset.
	hourly, err := ax.FireTimes("@hourly", berlin, time.Date(2026, 10, 24, 23, 30, 0, 0, time.UTC), 3)
	if err != nil {
		t.Fatal(err)
	}
	var marks []bool
	for _, f := range hourly {
		marks = append(marks, f.OffsetChanged)
	}
	if fmt.Sprint(marks) != "[false true false]" || hourly[1].Offset != time.Hour || hourly[0].Offset != 2*time.Hour {
		t.Errorf("FireTimes(@hourly) across the fall change = %+v, want the second marked", hourly)
	}
	if _, err := ax.FireTimes("30 2 * * *", berlin, from, 0); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("FireTimes(n 0) error %v, want ErrInvalid", err)
	}
}

func ExampleDescribeSpec() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, spec := range []string{"30 2 * * *", "*/5 * * * *", "0 9 * * mon-fri", "@every 30s"} {
		text, _ := ax.DescribeSpec(spec, berlin)
		fmt.Println(text)
	}
	// Output:
	// at 02:30 every day, Europe/Berlin
	// every 5 minutes, Europe/Berlin
	// at 09:00 on Monday through Friday, Europe/Berlin
	// every 30s
}

func ExampleFireTimes() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	from := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	fires, _ := ax.FireTimes("30 2 * * *", berlin, from, 3)
	for _, f := range fires {
		mark := ""
		if f.OffsetChanged {
			mark = " (clocks changed)"
		}
		fmt.Println(f.Local.Format("2006-01-02 15:04 MST") + mark)
	}
	// Output:
	// 2026-03-28 02:30 CET
	// 2026-03-29 03:00 CEST (clocks changed)
	// 2026-03-30 02:30 CEST
}
