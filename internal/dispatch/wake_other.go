//go:build !linux

package dispatch

// newWaker returns a waker on a Go timer: only Linux's has a precise one here.
func newWaker() waker { return newGoWaker() }
