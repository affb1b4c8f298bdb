// Package text holds the small string helpers every layer used to write
// for itself, each once: a count with its noun, a first line, a short
// commit hash, a cut with an ellipsis, a list cut short, an age.
package text

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Plural is n with the singular or the plural phrase: "1 file", "3 files".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Short is a commit hash (or a digest) cut to its first n characters, as
// messages name it; a shorter one is returned whole.
func Short(hash string, n int) string {
	if len(hash) > n {
		return hash[:n]
	}
	return hash
}

// Truncate is s cut to at most n bytes, on a rune boundary, with "…"
// appended when anything was cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// ListSome joins up to n items, saying how many more there are.
func ListSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// Age renders a duration the way prompts and views show ages and
// deadlines: 45s, 4m, 2h, 3d, rounded down, so a deadline never looks
// further away than it is; a negative one is 0s.
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}
