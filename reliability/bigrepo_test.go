//go:build reliability

package reliability

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// bigFiles is how many files the large repository of R1's worktree rounds
// and R8 holds, besides README.md: enough that a checkout, a `git worktree
// remove` and a merge take long enough for a kill to land inside them.
const bigFiles = 20000

// bigPath is the path of file i of the large repository: 50 × 20
// directories of 20 files.
func bigPath(i int) string { return fmt.Sprintf("d%02d/e%02d/f%05d.txt", i%50, (i/50)%20, i) }

func bigContent(i int) string { return fmt.Sprintf("file %d of the large repository\n", i) }

// bigDir is where the large repository and its snapshots live:
// $RELIABILITY_BIG_DIR, else /dev/shm when it is a writable tmpfs, else the
// temporary directory. The suite kills processes, never the machine, so a
// tmpfs keeps what it tests; and creating and deleting 100,000 files per
// round there costs CPU, not a shared disk's queue (measured here on a
// busy 2-core machine: 'git worktree remove' of 20,000 files took 0.5-2 s
// on the disk when quiet and 30-40 s when other suites ran; rm -rf of the
// same worktree took 0.7 s on /dev/shm then).
func bigDir() string {
	if d := os.Getenv("RELIABILITY_BIG_DIR"); d != "" {
		return d
	}
	if f, err := os.CreateTemp("/dev/shm", "swarm-reliability-probe-"); err == nil {
		f.Close()
		os.Remove(f.Name())
		return "/dev/shm"
	}
	return ""
}

var seed struct {
	once sync.Once
	dir  string // a repository whose main holds the large commit
	err  error
}

// bigSeed makes, once per test binary, a repository whose main is one
// commit of README.md and bigFiles files, written by one `git fast-import`
// stream (no checkout). Harnesses copy its .git.
func bigSeed(t *testing.T) string {
	t.Helper()
	seed.once.Do(func() {
		seed.dir, seed.err = os.MkdirTemp(bigDir(), "swarm-reliability-seed-")
		if seed.err != nil {
			return
		}
		var stream bytes.Buffer
		stream.WriteString("commit refs/heads/main\ncommitter Operator <op@example.com> 1700000000 +0000\ndata 13\nfirst commit\n")
		readme := "a repository for the reliability suite\n"
		fmt.Fprintf(&stream, "M 100644 inline README.md\ndata %d\n%s\n", len(readme), readme)
		for i := range bigFiles {
			c := bigContent(i)
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", bigPath(i), len(c), c)
		}
		stream.WriteString("\n")
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"fast-import", "--quiet"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = seed.dir
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+seed.dir)
			if args[0] == "fast-import" {
				cmd.Stdin = &stream
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				seed.err = fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if seed.err != nil {
		t.Fatalf("make the large repository: %v", seed.err)
	}
	return seed.dir
}

// snapshotTree copies the directory tree src to dst (which must not exist)
// the cheap way: every regular file of a checkout is hard-linked, and what
// git or swarm may change in place is copied (everything under a .git
// directory, a worktree's .git file, and .swarm/ apart from the agents'
// worktrees). git replaces a checked-out file rather than writing into it,
// so a round that merges, removes or puts back files in dst leaves src as
// it was.
func snapshotTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return nil // sockets and the like: nothing to keep
		}
		if !copied(rel) {
			return os.Link(path, to)
		}
		return copyFile(path, to, info.Mode().Perm())
	})
}

// copied reports whether snapshotTree copies the file at rel rather than
// hard-linking it. git's objects are never written in place; its index,
// refs, reflogs and config may be, and so may swarm's database and journal.
func copied(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		if p == ".git" {
			return !(i+1 < len(parts) && parts[i+1] == "objects")
		}
		if p == ".swarm" && !(i+1 < len(parts) && parts[i+1] == "worktrees") {
			return true
		}
	}
	return false
}

// syncTree makes dst what snapshotTree(src, dst) would make, doing only
// what differs: a hard link still to the snapshot's file is kept, missing
// ones are made again, copied files are copied again, and whatever src
// does not have is removed. A round that removed two worktrees costs their
// files, not the whole repository's.
func syncTree(src, dst string) error {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		have, lerr := os.Lstat(to)
		switch {
		case d.IsDir():
			if lerr == nil && have.IsDir() {
				return nil
			}
			if err := os.RemoveAll(to); err != nil {
				return err
			}
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.RemoveAll(to); err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return nil
		}
		if !copied(rel) && lerr == nil && os.SameFile(have, info) {
			return nil
		}
		if err := os.RemoveAll(to); err != nil {
			return err
		}
		if !copied(rel) {
			return os.Link(path, to)
		}
		return copyFile(path, to, info.Mode().Perm())
	})
	if err != nil {
		return err
	}
	// Remove what the snapshot does not have.
	return filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(dst, path)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(filepath.Join(src, rel)); errors.Is(err, fs.ErrNotExist) {
			if err := os.RemoveAll(path); err != nil {
				return err
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// restore puts the harness's repository back as it was in the snapshot at
// from.
func (h *harness) restore(from string) {
	h.t.Helper()
	if err := syncTree(from, h.root); err != nil {
		h.t.Fatalf("restore the repository from %s: %v", from, err)
	}
}

// snapshot keeps the harness's repository as it is now, to restore later.
func (h *harness) snapshot(name string) string {
	h.t.Helper()
	dst := filepath.Join(h.dir, "snapshot-"+name)
	if err := snapshotTree(h.root, dst); err != nil {
		h.t.Fatalf("snapshot the repository: %v", err)
	}
	return dst
}

// tree lists a commit's files: path → "<mode> <blob>".
func (h *harness) tree(rev string) map[string]string {
	h.t.Helper()
	out := h.git(h.root, "ls-tree", "-r", "--full-tree", rev)
	files := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		meta, path, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // mode type blob
		files[path] = f[0] + " " + f[2]
	}
	return files
}

// gitLocks lists the *.lock files under the repository's git directory,
// the worktrees' own git directories included.
func (h *harness) gitLocks() []string {
	var locks []string
	_ = filepath.WalkDir(filepath.Join(h.root, ".git"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".lock") {
			locks = append(locks, path)
		}
		return nil
	})
	return locks
}
