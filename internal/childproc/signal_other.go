//go:build !linux

package childproc

import "os/exec"

// dieWithParent does nothing here: only Linux has a parent-death signal. A child
// with a pipe to its stdin can stop when it reads its end.
func dieWithParent(cmd *exec.Cmd) {}
