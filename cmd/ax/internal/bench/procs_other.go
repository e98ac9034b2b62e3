//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing here: only Linux has a parent-death signal; the
// children stop when their stdin, the parent's pipe, closes.
func dieWithParent(cmd *exec.Cmd) {}
