package worktree

import (
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// TamperKind names a change to the shared .git that the guard reports.
type TamperKind string

const (
	// TamperHookAdded: a new entry in the hooks directory.
	TamperHookAdded TamperKind = "hook_added"
	// TamperHookChanged: a hook's content, type or link target changed.
	TamperHookChanged TamperKind = "hook_changed"
	// TamperHookMode: only a hook's permission bits changed (it became
	// executable, so git now runs it, or stopped being so).
	TamperHookMode TamperKind = "hook_mode"
	// TamperHookRemoved: a hook was removed.
	TamperHookRemoved TamperKind = "hook_removed"
	// TamperConfigAdded: a watched config key was set.
	TamperConfigAdded TamperKind = "config_added"
	// TamperConfigChanged: a watched config key's values changed.
	TamperConfigChanged TamperKind = "config_changed"
	// TamperConfigRemoved: a watched config key was unset.
	TamperConfigRemoved TamperKind = "config_removed"
)

// Tamper is a change to the shared .git that can make git run code of an
// agent's choosing as whoever runs git next, the operator included
// (escalation kind repo_tamper). Nothing names who made it, so it blames
// nobody: every agent whose session overlapped.
type Tamper struct {
	What TamperKind `json:"what"`
	// Agent is the agent whose guard found it.
	Agent string `json:"agent"`
	// Between reports that it was found at Guard, in the time since the
	// agent's previous session.
	Between bool `json:"between,omitempty"`
	// Path is the hook's path, or the config file's.
	Path string `json:"path"`
	// Key is the config key (config kinds only), as git lists it.
	Key string `json:"key,omitempty"`
	// Before and After describe the hook, or list the key's values one a
	// line; "" when absent.
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// Detail says what happened and how to undo it.
	Detail string `json:"detail"`
}

// Escalation is EscalationTamper.
func (t Tamper) Escalation() string { return EscalationTamper }

// Blame is empty: nothing records who changed a file in .git.
func (t Tamper) Blame() []string { return nil }

// Dedupe names the change: what, where, and the state it left.
func (t Tamper) Dedupe() string {
	return string(t.What) + ":" + t.Path + ":" + t.Key + ":" + t.After
}

func (t Tamper) String() string { return t.Detail }

// tamper compares the hooks and the watched config of the two snapshots.
func (c *comparer) tamper() []Finding {
	var found []Finding
	add := func(t Tamper) {
		t.Agent = c.w.Agent
		found = append(found, t)
	}
	dir := c.after.HooksDir
	if dir == "" {
		dir = c.before.HooksDir
	}
	names := slices.Sorted(maps.Keys(c.before.Hooks))
	for n := range c.after.Hooks {
		if _, ok := c.before.Hooks[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		b, hadB := c.before.Hooks[n]
		a, hasA := c.after.Hooks[n]
		path := filepath.Join(dir, n)
		what := "the hook " + path
		if n == "." {
			path, what = dir, "the hooks directory "+dir
		}
		t := Tamper{Path: path}
		switch {
		case hadB && hasA && a == b:
			continue
		case !hadB:
			t.What, t.After = TamperHookAdded, a.describe()
			t.Detail = fmt.Sprintf("%s appeared %s (%s); git runs hooks as whoever runs git, the operator included. Look at it, and remove it if you did not put it there (rm %q)", what, c.when(), t.After, path)
		case !hasA:
			t.What, t.Before = TamperHookRemoved, b.describe()
			t.Detail = fmt.Sprintf("%s was removed %s (it was %s); restore it from a copy you trust if you need it", what, c.when(), t.Before)
		case a.Mode&^fs.ModePerm == b.Mode&^fs.ModePerm && a.SHA256 == b.SHA256 && a.Target == b.Target:
			t.What, t.Before, t.After = TamperHookMode, b.describe(), a.describe()
			switch {
			case a.Mode&0o111 != 0 && b.Mode&0o111 == 0:
				t.Detail = fmt.Sprintf("%s became executable %s, so git now runs it; make sure it is yours, or undo it (chmod a-x %q)", what, c.when(), path)
			case a.Mode&0o111 == 0 && b.Mode&0o111 != 0:
				t.Detail = fmt.Sprintf("%s stopped being executable %s, so git no longer runs it; if you need it, chmod +x %q", what, c.when(), path)
			default:
				t.Detail = fmt.Sprintf("the permissions of %s changed from %s to %s %s; set them back (chmod %o %q)", what, b.Mode.Perm(), a.Mode.Perm(), c.when(), b.Mode.Perm(), path)
			}
		default:
			t.What, t.Before, t.After = TamperHookChanged, b.describe(), a.describe()
			t.Detail = fmt.Sprintf("%s changed %s (it was %s, it is now %s); git runs hooks as whoever runs git, the operator included. Compare it with a copy you trust, and restore it or remove it (rm %q) if you did not change it", what, c.when(), t.Before, t.After, path)
		}
		add(t)
	}
	files := slices.Sorted(maps.Keys(c.before.Config))
	for f := range c.after.Config {
		if _, ok := c.before.Config[f]; !ok {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	for _, f := range files {
		bk, ak := c.before.Config[f], c.after.Config[f]
		keys := slices.Sorted(maps.Keys(bk))
		for k := range ak {
			if _, ok := bk[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			b, a := bk[k], ak[k]
			if slices.Equal(a, b) {
				continue
			}
			t := Tamper{Path: f, Key: k, Before: strings.Join(b, "\n"), After: strings.Join(a, "\n")}
			why := configWhy(k)
			switch {
			case len(b) == 0:
				t.What = TamperConfigAdded
				t.Detail = fmt.Sprintf("%s was set to %s in %s %s; %s. Remove it if you did not set it (git config --file %q --unset-all %s)", k, quoteValues(a), f, c.when(), why, f, k)
			case len(a) == 0:
				t.What = TamperConfigRemoved
				t.Detail = fmt.Sprintf("%s (%s) was removed from %s %s; %s. Set it again if you need it (git config --file %q --add %s %q)", k, quoteValues(b), f, c.when(), why, f, k, b[0])
			default:
				t.What = TamperConfigChanged
				t.Detail = fmt.Sprintf("%s changed from %s to %s in %s %s; %s. Put it back if you did not change it (git config --file %q --replace-all %s %q)", k, quoteValues(b), quoteValues(a), f, c.when(), why, f, k, b[len(b)-1])
			}
			add(t)
		}
	}
	return found
}

func quoteValues(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// configWhy says why a watched key matters.
func configWhy(key string) string {
	section, _, _ := strings.Cut(key, ".")
	switch {
	case section == "include" || section == "includeif":
		return "it pulls in config from another file, which can set anything"
	case section == "alias":
		return "the operator's own 'git " + key[len("alias."):] + "' runs what it says"
	case key == "core.hookspath":
		return "git runs the hooks it points at instead of .git/hooks"
	case key == "extensions.worktreeconfig":
		return "it lets each worktree's config.worktree set these keys too"
	}
	return "git runs the program it names"
}
