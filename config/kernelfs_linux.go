package config

import (
	"os"

	"golang.org/x/sys/unix"
)

// kernelFS names the kernel file system f is on (procfs mounted somewhere
// other than /proc, say), or returns "" for an ordinary one.
func kernelFS(f *os.File) string {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return ""
	}
	switch int64(st.Type) {
	case unix.PROC_SUPER_MAGIC:
		return "proc"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	case unix.DEBUGFS_MAGIC:
		return "debugfs"
	case unix.TRACEFS_MAGIC:
		return "tracefs"
	case unix.SECURITYFS_MAGIC:
		return "securityfs"
	case unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC:
		return "cgroup"
	case unix.BPF_FS_MAGIC:
		return "bpf"
	case unix.EFIVARFS_MAGIC:
		return "efivarfs"
	}
	return ""
}
