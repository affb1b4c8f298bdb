package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// The operator's checkout (DESIGN §13.3). Without a sandbox an agent runs
// as the operator's user and can write the main checkout: a [notify]
// command planted in the root swarm.toml runs at the next `swarm up` with
// every secret, and text appended to the root AGENTS.md reaches every
// prompt. The guard cannot stop that, so it reports it: each snapshot
// records the checkout's uncommitted state, and a change during a session
// is a Tamper (repo_tamper) charged to every agent whose session ran.
//
// What is recorded stays cheap on a big repository: `git status` of
// tracked files only (it compares the index's stat data, never walking
// untracked trees such as .swarm/worktrees), a fingerprint of each file
// that differs from the index, and swarm.toml and AGENTS.md even when
// untracked or ignored. Files are judged against the index, not HEAD: a
// swarm merge in the checkout leaves them matching the index, and HEAD's
// moves are the base guard's business (checkoutState says more).

// TamperCheckout: a file of the operator's checkout changed: the root
// swarm.toml or AGENTS.md, or any tracked file.
const TamperCheckout TamperKind = "checkout_changed"

// checkoutWatched are the root files recorded even when git does not track
// them: swarm reads them (swarm.toml at `swarm up`, AGENTS.md into every
// prompt).
var checkoutWatched = []string{"swarm.toml", "AGENTS.md"}

// hashLimit is the size up to which a dirty file's content is hashed;
// bigger files are told by size, modification and change time (ctime,
// which no user can set back).
const hashLimit = 1 << 20

// checkoutState records the root checkout: each tracked file whose
// content differs from what git has staged for it (the index), and each
// watched file that is untracked or ignored, mapped to its state. A file
// as git has it is absent. It returns nil, nothing recorded, while git
// holds the index lock there: a merge swarm runs in the checkout (a
// workflow merge) writes the files and then the index under that lock,
// and a snapshot taken half way would report swarm's own work. Once the
// index is written, a merge's files match it, whatever HEAD says yet.
//
// What is staged is not compared: a merge moves it, and a change an agent
// stages is what 'git status' shows you before you commit.
func (m *Manager) checkoutState(ctx context.Context) (map[string]string, error) {
	common, err := m.commonDir(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(common, "index.lock")); err == nil {
		return nil, nil
	}
	// No optional locks: the operator's own git may be running there.
	env := []string{"GIT_OPTIONAL_LOCKS=0"}
	res, err := m.runEnv(ctx, m.root, env, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=all")
	if err != nil {
		return nil, fmt.Errorf("read the checkout's status: %w", err)
	}
	status := parsePorcelain(string(res.Stdout))
	args := append([]string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--"}, checkoutWatched...)
	if res, err = m.runEnv(ctx, m.root, env, args...); err != nil {
		return nil, fmt.Errorf("read the checkout's status: %w", err)
	}
	maps.Copy(status, parsePorcelain(string(res.Stdout)))
	if _, err := os.Stat(filepath.Join(common, "index.lock")); err == nil {
		return nil, nil // git started writing while we looked
	}
	out := make(map[string]string, len(status))
	for p, xy := range status {
		if xy[1] == ' ' || strings.HasPrefix(p, ".beads/") {
			// As staged; or the task board, which agents' bd claims and
			// closes write by design (bd keeps one database for every
			// worktree).
			continue
		}
		if xy != "??" && xy != "!!" {
			xy = " " + xy[1:] // the worktree against the index only
		}
		out[p] = xy + " " + fingerprint(filepath.Join(m.root, filepath.FromSlash(p)))
	}
	return out, nil
}

// parsePorcelain maps each path of `git status --porcelain=v1 -z` output
// to its two-letter status. A rename names its new path; the old one
// follows it as an extra field.
func parsePorcelain(out string) map[string]string {
	st := map[string]string{}
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		xy, p := f[:2], f[3:]
		st[p] = xy
		if xy[0] == 'R' || xy[0] == 'C' {
			i++ // the source path
		}
	}
	return st
}

// fingerprint tells one state of a file from another.
func fingerprint(path string) string {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	case err != nil:
		return "unreadable"
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(path)
		return "link " + t
	case !fi.Mode().IsRegular():
		return fi.Mode().Type().String()
	case fi.Size() > hashLimit:
		return fmt.Sprintf("size %d mode %s %s", fi.Size(), fi.Mode().Perm(), statTimes(fi))
	}
	f, err := os.Open(path)
	if err != nil {
		return "unreadable"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unreadable"
	}
	return fmt.Sprintf("sha256 %s mode %s", hex.EncodeToString(h.Sum(nil)), fi.Mode().Perm())
}

// describeState says what a recorded state is, for messages.
func describeState(s string) string {
	if s == "" {
		return "as git has it"
	}
	if len(s) < 3 {
		return s
	}
	xy, fp := s[:2], s[3:]
	what := "changed"
	switch xy {
	case "??":
		what = "untracked"
	case "!!":
		what = "ignored by git"
	case " D":
		what = "deleted"
	}
	if strings.HasPrefix(fp, "sha256 ") {
		fp = "sha256 " + text.Short(strings.TrimPrefix(fp, "sha256 "), 12)
		fp, _, _ = strings.Cut(fp, " mode")
	}
	return what + " (" + fp + ")"
}

// checkout compares the operator's checkout in the two snapshots. Only a
// session's window is judged: between sessions, with no agent running,
// the one who edits the checkout is the operator. A snapshot restored
// from before this record existed has none, and is not compared.
func (c *comparer) checkout() []Finding {
	if !c.w.Session || c.before.Checkout == nil || c.after.Checkout == nil {
		return nil
	}
	paths := slices.Sorted(maps.Keys(c.before.Checkout))
	for p := range c.after.Checkout {
		if _, ok := c.before.Checkout[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var found []Finding
	root := c.m.root
	for _, p := range paths {
		b, a := c.before.Checkout[p], c.after.Checkout[p]
		if a == b {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(p))
		t := Tamper{What: TamperCheckout, Agent: c.w.Agent, Path: full, Before: b, After: a}
		if t.After == "" {
			t.After = "as git has it" // a distinct Dedupe for "put back"
		}
		why := "an agent runs as your user and can write your checkout"
		switch p {
		case "swarm.toml":
			why = "swarm runs the commands it names ([notify] command, an engine's command) at the next 'swarm up'"
		case "AGENTS.md":
			why = "its text goes into every agent's prompt"
		}
		undo := fmt.Sprintf("look at it ('git -C %q diff -- %s') and undo what you did not write", root, p)
		if strings.HasPrefix(a, "??") || strings.HasPrefix(a, "!!") || strings.HasPrefix(b, "??") || strings.HasPrefix(b, "!!") {
			undo = fmt.Sprintf("look at %s and undo what you did not write", full)
		}
		others := ""
		if len(c.w.Overlapping) > 0 {
			others = " (sessions of " + strings.Join(c.w.Overlapping, ", ") + " ran then too)"
		}
		t.Detail = fmt.Sprintf("%s in your checkout changed %s%s: it was %s, it is now %s; %s. If you changed it yourself, resolve this; otherwise %s",
			full, c.when(), others, describeState(b), describeState(a), why, undo)
		found = append(found, t)
	}
	return found
}
