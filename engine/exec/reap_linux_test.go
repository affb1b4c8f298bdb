package exec_test

import (
	"os"
	"syscall"
)

// The init process of some containers (this one's included) never reaps
// orphans, so a killed grandchild would stay a zombie in its group forever
// and the group would look alive. As a child subreaper, the test process
// inherits the agents' orphans and reapGroup can reap them itself.
func init() {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		os.Stderr.WriteString("exec tests: PR_SET_CHILD_SUBREAPER failed: " + errno.Error() + "\n")
	}
}
