//go:build !linux

package worktree

import (
	"fmt"
	"io/fs"
)

// statTimes is a big file's modification time.
func statTimes(fi fs.FileInfo) string {
	return fmt.Sprintf("mtime %d", fi.ModTime().UnixNano())
}
