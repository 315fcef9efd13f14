package kubetest

import "syscall"

// deathSignal kills a started server when the test process dies.
func deathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
