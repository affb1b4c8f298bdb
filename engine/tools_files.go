package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// pathError turns a filesystem error into a message about the path the
// model gave, without the resolved absolute path noise.
func pathError(op, p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: no such file or directory; use list_files to see what exists", op, p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s %s: permission denied", op, p)
	}
	return fmt.Errorf("%s %s: %v", op, p, err)
}

func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// maxFileSize bounds what read_file and edit_file load into memory.
const maxFileSize = 32 << 20

// loadText reads the text file name under r for read_file and edit_file,
// path being how the model wrote it. It returns the file's FileInfo from
// the open descriptor, so what is checked is what was read.
func (sb *sandbox) loadText(op, path string, r *os.Root, name string) ([]byte, fs.FileInfo, error) {
	// Stat first so a directory or a FIFO is refused, not opened (opening
	// a FIFO blocks until someone writes to it).
	fi, err := r.Stat(name)
	if err != nil {
		return nil, nil, sb.useError(op, path, err)
	}
	if err := checkText(op, path, fi); err != nil {
		return nil, nil, err
	}
	f, err := r.Open(name)
	if err != nil {
		return nil, nil, sb.useError(op, path, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, pathError(op, path, err)
	}
	if err := checkText(op, path, fi); err != nil {
		return nil, nil, err
	}
	// Read at most one byte past the limit: the file may have grown
	// since the Stat.
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, nil, pathError(op, path, err)
	}
	if len(data) > maxFileSize {
		return nil, nil, tooLarge(op, path, int64(len(data)))
	}
	return data, fi, nil
}

// checkText refuses what read_file and edit_file cannot load.
func checkText(op, path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("%s %s: it is a directory; use list_files for directories", op, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %s: not a regular file (%s); %s_file works on regular files only", op, path, fi.Mode().Type(), op)
	case fi.Size() > maxFileSize:
		return tooLarge(op, path, fi.Size())
	}
	return nil
}

func tooLarge(op, path string, size int64) error {
	return fmt.Errorf("%s %s: the file is %d bytes, too large for %s_file; use grep, or bash with head, tail or sed", op, path, size, op)
}

func (tb *toolbox) readFile(a readArgs) (string, error) {
	name, err := tb.sb.name(a.Path)
	if err != nil {
		return "", err
	}
	data, _, err := tb.sb.loadText("read", a.Path, tb.sb.dir, name)
	if err != nil {
		return "", err
	}
	if isBinary(data) {
		return "", fmt.Errorf("read %s: binary file (%d bytes); read_file shows text only", a.Path, len(data))
	}
	text := string(data)
	if a.Start > 0 || a.End > 0 {
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		start, end := max(a.Start, 1), a.End
		if end == 0 || end > len(lines) {
			end = len(lines)
		}
		if start > len(lines) {
			return "", fmt.Errorf("read %s: start_line %d is past the end of the file (%d lines)", a.Path, start, len(lines))
		}
		text = strings.Join(lines[start-1:end], "")
	}
	if len(text) > MaxToolOutput {
		cut := truncUTF8(text, MaxToolOutput)
		return cut + fmt.Sprintf("\n[... truncated: %d of %d bytes shown; pass start_line and end_line to read the rest ...]\n", len(cut), len(text)), nil
	}
	return text, nil
}

func (tb *toolbox) writeFile(a writeArgs) (string, error) {
	name, err := tb.sb.name(a.Path)
	if err != nil {
		return "", err
	}
	if name == "." {
		return "", fmt.Errorf("write %s: it is a directory", orDot(a.Path))
	}
	dir, base := filepath.Split(name)
	dir = filepath.Clean(dir)
	if dir != "." {
		if err := tb.sb.dir.MkdirAll(dir, 0o755); err != nil {
			return "", tb.sb.useError("create the directory for", a.Path, err)
		}
	}
	// Every step below works in this one directory, by its descriptor:
	// a parent swapped for a symlink afterwards cannot move the write.
	parent, err := tb.sb.dir.OpenRoot(dir)
	if err != nil {
		return "", tb.sb.useError("write", a.Path, err)
	}
	defer parent.Close()
	perm, keep := fs.FileMode(0o644), false
	fi, err := parent.Lstat(base)
	switch {
	case err == nil && fi.IsDir():
		return "", fmt.Errorf("write %s: it is a directory", a.Path)
	case err == nil && !fi.Mode().IsRegular():
		// resolve followed symlinks, so one here was swapped in since.
		return "", fmt.Errorf("write %s: not a regular file (%s); write_file replaces regular files only", a.Path, fi.Mode().Type())
	case err == nil:
		if err := refuseLinked("write", a.Path, fi); err != nil {
			return "", err
		}
		if err := refuseReadOnly("write", a.Path, fi); err != nil {
			return "", err
		}
		perm, keep = fi.Mode().Perm(), true
	case !errors.Is(err, fs.ErrNotExist):
		return "", tb.sb.useError("write", a.Path, err)
	}
	if err := replaceFile(parent, base, []byte(a.Content), perm, keep, nil); err != nil {
		return "", tb.sb.useError("write", a.Path, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path), nil
}

// refuseLinked refuses to change a file with more than one hard link.
// Another name for it may be outside the worktree, and replacing this name
// would silently split the two, which is never what editing one meant.
func refuseLinked(op, path string, fi fs.FileInfo) error {
	if n := linkCount(fi); n > 1 {
		return fmt.Errorf("%s %s: the file has %d hard links, and another of its names may be outside the worktree, so %s_file will not change it; to replace only this name, remove it first (bash: rm %s) and write it again", op, path, n, op, path)
	}
	return nil
}

// refuseReadOnly refuses to change a file nobody may write. Writing in
// place used to fail on one; a rename needs only the directory writable
// and would replace it without a word.
func refuseReadOnly(op, path string, fi fs.FileInfo) error {
	if fi.Mode().Perm()&0o222 == 0 {
		return fmt.Errorf("%s %s: the file is read-only (mode %v); if it is meant to change, make it writable first (bash: chmod u+w %s)", op, path, fi.Mode().Perm(), path)
	}
	return nil
}

// tempMark is in the name of every temporary file replaceFile makes, so a
// leftover from a killed process can be recognised.
const tempMark = ".swarm-tmp-"

// IsTempName reports whether name (a base name) is one the file tools give
// their temporary files: ".<file>.swarm-tmp-<random>". Such a file outside
// a running session is a leftover of a process killed mid-write, and holds
// nothing the agent wrote to its real name.
func IsTempName(name string) bool {
	i := strings.LastIndex(name, tempMark)
	if i < 1 || name[0] != '.' {
		return false
	}
	rnd := name[i+len(tempMark):]
	if rnd == "" || len(rnd) > 13 {
		return false
	}
	for _, c := range rnd {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// replaceFile writes data to a new file in parent and renames it over base,
// so a reader sees the old content or the new, never a mix, and a crash
// mid-write leaves the old file whole. The rename replaces the directory
// entry rather than writing into the old file, so no other name of it (a
// hard link) changes. With keep the new file gets exactly perm, the old
// file's mode; otherwise perm is filtered by the umask as for any new file.
// When was is set, base must still be that file, or the write is refused:
// someone changed it since it was read.
func replaceFile(parent *os.Root, base string, data []byte, perm fs.FileMode, keep bool, was fs.FileInfo) error {
	tmp, f, err := createTemp(parent, base, perm)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			parent.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if keep {
		if err := f.Chmod(perm); err != nil {
			return err
		}
	}
	// Sync before the rename: otherwise a crash can leave the new name
	// in place with its data never written, and the old content gone.
	if err := f.Sync(); err != nil {
		return err
	}
	if was != nil {
		if now, err := parent.Lstat(base); err != nil || !os.SameFile(now, was) {
			return errChanged
		}
	}
	if err := parent.Rename(tmp, base); err != nil {
		return err
	}
	done = true
	return f.Close()
}

// errChanged is replaceFile's refusal to overwrite a file that was
// replaced or removed since it was read.
var errChanged = errors.New("the file changed while it was being edited; read it again and redo the edit")

// createTemp creates a new, empty file next to base in parent.
func createTemp(parent *os.Root, base string, perm fs.FileMode) (string, *os.File, error) {
	// Keep the name well under NAME_MAX however long base is.
	prefix := "." + truncUTF8(base, 100) + tempMark
	for range 10 {
		tmp := prefix + strconv.FormatUint(rand.Uint64(), 36)
		f, err := parent.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return tmp, f, err
	}
	return "", nil, fmt.Errorf("could not create a temporary file next to %s", base)
}

func (tb *toolbox) editFile(a editArgs) (string, error) {
	name, err := tb.sb.name(a.Path)
	if err != nil {
		return "", err
	}
	// Read and replace through the same directory descriptor, so the
	// file replaced is in the directory the text was read from.
	parent, err := tb.sb.dir.OpenRoot(filepath.Dir(name))
	if err != nil {
		return "", tb.sb.useError("edit", a.Path, err)
	}
	defer parent.Close()
	base := filepath.Base(name)
	data, fi, err := tb.sb.loadText("edit", a.Path, parent, base)
	if err != nil {
		return "", err
	}
	if isBinary(data) {
		return "", fmt.Errorf("edit %s: binary file; edit_file changes text only", a.Path)
	}
	if err := refuseLinked("edit", a.Path, fi); err != nil {
		return "", err
	}
	if err := refuseReadOnly("edit", a.Path, fi); err != nil {
		return "", err
	}
	text := string(data)
	switch n := strings.Count(text, a.Old); n {
	case 1:
	case 0:
		hint := "read the file and copy the text exactly, including whitespace and indentation"
		if strings.Contains(text, strings.TrimSpace(a.Old)) && strings.TrimSpace(a.Old) != "" {
			hint = "the text occurs with different leading or trailing whitespace; copy it exactly"
		}
		return "", fmt.Errorf("edit %s: old text not found; %s", a.Path, hint)
	default:
		return "", fmt.Errorf("edit %s: old text matches %d places; include more surrounding lines in old so it matches exactly one", a.Path, n)
	}
	text = strings.Replace(text, a.Old, a.New, 1)
	if err := replaceFile(parent, base, []byte(text), fi.Mode().Perm(), true, fi); errors.Is(err, errChanged) {
		return "", fmt.Errorf("edit %s: %w", a.Path, err)
	} else if err != nil {
		return "", tb.sb.useError("edit", a.Path, err)
	}
	return fmt.Sprintf("edited %s: replaced 1 occurrence (%d bytes with %d)", a.Path, len(a.Old), len(a.New)), nil
}

func (tb *toolbox) listFiles(a listArgs) (string, error) {
	name, err := tb.sb.name(a.Path)
	if err != nil {
		return "", err
	}
	fi, err := tb.sb.dir.Stat(name)
	if err != nil {
		return "", tb.sb.useError("list", orDot(a.Path), err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("list %s: not a directory; use read_file for files", a.Path)
	}
	var entries []string
	truncated := false
	err = tb.sb.walk(name, func(path string, d fs.DirEntry) error {
		if d == nil {
			return nil // the directory listed
		}
		if d.Name() == ".git" {
			return fs.SkipDir
		}
		if len(entries) >= maxListed {
			truncated = true
			return fs.SkipAll
		}
		rel := filepath.ToSlash(path)
		if d.IsDir() {
			rel += "/"
		}
		entries = append(entries, rel)
		if !a.Recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return "", tb.sb.useError("list", orDot(a.Path), err)
	}
	if len(entries) == 0 {
		return "(empty directory)\n", nil
	}
	out := strings.Join(entries, "\n") + "\n"
	if truncated {
		out += fmt.Sprintf("[... truncated at %d entries; list a subdirectory to see more ...]\n", maxListed)
	}
	return out, nil
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func (tb *toolbox) grep(ctx context.Context, a grepArgs) (string, error) {
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return "", fmt.Errorf("grep: bad pattern: %v (the pattern is a Go RE2 regular expression; escape metacharacters like \\( or use [.])", err)
	}
	name, err := tb.sb.name(a.Path)
	if err != nil {
		return "", err
	}
	fi, err := tb.sb.dir.Stat(name)
	if err != nil {
		return "", tb.sb.useError("grep", orDot(a.Path), err)
	}
	var hits []string
	truncated := false
	search := func(path string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		more, err := grepFile(tb.sb.dir, path, re, maxGrepHits-len(hits), &hits)
		if err != nil {
			return nil // unreadable files are skipped
		}
		if !more {
			truncated = true
			return fs.SkipAll
		}
		return nil
	}
	if !fi.IsDir() {
		err = search(name)
	} else {
		err = tb.sb.walk(name, func(path string, d fs.DirEntry) error {
			switch {
			case d == nil:
				return nil // the directory searched
			case d.IsDir() && d.Name() == ".git":
				return fs.SkipDir
			case !d.Type().IsRegular():
				return nil // directories are walked; symlinks and devices are not searched
			}
			return search(path)
		})
	}
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return "", err
	}
	if len(hits) == 0 {
		return "no matches\n", nil
	}
	out := strings.Join(hits, "\n") + "\n"
	if truncated {
		out += fmt.Sprintf("[... stopped at %d matches; narrow the pattern or the path ...]\n", maxGrepHits)
	}
	return out, nil
}

// grepFile appends up to room matching lines of the file name under r to
// hits. It reports false when room ran out. Binary, very large and
// irregular files are skipped.
func grepFile(r *os.Root, name string, re *regexp.Regexp, room int, hits *[]string) (bool, error) {
	// Stat first: opening a FIFO would block. The walk saw a regular
	// file, but a single path given to grep may be anything.
	if fi, err := r.Stat(name); err != nil || !fi.Mode().IsRegular() {
		return true, err
	}
	f, err := r.Open(name)
	if err != nil {
		return true, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxGrepFile {
		return true, err
	}
	br := bufio.NewReader(f)
	if peek, _ := br.Peek(8000); isBinary(peek) {
		return true, nil
	}
	rel := filepath.ToSlash(name)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			line = strings.TrimRight(line, "\r\n")
			if re.MatchString(line) {
				if room == 0 {
					return false, nil
				}
				*hits = append(*hits, fmt.Sprintf("%s:%d: %s", rel, n, oneLineKeep(line, maxGrepLine)))
				room--
			}
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return true, err
		}
	}
}

// oneLineKeep cuts a line to n bytes, marking the cut.
func oneLineKeep(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncUTF8(s, n) + " …"
}
