package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child (SIGKILL) when the parent dies, so
// that a bench killed or crashed leaves no node running.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
