package worktree

import (
	"fmt"
	"io/fs"
	"syscall"
)

// statTimes is a big file's modification and change times: touch can set
// the first back, nothing but the kernel sets the second.
func statTimes(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("mtime %d ctime %d.%09d", fi.ModTime().UnixNano(), st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fmt.Sprintf("mtime %d", fi.ModTime().UnixNano())
}
