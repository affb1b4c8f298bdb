package proc

import "syscall"

// setDeathSignal makes the child die with swarm on Linux, so a crashed
// supervisor does not leave git or bd behind. Recovery still kills recorded
// process groups, which covers the grandchildren this does not reach.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
