//go:build !linux

package proc

// InSession cannot tell off Linux (no /proc): it reports false. The
// sandbox is Linux-only too; the README says what holds elsewhere.
func InSession(pid int, root string) (SessionMark, bool) { return SessionMark{}, false }

// SessionMarks cannot tell off Linux: none.
func SessionMarks(pid int, root string) []SessionMark { return nil }
