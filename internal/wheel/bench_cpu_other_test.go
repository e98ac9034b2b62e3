//go:build !unix

package wheel

import "time"

// processCPU is not measured here; the cpu-ns/timer metric is left out.
func processCPU() time.Duration { return 0 }
