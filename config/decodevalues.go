package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// path resolves a path written in swarm.toml: "~/" is the home directory,
// and a relative path is relative to the repository root.
func (b *builder) path(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path; name a file")
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand ~: %v; write the full path", err)
		}
		return filepath.Join(home, p[1:]), nil
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	return filepath.Join(b.root, p), nil
}

// duration parses a Go duration string ("90s", "5m", "1h30m"). zeroOK allows
// "0s", which turns a feature off.
func (b *builder) duration(key, s string, zeroOK bool) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		b.errorf(key, "bad duration %q: write it like \"90s\", \"5m\" or \"1h30m\"", s)
		return 0
	}
	if d < 0 || (d == 0 && !zeroOK) {
		b.errorf(key, "duration %q must be positive", s)
		return 0
	}
	return d
}

// maxSize bounds sizes such as message_cap: far above any sensible value,
// and far below where multiplying by a unit could overflow.
const maxSize = 1 << 30

// parseSize accepts a number of bytes or a string like "4KiB", "1MiB", "512B".
func parseSize(v any) (int, error) {
	switch v := v.(type) {
	case int64:
		if v < 1 || v > maxSize {
			return 0, fmt.Errorf("size must be between 1 and %d bytes (1GiB), got %d", maxSize, v)
		}
		return int(v), nil
	case string:
		s := strings.TrimSpace(v)
		mult := 1
		for _, u := range []struct {
			suffix string
			mult   int
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000_000}, {"B", 1}} {
			if rest, ok := strings.CutSuffix(s, u.suffix); ok {
				s, mult = strings.TrimSpace(rest), u.mult
				break
			}
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxSize/mult {
			return 0, fmt.Errorf("bad size %q: write it like \"4KiB\" or 4096 (at most 1GiB)", v)
		}
		return n * mult, nil
	default:
		return 0, fmt.Errorf("bad size %v: write it like \"4KiB\" or 4096", v)
	}
}
