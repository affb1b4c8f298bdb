package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Spec is what one session's box is built from. Paths are absolute.
type Spec struct {
	Bwrap    string // Decision.Bwrap
	Root     string // the operator's checkout: read-only
	Worktree string // the agent's worktree: writable
	Branch   string // the agent's branch (swarm/<agent>): its ref directory is writable
	// Door is the session's own control socket; its directory stays
	// visible (and usable) inside hidden directories. "" binds nothing.
	Door string
	// Hidden are directories replaced by an empty tmpfs (.swarm, the
	// operator socket's fallback directory); those that do not exist are
	// skipped.
	Hidden []string
	Home   string // $HOME, for the CLIs' state directories
	Path   string // $PATH of the session: entries under /tmp stay visible
	TmpDir string // where the session's private /tmp lives on the host ("" = os.TempDir())
	Name   string // a name for the session's host directory (agent-seq)
}

// Box is the containment of one session: New makes its host directory
// (the private /tmp and the CLIs' state), Command wraps a command line,
// Close removes the directory.
type Box struct {
	spec   Spec
	dir    string   // host directory of the session
	tmp    string   // dir/tmp, bound at /tmp
	git    []string // bind arguments git needs
	ro     []string // git's files kept read-only on top
	extras []string // paths under /tmp to bind back read-only
	// lifeline is a pipe the supervisor holds the write end of for the
	// session's life: every box's first process watches the read end
	// (Attach) and ends its PID namespace when it closes. bubblewrap does
	// not die with its parent (its own credential change clears the
	// parent-death signal), so without it a killed supervisor's sessions
	// would run on until the next one's recovery.
	lifeR, lifeW *os.File
}

// New prepares a session's box: it finds what git needs from the
// worktree's .git file and makes the session's host directory.
func New(spec Spec) (*Box, error) {
	if spec.Bwrap == "" {
		return nil, errors.New("sandbox: no bwrap binary")
	}
	b := &Box{spec: spec}
	if err := b.gitPaths(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	base := spec.TmpDir
	if base == "" {
		base = os.TempDir()
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, spec.Name)
	dir, err := os.MkdirTemp(base, dirPrefix+name+".")
	if err != nil {
		return nil, fmt.Errorf("sandbox: session directory: %w", err)
	}
	if b.lifeR, b.lifeW, err = os.Pipe(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: lifeline: %w", err)
	}
	b.dir, b.tmp = dir, filepath.Join(dir, "tmp")
	if err := os.Mkdir(b.tmp, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: session directory: %w", err)
	}
	// Under /tmp only what is needed to run anything comes back.
	for _, p := range append([]string{spec.Root, spec.Home}, filepath.SplitList(spec.Path)...) {
		if p != "" && filepath.IsAbs(p) && underTmp(p) && !slices.Contains(b.extras, p) {
			b.extras = append(b.extras, p)
		}
	}
	return b, nil
}

// dirPrefix starts the name of a session's host directory, followed by
// the session's name, a dot and a random suffix (agent names hold no dot).
const dirPrefix = "swarm-session-"

// RemoveLeftover removes the host directories a session called name left
// under tmpDir ("" = os.TempDir()): a crashed supervisor never closed its
// box. It returns how many it removed.
func RemoveLeftover(tmpDir, name string) (int, error) {
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(tmpDir, dirPrefix+name+".*"))
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return len(dirs), errors.Join(errs...)
}

// Dir is the session's host directory (its /tmp is Dir()/tmp).
func (b *Box) Dir() string { return b.dir }

// Close ends the session's boxes still running (its lifeline closes)
// and removes the session's host directory.
func (b *Box) Close() error {
	if b == nil || b.dir == "" {
		return nil
	}
	if b.lifeW != nil {
		b.lifeW.Close()
		b.lifeR.Close()
	}
	return os.RemoveAll(b.dir)
}

// lifeWatch is the box's first process: a watcher that waits for the
// lifeline to close (the session ended, or the supervisor died) and then
// kills every process of the box's PID namespace, and the command, which
// does not see the lifeline. The lifeline is descriptor 3: the first of
// exec.Cmd's ExtraFiles (Attach). Without it (no Attach) this only runs
// the command.
const lifeWatch = `if [ -e /proc/self/fd/3 ]; then { read -r _ <&3; kill -KILL -1; } & fi; exec 3<&-; exec "$@"`

// Attach gives cmd, whose argv Command made, the session's lifeline. It
// must come first among cmd.ExtraFiles.
func (b *Box) Attach(cmd *exec.Cmd) {
	if b == nil || b.lifeR == nil {
		return
	}
	cmd.ExtraFiles = append([]*os.File{b.lifeR}, cmd.ExtraFiles...)
}

// Extra is what one command adds to its session's box.
type Extra struct {
	Dir string // the working directory inside (default: the worktree)
	// ReadOnly are host paths to show at the same path, read-only (a
	// private settings file in the host's /tmp, say).
	ReadOnly []string
	// Writable are host paths to show at the same path, writable: a
	// directory made for this session alone (gemini-cli's home).
	Writable []string
	// State are directories relative to $HOME (or absolute) that the
	// command writes (a CLI's ~/.claude): each gets a per-session
	// directory of its own at that path, empty but for StateFiles.
	State []string
	// StateFiles are files relative to $HOME (or absolute: logins,
	// settings) bound read-only into the State directories when they
	// exist.
	StateFiles []string
	// Env is set inside (KEY=VALUE); "{home}" in a value is replaced by
	// $HOME.
	Env []string
}

// Command returns argv wrapped in bwrap. The order of the binds matters:
// later ones are mounted over earlier ones.
func (b *Box) Command(argv []string, x Extra) ([]string, error) {
	s := b.spec
	a := []string{b.spec.Bwrap,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--bind", b.tmp, "/tmp",
	}
	for _, p := range append(slices.Clone(b.extras), x.ReadOnly...) {
		a = append(a, "--ro-bind-try", p, p)
	}
	var hidden []string
	for _, h := range s.Hidden {
		// Under /tmp a directory is hidden already, unless a path bound
		// back holds it.
		if isDir(h) && (!underTmp(h) || slices.ContainsFunc(b.extras, func(p string) bool { return within(p, h) })) {
			a = append(a, "--tmpfs", h)
			hidden = append(hidden, h)
		}
	}
	a = append(a, "--bind", s.Worktree, s.Worktree)
	for _, p := range x.Writable {
		a = append(a, "--bind", p, p)
	}
	a = append(a, b.git...)
	if s.Door != "" {
		d := filepath.Dir(s.Door)
		a = append(a, "--bind", d, d)
	}
	for i, st := range x.State {
		p := b.inHome(st)
		if p == "" {
			continue
		}
		host := filepath.Join(b.dir, "state", strconv.Itoa(i))
		if err := os.MkdirAll(host, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: state directory: %w", err)
		}
		// The mount point must exist: bwrap cannot make it in a
		// read-only home.
		_ = os.MkdirAll(p, 0o700)
		a = append(a, "--bind", host, p)
	}
	for _, f := range x.StateFiles {
		if p := b.inHome(f); p != "" && isFile(p) {
			a = append(a, "--ro-bind", p, p)
		}
	}
	a = append(a, b.ro...)
	// Read-only once the mount points in them are made: a database opened
	// there would be a new, empty one whose writes vanish; opening fails.
	for _, h := range hidden {
		a = append(a, "--remount-ro", h)
	}
	dir := x.Dir
	if dir == "" {
		dir = s.Worktree
	}
	// $HOME is read-only: temporary files and caches (go build's, npm's)
	// go to the session's /tmp, cold at each session but never shared
	// with the operator's builds.
	a = append(a, "--setenv", "TMPDIR", "/tmp", "--setenv", "XDG_CACHE_HOME", "/tmp/.cache", "--setenv", "npm_config_cache", "/tmp/.npm")
	for _, kv := range x.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (s.Home == "" && strings.Contains(v, "{home}")) {
			continue
		}
		a = append(a, "--setenv", k, strings.ReplaceAll(v, "{home}", s.Home))
	}
	a = append(a, "--unshare-pid", "--die-with-parent", "--new-session", "--chdir", dir, "--")
	a = append(a, "/bin/sh", "-c", lifeWatch, "sh")
	return append(a, argv...), nil
}

// inHome is p under $HOME, or p itself when absolute; "" without a home.
func (b *Box) inHome(p string) string {
	switch {
	case filepath.IsAbs(p):
		return p
	case b.spec.Home == "":
		return ""
	}
	return filepath.Join(b.spec.Home, p)
}

// gitPaths finds, from the worktree's .git, what a commit on the agent's
// branch writes: the objects, the worktree's admin directory, the
// branch's ref directory and reflogs. hooks and config stay read-only.
func (b *Box) gitPaths() error {
	wt := b.spec.Worktree
	dotgit := filepath.Join(wt, ".git")
	fi, err := os.Lstat(dotgit)
	if errors.Is(err, fs.ErrNotExist) {
		// Not a git worktree (an engine's test directory): nothing of git
		// to make writable.
		return nil
	}
	if err != nil {
		return fmt.Errorf("the worktree's .git: %w", err)
	}
	var admin, common string
	if fi.IsDir() {
		// A main checkout: the whole git directory is its admin directory.
		admin, common = dotgit, dotgit
	} else {
		line, err := firstLine(dotgit)
		if err != nil {
			return err
		}
		g, ok := strings.CutPrefix(line, "gitdir: ")
		if !ok {
			return fmt.Errorf("%s does not name a git directory", dotgit)
		}
		if !filepath.IsAbs(g) {
			g = filepath.Join(wt, g)
		}
		admin, common = filepath.Clean(g), filepath.Clean(g)
		if c, err := firstLine(filepath.Join(admin, "commondir")); err == nil {
			if !filepath.IsAbs(c) {
				c = filepath.Join(admin, c)
			}
			common = filepath.Clean(c)
		}
	}
	bind := func(p string) { b.git = append(b.git, "--bind", p, p) }
	bind(filepath.Join(common, "objects"))
	if admin != common {
		bind(admin)
	}
	if b.spec.Branch != "" {
		sub := filepath.Dir(filepath.FromSlash(b.spec.Branch)) // swarm
		for _, d := range []string{filepath.Join(common, "refs", "heads", sub), filepath.Join(common, "logs", "refs", "heads", sub)} {
			// A branch only in packed-refs has no directory yet; a
			// commit makes its loose ref there.
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("git ref directory: %w", err)
			}
			bind(d)
		}
	}
	if admin == common {
		// The main checkout's own index, HEAD and logs.
		bind(admin)
	}
	for _, p := range []string{"hooks", "config"} {
		p = filepath.Join(common, p)
		b.ro = append(b.ro, "--ro-bind-try", p, p)
	}
	return nil
}

func firstLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		return strings.TrimSpace(sc.Text()), nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s is empty", path)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// underTmp reports whether p lies under /tmp, which the box replaces.
func underTmp(p string) bool {
	rel, err := filepath.Rel("/tmp", filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && rel != "."
}

// within reports whether dir is path or one of its ancestors.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
