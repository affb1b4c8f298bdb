package text

import (
	"testing"
	"time"
)

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 files"}, {1, "1 file"}, {2, "2 files"}, {-1, "-1 files"}} {
		if got := Plural(c.n, "file", "files"); got != c.want {
			t.Errorf("Plural(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Plural(3, "criterion", "criteria"); got != "3 criteria" {
		t.Errorf("irregular plural = %q", got)
	}
}

func TestFirstLine(t *testing.T) {
	for in, want := range map[string]string{"": "", "one": "one", "one\ntwo": "one", "\ntwo": "", "a\r\nb": "a\r"} {
		if got := FirstLine(in); got != want {
			t.Errorf("FirstLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShort(t *testing.T) {
	h := "4f2a9c1d3e5b6a7980"
	if Short(h, 7) != "4f2a9c1" || Short(h, 12) != "4f2a9c1d3e5b" || Short("abc", 7) != "abc" || Short("", 7) != "" {
		t.Errorf("Short: %q %q %q", Short(h, 7), Short(h, 12), Short("abc", 7))
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello world", 5, "hello…"},
		{"héllo", 2, "h…"}, // é is two bytes: never cut in half
		{"héllo", 3, "hé…"},
		{"日本語", 4, "日…"},
		{"abc", 0, "…"},
	} {
		if got := Truncate(c.s, c.n); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestListSome(t *testing.T) {
	if got := ListSome([]string{"a", "b"}, 3); got != "a, b" {
		t.Errorf("short list = %q", got)
	}
	if got := ListSome([]string{"a", "b", "c", "d"}, 2); got != "a, b and 2 more" {
		t.Errorf("long list = %q", got)
	}
	if got := ListSome(nil, 2); got != "" {
		t.Errorf("empty list = %q", got)
	}
}

func TestAge(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Second, "0s"}, {0, "0s"}, {59*time.Second + 999*time.Millisecond, "59s"},
		{time.Minute, "1m"}, {59*time.Minute + 59*time.Second, "59m"}, {time.Hour, "1h"},
		{23*time.Hour + 59*time.Minute, "23h"}, {24 * time.Hour, "1d"}, {100 * time.Hour, "4d"},
	} {
		if got := Age(c.d); got != c.want {
			t.Errorf("Age(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
