package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// InSession reports whether process pid, or one of its ancestors up to
// (not including) pid 1, was started inside a session of the swarm whose
// repository is root: its environment carries that swarm's SWARM_ROOT and
// a SWARM_DOOR. A process cannot change the environment its ancestors were
// started with, so clearing the variables in a child (env -u SWARM_DOOR)
// does not hide it. A process of another user, or gone, is skipped.
//
// It is a best effort without the sandbox (DESIGN §13.3): a session's
// process that double-forked with an empty environment and was adopted by
// pid 1 has no marked ancestor left.
func InSession(pid int, root string) (SessionMark, bool) {
	for i := 0; pid > 1 && i < maxAncestors; i++ {
		if m, ok := marked(pid, root); ok {
			return m, true
		}
		pid = parentOf(pid)
	}
	return SessionMark{}, false
}

// SessionMarks is every process from pid up its ancestry (to pid 1) that
// was started inside a session of the swarm at root, nearest first: a
// door checks that all of them are its own session's, so a process of one
// session cannot borrow another session's door by naming it, even with a
// forged environment of its own (its ancestors keep theirs).
func SessionMarks(pid int, root string) []SessionMark {
	var out []SessionMark
	for i := 0; pid > 1 && i < maxAncestors; i++ {
		if m, ok := marked(pid, root); ok {
			out = append(out, m)
		}
		pid = parentOf(pid)
	}
	return out
}

// marked reads pid's starting environment for a session mark of root.
func marked(pid int, root string) (SessionMark, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return SessionMark{}, false
	}
	m := SessionMark{Pid: pid}
	var sameRoot bool
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		switch k {
		case "SWARM_DOOR":
			m.Door = v
		case "SWARM_ROOT":
			sameRoot = v == root
		case "SWARM_SESSION_ID":
			m.Session = v
		}
	}
	return m, sameRoot && m.Door != ""
}

// parentOf is pid's parent, 0 when unknown.
func parentOf(pid int) int {
	f, ok := statFields(pid)
	if !ok {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
