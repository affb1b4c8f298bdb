package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// Snapshot is what the session guard compares: the refs agents must not
// move, the parts of the shared .git that decide which programs git runs,
// and the state of the operator's checkout. It is a plain value: a supervisor may keep it between sessions and
// store it as JSON (Baseline, SetBaseline).
type Snapshot struct {
	// Base is the base branch's name.
	Base string `json:"base"`
	// Refs maps refs/heads/<Base> and every refs/heads/swarm/* to its
	// commit (full hash). A ref that does not exist is absent.
	Refs map[string]string `json:"refs"`
	// HooksDir is the shared hooks directory, <common git dir>/hooks, which
	// every worktree's git uses unless core.hooksPath says otherwise.
	HooksDir string `json:"hooks_dir"`
	// Hooks maps each entry of HooksDir, and "." for the directory itself,
	// to its state. A missing directory has no entries.
	Hooks map[string]FileState `json:"hooks"`
	// Config maps each config file of the repository (the shared config and
	// any per-worktree config.worktree) to its watched keys and their values
	// in order, includes followed: Config[file][key]. Keys are as git lists
	// them: section and name in lower case, a subsection as written.
	Config map[string]map[string][]string `json:"config"`
	// Checkout maps each file of the operator's checkout that is not as
	// git has it (a tracked file changed since it was staged or committed,
	// an untracked or ignored swarm.toml or AGENTS.md), by its path from
	// the root, to its state: the status letters and a fingerprint. Nil
	// when git was writing the index then, or in a snapshot stored before
	// it existed: nothing is compared then.
	Checkout map[string]string `json:"checkout"`

	led *guardState // the ledger the snapshot was taken in; nil when restored
	seq uint64      // the ledger's position then
}

// FileState is an entry of the hooks directory.
type FileState struct {
	// Mode holds the entry's type and permission bits.
	Mode fs.FileMode `json:"mode"`
	// SHA256 is the hash of a regular file's content.
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symbolic link's target.
	Target string `json:"target,omitempty"`
}

// describe says what the entry is, for messages.
func (s FileState) describe() string {
	switch {
	case s.Mode&fs.ModeSymlink != 0:
		return "a symbolic link to " + s.Target
	case s.Mode.IsDir():
		return "a directory"
	case !s.Mode.IsRegular():
		return "a special file (" + s.Mode.String() + ")"
	case s.Mode&0o111 != 0:
		return "an executable file, sha256 " + text.Short(s.SHA256, 12)
	default:
		return "a file that is not executable, sha256 " + text.Short(s.SHA256, 12)
	}
}

// Snapshot records the refs, hooks and watched config the guard compares.
func (m *Manager) Snapshot(ctx context.Context) (*Snapshot, error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Base: base}
	// Stamped first: a session that starts while the snapshot is being
	// taken then counts as overlapping the window that begins here.
	m.guard.mark(s)
	if s.Refs, err = m.guardedRefs(ctx, base); err != nil {
		return nil, fmt.Errorf("snapshot refs: %w", err)
	}
	m.guard.sawBase(s.Refs["refs/heads/"+base])
	common, err := m.commonDir(ctx)
	if err != nil {
		return nil, err
	}
	s.HooksDir = filepath.Join(common, "hooks")
	if s.Hooks, err = readHooks(s.HooksDir); err != nil {
		return nil, fmt.Errorf("snapshot hooks: %w", err)
	}
	if s.Config, err = m.watchedConfig(ctx, common); err != nil {
		return nil, fmt.Errorf("snapshot config: %w", err)
	}
	if s.Checkout, err = m.checkoutState(ctx); err != nil {
		return nil, fmt.Errorf("snapshot the checkout: %w", err)
	}
	return s, nil
}

// guardedRefs reads the base branch and every swarm/* branch with the git
// CLI, never go-git: go-git reads loose refs without git's locking, and
// while an agent commits it lost the agent's branch now and then (43 times
// in 68,471 reads, plus 274 "ref file is empty" errors), which the guard
// then reported as a deleted branch and charged to the agent's teammates.
// git for-each-ref missed none in 5,104 reads under the same load.
func (m *Manager) guardedRefs(ctx context.Context, base string) (map[string]string, error) {
	return m.guardedRefsCLI(ctx, base)
}

func (m *Manager) guardedRefsCLI(ctx context.Context, base string) (map[string]string, error) {
	out, err := m.run(ctx, m.root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"+base, "refs/heads/"+BranchPrefix)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if hash, name, ok := strings.Cut(line, " "); ok && (name == "refs/heads/"+base || strings.HasPrefix(name, "refs/heads/"+BranchPrefix)) {
			refs[name] = hash
		}
	}
	// Shared or interned (refsIntern): every agent's baseline holds every
	// branch, and substrings would keep each read's output alive.
	return m.refs.intern(refs), nil
}

// commonDir is the repository's common git dir (the .git of the main
// worktree), where the shared hooks, config and refs live.
func (m *Manager) commonDir(ctx context.Context) (string, error) {
	m.guard.mu.Lock()
	c := m.guard.common
	m.guard.mu.Unlock()
	if c != "" {
		return c, nil
	}
	c, err := m.run(ctx, m.root, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", fmt.Errorf("find the git dir: %w", err)
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(m.root, c)
	}
	c = filepath.Clean(c)
	m.guard.mu.Lock()
	m.guard.common = c
	m.guard.mu.Unlock()
	return c, nil
}

// readHooks records every entry of dir without following links: a hook
// that becomes a link to a file elsewhere is a change too.
func readHooks(dir string) (map[string]FileState, error) {
	out := map[string]FileState{}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	self, err := fileState(dir, fi)
	if err != nil {
		return nil, err
	}
	out["."] = self
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			return out, nil // a file where the directory should be
		}
		return nil, err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we looked
		}
		if err != nil {
			return nil, err
		}
		st, err := fileState(p, info)
		if err != nil {
			return nil, err
		}
		out[e.Name()] = st
	}
	return out, nil
}

func fileState(path string, fi fs.FileInfo) (FileState, error) {
	st := FileState{Mode: fi.Mode() & (fs.ModeType | fs.ModePerm)}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(path)
		if err != nil {
			return st, err
		}
		st.Target = t
	case fi.Mode().IsRegular():
		f, err := os.Open(path)
		if err != nil {
			return st, err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return st, err
		}
		st.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return st, nil
}

// watchedConfig reads the watched keys of the shared config and of every
// per-worktree config.worktree (used when extensions.worktreeConfig is
// on; an agent may turn that on), with includes followed, so a change in
// an included file shows too.
func (m *Manager) watchedConfig(ctx context.Context, common string) (map[string]map[string][]string, error) {
	files := []string{filepath.Join(common, "config"), filepath.Join(common, "config.worktree")}
	more, err := filepath.Glob(filepath.Join(common, "worktrees", "*", "config.worktree"))
	if err != nil {
		return nil, err
	}
	slices.Sort(more)
	files = append(files, more...)
	out := map[string]map[string][]string{}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		list, err := m.run(ctx, m.root, "config", "--file", f, "--includes", "--list", "-z")
		if err != nil {
			if _, serr := os.Stat(f); errors.Is(serr, fs.ErrNotExist) {
				continue // removed while we looked
			}
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		keys := map[string][]string{}
		for _, kv := range strings.Split(list, "\x00") {
			key, val, _ := strings.Cut(kv, "\n")
			if key != "" && watchedKey(key) {
				keys[key] = append(keys[key], val)
			}
		}
		if len(keys) > 0 {
			out[f] = keys
		}
	}
	return out, nil
}

// watchedKey reports whether a config key (as git lists it) makes git run
// a program, or pulls in more config: the keys an agent could set so that
// code of its choosing runs when the operator (or swarm) runs git.
func watchedKey(key string) bool {
	section, rest, ok := strings.Cut(key, ".")
	if !ok {
		return false
	}
	sub, name := "", rest
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		sub, name = rest[:i], rest[i+1:]
	}
	switch section {
	case "alias", "filter", "include", "includeif", "pager":
		return true
	case "core":
		switch name {
		case "fsmonitor", "hookspath", "sshcommand", "pager", "editor", "askpass", "gitproxy", "worktree", "attributesfile":
			return true
		}
	case "diff":
		return sub == "" && name == "external" || sub != "" && (name == "textconv" || name == "command")
	case "merge":
		return sub != "" && name == "driver"
	case "sequence":
		return name == "editor"
	case "credential":
		return name == "helper"
	case "gpg":
		return name == "program"
	case "interactive":
		return name == "difffilter"
	case "extensions":
		return name == "worktreeconfig"
	case "uploadpack":
		return name == "packobjectshook"
	case "remote":
		return sub != "" && (name == "uploadpack" || name == "receivepack")
	}
	return false
}
