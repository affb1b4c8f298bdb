package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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

// loadText reads a text file for read_file and edit_file.
func loadText(op, path, p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, pathError(op, path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s %s: it is a directory; use list_files for directories", op, path)
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("%s %s: the file is %d bytes, too large for %s_file; use grep, or bash with head, tail or sed", op, path, fi.Size(), op)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, pathError(op, path, err)
	}
	return data, nil
}

func (tb *toolbox) readFile(a readArgs) (string, error) {
	p, err := tb.sb.resolve(a.Path)
	if err != nil {
		return "", err
	}
	data, err := loadText("read", a.Path, p)
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
	p, err := tb.sb.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return "", fmt.Errorf("write %s: it is a directory", a.Path)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", pathError("create the directory for", a.Path, err)
	}
	if err := writeKeepMode(p, []byte(a.Content)); err != nil {
		return "", pathError("write", a.Path, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path), nil
}

// writeKeepMode writes data to p, keeping an existing file's permissions.
func writeKeepMode(p string, data []byte) error {
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(p); err == nil {
		perm = fi.Mode().Perm()
	}
	return os.WriteFile(p, data, perm)
}

func (tb *toolbox) editFile(a editArgs) (string, error) {
	p, err := tb.sb.resolve(a.Path)
	if err != nil {
		return "", err
	}
	data, err := loadText("edit", a.Path, p)
	if err != nil {
		return "", err
	}
	if isBinary(data) {
		return "", fmt.Errorf("edit %s: binary file; edit_file changes text only", a.Path)
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
	if err := writeKeepMode(p, []byte(text)); err != nil {
		return "", pathError("write", a.Path, err)
	}
	return fmt.Sprintf("edited %s: replaced 1 occurrence (%d bytes with %d)", a.Path, len(a.Old), len(a.New)), nil
}

func (tb *toolbox) listFiles(a listArgs) (string, error) {
	p, err := tb.sb.resolve(a.Path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", pathError("list", orDot(a.Path), err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("list %s: not a directory; use read_file for files", a.Path)
	}
	var entries []string
	truncated := false
	add := func(path string, dir bool) bool {
		if len(entries) >= maxListed {
			truncated = true
			return false
		}
		rel := tb.sb.rel(path)
		if dir {
			rel += "/"
		}
		entries = append(entries, filepath.ToSlash(rel))
		return true
	}
	if a.Recursive {
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable entries are skipped, not fatal
			}
			if path == p {
				return nil
			}
			if d.Name() == ".git" {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !add(path, d.IsDir()) {
				return fs.SkipAll
			}
			return nil
		})
	} else {
		var des []fs.DirEntry
		des, err = os.ReadDir(p)
		for _, d := range des {
			if d.Name() == ".git" {
				continue
			}
			if !add(filepath.Join(p, d.Name()), d.IsDir()) {
				break
			}
		}
	}
	if err != nil {
		return "", pathError("list", orDot(a.Path), err)
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
	p, err := tb.sb.resolve(a.Path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", pathError("grep", orDot(a.Path), err)
	}
	var hits []string
	truncated := false
	search := func(path string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		more, err := grepFile(path, tb.sb.rel(path), re, maxGrepHits-len(hits), &hits)
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
		err = search(p)
	} else {
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if d.Name() == ".git" && path != p {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil // symlinks may lead out of the worktree
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

// grepFile appends up to room matching lines of one file to hits. It
// reports false when room ran out. Binary and very large files are skipped.
func grepFile(path, rel string, re *regexp.Regexp, room int, hits *[]string) (bool, error) {
	f, err := os.Open(path)
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
	rel = filepath.ToSlash(rel)
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
