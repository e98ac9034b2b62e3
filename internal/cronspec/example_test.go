package cronspec_test

import (
	"fmt"
	"time"

	"github.com/axsched/ax/internal/cronspec"
)

// A daily 02:30 job in New York across the spring-forward day: 02:30 does not exist
// on 2026-03-08, so it fires once, at the jump to 03:00 EDT.
func ExampleSpec_Next() {
	spec, err := cronspec.Parse("30 2 * * *")
	if err != nil {
		panic(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	at := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
	for range 3 {
		at = spec.Next(at, ny)
		fmt.Println(at.Format(time.RFC3339), at.In(ny).Format("15:04 MST"))
	}
	// Output:
	// 2026-03-07T07:30:00Z 02:30 EST
	// 2026-03-08T07:00:00Z 03:00 EDT
	// 2026-03-09T06:30:00Z 02:30 EDT
}

// Intervals are anchored at the Unix epoch, so every node computes the same slots.
func ExampleEvery() {
	spec, err := cronspec.Every(2 * time.Minute)
	if err != nil {
		panic(err)
	}
	after := time.Date(2026, 7, 15, 10, 1, 30, 0, time.UTC)
	fmt.Println(spec, spec.Next(after, nil).Format(time.RFC3339))
	// Output:
	// @every 2m0s 2026-07-15T10:02:00Z
}
