//go:build !unix

package bench

import "time"

// processCPU is 0 where the system does not say how much CPU the process used.
func processCPU() time.Duration { return 0 }
