package worktree

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/proc"
)

// MinGit is the oldest git swarm supports: `git worktree` grew the pieces
// swarm relies on (lock reasons, remove, porcelain listing) by 2.20.
const MinGit = "2.20"

// FallbackEmail is the address on swarm's commits when git has none
// configured, so a commit never fails for want of an identity. It is the same
// address the session environment uses.
const FallbackEmail = "swarm@localhost"

// fallbackName authors operator-side commits (merges into the base branch)
// when git has no user.name either.
const fallbackName = "swarm"

// repoEnvVars are dropped from the children's environment: inherited from a
// git hook or a wrapper, they would point every git call at the wrong
// repository or index.
var repoEnvVars = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
	"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
	"GIT_NAMESPACE", "GIT_PREFIX",
}

// env returns the environment of a git child: the base environment without
// repository overrides, never prompting, then extra (later entries win).
func (m *Manager) env(extra ...string) []string {
	out := make([]string, 0, len(m.baseEnv)+4+len(extra))
	for _, kv := range m.baseEnv {
		k, _, _ := strings.Cut(kv, "=")
		if isRepoEnv(k) {
			continue
		}
		out = append(out, kv)
	}
	out = append(out,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_MERGE_AUTOEDIT=no",
		"GIT_EDITOR=true",
	)
	return append(out, extra...)
}

func isRepoEnv(k string) bool {
	for _, v := range repoEnvVars {
		if k == v {
			return true
		}
	}
	return false
}

// getenv reads the base environment (not the process's: tests and callers
// may pass their own).
func (m *Manager) getenv(key string) string {
	v := ""
	for _, kv := range m.baseEnv {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val // the last one wins, as in exec
		}
	}
	return v
}

// noAgentCode are the options every git child of this package runs with, so
// nothing an agent can plant in the shared .git runs as the operator while
// swarm works on the repository (merges, auto-commits, worktree checkouts):
//   - core.hooksPath=/dev/null: no hook runs (post-checkout, post-merge,
//     pre-commit, reference-transaction, ...); /dev/null is never a
//     directory, so git finds no hook there on any version;
//   - core.fsmonitor with an empty value: git runs no fsmonitor program.
//     An empty value means off both for git before 2.36, where the key is
//     the program's path and "false" would be run as a command, and for
//     later gits, where it is a boolean or a path.
//
// -c outranks every config file and travels to git's own child gits
// through GIT_CONFIG_PARAMETERS. What -c cannot switch off wholesale
// (filters, merge and diff drivers, aliases for the operator's own git) is
// what the guard's tamper check reports (Tamper).
var noAgentCode = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor="}

// safeArgs prefixes args with noAgentCode.
func safeArgs(args []string) []string {
	return append(append(make([]string, 0, len(noAgentCode)+len(args)), noAgentCode...), args...)
}

// run runs git in dir and returns its stdout with trailing newlines trimmed.
func (m *Manager) run(ctx context.Context, dir string, args ...string) (string, error) {
	res, err := m.runEnv(ctx, dir, nil, args...)
	return strings.TrimRight(string(res.Stdout), "\n"), err
}

// runStdin runs git in dir with stdin as its input.
func (m *Manager) runStdin(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	res, err := proc.Run(ctx, proc.Spec{Dir: dir, Env: m.env(), Stdin: []byte(stdin), Pass: m.pass}, "git", safeArgs(args)...)
	if err != nil {
		return "", gitError(args, err)
	}
	return strings.TrimRight(string(res.Stdout), "\n"), nil
}

// runEnv runs git in dir with extra environment. Every git child goes
// through proc (its own process group, killed as a group on cancel, with
// WaitDelay set) and runs with noAgentCode.
func (m *Manager) runEnv(ctx context.Context, dir string, extra []string, args ...string) (proc.Result, error) {
	res, err := proc.Run(ctx, proc.Spec{Dir: dir, Env: m.env(extra...), Pass: m.pass}, "git", safeArgs(args)...)
	if err != nil {
		return res, gitError(args, err)
	}
	return res, nil
}

// runRemote runs git push or fetch with the user's own environment,
// credentials included (DESIGN §6): they authenticate to the remote. Hooks
// stay off (noAgentCode, and --no-verify on push).
func (m *Manager) runRemote(ctx context.Context, dir string, args ...string) (proc.Result, error) {
	res, err := proc.Run(ctx, proc.Spec{Dir: dir, Env: m.env(), UserEnv: true}, "git", safeArgs(args)...)
	if err != nil {
		return res, gitError(args, err)
	}
	return res, nil
}

// ok runs a git query whose exit status is the answer (rev-parse --verify,
// diff --quiet): true on 0, false on 1, an error otherwise.
func (m *Manager) ok(ctx context.Context, dir string, args ...string) (bool, error) {
	_, err := m.run(ctx, dir, args...)
	var ee *proc.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ExitCode == 1:
		return false, nil
	default:
		return false, err
	}
}

func gitError(args []string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: install git %s or newer", ErrGitMissing, MinGit)
	}
	return fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
}

func isNotFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound)
}

// ParseGitVersion reads "git version 2.39.5" (or "2.39.5 (Apple Git-143)",
// "2.45.0.windows.1") into major and minor.
func ParseGitVersion(out string) (major, minor int, err error) {
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != "git" || f[1] != "version" {
		return 0, 0, fmt.Errorf("unexpected output of git version: %q", out)
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("unexpected git version %q", f[2])
	}
	if major, err = strconv.Atoi(parts[0]); err != nil {
		return 0, 0, fmt.Errorf("unexpected git version %q", f[2])
	}
	if minor, err = strconv.Atoi(parts[1]); err != nil {
		return 0, 0, fmt.Errorf("unexpected git version %q", f[2])
	}
	return major, minor, nil
}

// identity returns the environment that sets who a commit made in dir is
// by. An empty author or committer name means the user's own identity; when
// git has none, a fallback is set, so a commit never fails for want of a
// name or an address (this also covers user.useConfigOnly).
func (m *Manager) identity(ctx context.Context, dir, author, committer string) []string {
	cfgName, _ := m.run(ctx, dir, "config", "--get", "user.name")
	cfgEmail, _ := m.run(ctx, dir, "config", "--get", "user.email")
	var out []string
	for _, who := range []struct{ role, name string }{{"AUTHOR", author}, {"COMMITTER", committer}} {
		name := who.name
		if name == "" {
			name = firstNonEmpty(m.getenv("GIT_"+who.role+"_NAME"), cfgName, fallbackName)
		}
		email := firstNonEmpty(m.getenv("GIT_"+who.role+"_EMAIL"), cfgEmail, m.getenv("EMAIL"), FallbackEmail)
		out = append(out, "GIT_"+who.role+"_NAME="+name, "GIT_"+who.role+"_EMAIL="+email)
	}
	return out
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
