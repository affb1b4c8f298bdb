package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
)

// systemDirs hold the kernel's and devices' files, which look like files
// but are not text anyone wrote: /proc/self/environ is the environment with
// every credential in it, and a role goes into every prompt.
var systemDirs = []string{"/proc", "/sys", "/dev"}

// systemDir returns the system directory path is in, or "".
func systemDir(path string) string {
	for _, d := range systemDirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return d
		}
	}
	return ""
}

// maxRoleFile bounds a role file: it goes into every prompt.
const maxRoleFile = 256 << 10

// readRoleFile reads a role file. It refuses what resolves, through any
// symlinks, to a place under /proc, /sys or /dev or on a kernel file system;
// what is not a regular file (a FIFO would block, /dev/zero would never
// end), without opening it; and what is too large.
func readRoleFile(path string) ([]byte, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%w; write the role in a regular file in the repository", err)
	}
	defer f.Close()
	if fi.Size() > maxRoleFile {
		return nil, fmt.Errorf("%d bytes, more than the %d KiB a role may have; shorten it", fi.Size(), maxRoleFile>>10)
	}
	text, err := io.ReadAll(io.LimitReader(f, maxRoleFile+1))
	if err != nil {
		return nil, err
	}
	if len(text) > maxRoleFile {
		return nil, fmt.Errorf("more than the %d KiB a role may have; shorten it", maxRoleFile>>10)
	}
	return text, nil
}

var errNotRegular = errors.New("not a regular file")

// openRegular opens path for reading if it is a regular file outside the
// system directories and kernel file systems, after resolving symlinks.
// Its errors say why not, without naming path.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	if d := systemDir(abs); d != "" {
		return nil, nil, fmt.Errorf("under %s, where the files are the system's, not text you wrote", d)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	if d := systemDir(real); d != "" {
		return nil, nil, fmt.Errorf("links to %s, under %s, where the files are the system's, not text you wrote", real, d)
	}
	// Stat before opening: opening a device can itself do something.
	if fi, err := os.Stat(real); err != nil {
		return nil, nil, unwrapPathError(err)
	} else if !fi.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	// O_NOFOLLOW and O_NONBLOCK: what was checked cannot become a symlink
	// or a FIFO that blocks the open; the open file is checked again.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errNotRegular
	}
	if err == nil {
		if fs := kernelFS(f); fs != "" {
			err = fmt.Errorf("on the kernel's %s file system, where the files are the system's, not text you wrote", fs)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkSecretFile checks a file holding credentials without reading it: a
// regular file, not empty, that neither its group nor others may open.
func checkSecretFile(path string) error {
	f, fi, err := openRegular(path)
	if err != nil {
		return err
	}
	f.Close()
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("its group or others may open it (mode %04o); make it private: chmod 600 %s", perm, path)
	}
	if fi.Size() == 0 {
		return errors.New("empty; write the secret in it")
	}
	return nil
}

// maxKeyFile and maxEnvFile bound what ReadKeyFile and ReadEnvFile read.
const (
	maxKeyFile = 64 << 10
	maxEnvFile = 1 << 20
)

// readSecret reads a secret file of at most limit bytes, refusing what
// checkSecretFile refuses. Errors are *Error values naming path.
func readSecret(path string, limit int) ([]byte, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	defer f.Close()
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, &Error{File: path, Msg: fmt.Sprintf("its group or others may open it (mode %04o); make it private: chmod 600 %s", perm, path)}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	if len(data) > limit {
		return nil, &Error{File: path, Msg: fmt.Sprintf("more than %d KiB; is it the right file?", limit>>10)}
	}
	return data, nil
}

// ReadKeyFile reads an API key from an engine's api_key_file (see
// Engine.APIKeyFile): the file's text without surrounding white space. It
// refuses what Parse refuses (a file that is not regular, is under /proc,
// /sys or /dev, or that group or others may open) and a file that is empty
// or holds more than one word. Errors are *Error values naming path, and
// never show the file's contents.
func ReadKeyFile(path string) (string, error) {
	data, err := readSecret(path, maxKeyFile)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(data))
	switch {
	case key == "":
		return "", &Error{File: path, Msg: "empty; write the API key in it"}
	case strings.ContainsFunc(key, unicode.IsSpace):
		return "", &Error{File: path, Msg: "holds more than the key (white space inside it); write the key alone"}
	}
	return key, nil
}

// ReadEnvFile reads a dotenv-style file (see Engine.EnvFile) and returns
// its variables as "NAME=value" strings, in the order they first appear;
// a name set again takes its last value. The format, one variable a line:
//
//	# a comment, and blank lines, are skipped
//	NAME=value             # unquoted: surrounding space and a " #" comment are dropped
//	export NAME=value      # "export " is allowed, and ignored
//	NAME="a \"b\"\n"       # double quotes: \\ \" \n \t \r \$ are escapes
//	NAME='a "b" \n'        # single quotes: the text as it is
//
// Values are not expanded ($OTHER stays as written) and cannot span lines.
// ReadEnvFile refuses what Parse refuses for env_file (a file that is not
// regular, is under /proc, /sys or /dev, or that group or others may
// open), and files over 1 MiB. Errors are *Error values with the file and
// line, and never show a value.
func ReadEnvFile(path string) ([]string, error) {
	data, err := readSecret(path, maxEnvFile)
	if err != nil {
		return nil, err
	}
	return parseEnv(data, path)
}

func parseEnv(data []byte, file string) ([]string, error) {
	var (
		out  []string
		at   = map[string]int{} // name -> index in out
		errs []error
	)
	for n, line := range strings.Split(string(data), "\n") {
		fail := func(format string, args ...any) {
			errs = append(errs, &Error{File: file, Line: n + 1, Msg: fmt.Sprintf(format, args...)})
		}
		t := strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(t, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			t = strings.TrimSpace(rest)
		}
		name, raw, ok := strings.Cut(t, "=")
		name = strings.TrimSpace(name)
		if !ok {
			fail("expected NAME=value")
			continue
		}
		if !envName.MatchString(name) {
			// Not quoted back: a line of key material can hold a '='.
			fail("expected NAME=value, with a name of letters, digits and '_', not starting with a digit")
			continue
		}
		value, err := envValue(strings.TrimSpace(raw))
		if err != nil {
			fail("%s: %v", name, err)
			continue
		}
		if i, seen := at[name]; seen {
			out[i] = name + "=" + value
			continue
		}
		at[name] = len(out)
		out = append(out, name+"="+value)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// envValue decodes the value part of a NAME=value line.
func envValue(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	var value, rest string
	switch q := s[0]; q {
	case '"', '\'':
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != q; i++ {
			c := s[i]
			if q == '"' && c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					c = '\n'
				case 't':
					c = '\t'
				case 'r':
					c = '\r'
				case '\\', '"', '$':
					c = s[i]
				default:
					b.WriteByte('\\')
					c = s[i]
				}
			}
			b.WriteByte(c)
		}
		if i >= len(s) {
			return "", fmt.Errorf("the value's %c quote is not closed on its line (values cannot span lines)", q)
		}
		value, rest = b.String(), strings.TrimSpace(s[i+1:])
		if rest != "" && !strings.HasPrefix(rest, "#") {
			return "", errors.New("text after the closing quote; quote the whole value")
		}
	default:
		value = s
		if i := strings.Index(value, " #"); i >= 0 {
			value = value[:i]
		}
		if i := strings.Index(value, "\t#"); i >= 0 {
			value = value[:i]
		}
		value = strings.TrimSpace(value)
	}
	if strings.ContainsRune(value, 0) {
		return "", errors.New("the value holds a NUL byte, which no environment can")
	}
	return value, nil
}
