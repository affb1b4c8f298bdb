package termsafe

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

var cases = []struct{ name, in, want string }{
	{"plain", "hello, world", "hello, world"},
	{"newline and tab", "a\tb\nc\n", "a\tb\nc\n"},
	{"unicode", "héllo 世界 🙂 \ufffd", "héllo 世界 🙂 \ufffd"},
	{"crlf", "one\r\ntwo\r\n", "one\r\ntwo\r\n"},
	{"clear screen", "\x1b[2J\x1b[Hgotcha", "␛[2J␛[Hgotcha"},
	{"fake colour", "\x1b[32mPASS\x1b[0m", "␛[32mPASS␛[0m"},
	{"osc 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", "␛]52;c;cm0gLXJmIH4=␇"},
	{"osc 8 link", "\x1b]8;;https://evil\x1b\\safe\x1b]8;;\x1b\\", "␛]8;;https://evil␛\\safe␛]8;;␛\\"},
	{"lone cr overwrites", "rm -rf ~\rls     ", "rm -rf ~␍ls     "},
	{"cr at the end", "done\r", "done␍"},
	{"backspace", "safe\b\b\b\bevil", "safe␈␈␈␈evil"},
	{"nul and del", "a\x00b\x7fc", "a␀b␡c"},
	{"every c0", "\x01\x02\x1f", "␁␂␟"},
	{"c1 csi, utf-8 encoded", "\u009b2J", `\u009b2J`},
	{"c1 range ends", "\u0080\u009f\u00a0", `\u0080\u009f` + "\u00a0"},
	{"raw c1 byte (8-bit csi)", "\x9b2J", `\x9b2J`},
	{"invalid byte", "a\xffb", `a\xffb`},
	{"truncated rune", "ab\xe4\xb8", `ab\xe4\xb8`},
	{"overlong nul", "\xc0\x80", `\xc0\x80`},
	{"surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
}

func TestString(t *testing.T) {
	for _, tc := range cases {
		if got := String(tc.in); got != tc.want {
			t.Errorf("%s: String(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
		if got := string(Append([]byte(">"), []byte(tc.in))); got != ">"+tc.want {
			t.Errorf("%s: Append = %q, want %q", tc.name, got, ">"+tc.want)
		}
	}
}

func TestStringDoesNotAllocateForSafeText(t *testing.T) {
	s := strings.Repeat("an ordinary line of bash output, with ünïcödé\n", 50)
	if n := testing.AllocsPerRun(100, func() { String(s) }); n != 0 {
		t.Fatalf("String allocated %v times for safe text", n)
	}
}

// Every case, written through a Writer in pieces split at every byte,
// comes out as String renders it whole.
func TestWriterSplitAnywhere(t *testing.T) {
	for _, tc := range cases {
		for split := 0; split <= len(tc.in); split++ {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			for _, part := range []string{tc.in[:split], tc.in[split:]} {
				if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Errorf("%s split at %d: %q, want %q", tc.name, split, buf.String(), tc.want)
			}
		}
		// One byte at a time.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for i := range len(tc.in) {
			w.Write([]byte{tc.in[i]})
		}
		w.Flush()
		if buf.String() != tc.want {
			t.Errorf("%s byte by byte: %q, want %q", tc.name, buf.String(), tc.want)
		}
	}
}

// A rune split across writes is held, not rendered as two invalid bytes;
// a CR at the end of a write waits to see whether LF follows.
func TestWriterHoldsUndecidedBytes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Write([]byte("世"[:2]))
	if buf.Len() != 0 {
		t.Fatalf("half a rune written early: %q", buf.String())
	}
	// The rest completes it; "line\r" then waits for its LF.
	w.Write([]byte("世"[2:] + "line\r"))
	if got := buf.String(); got != "世line" {
		t.Fatalf("after completing the rune: %q", got)
	}
	w.Write([]byte("\nnext"))
	if got := buf.String(); got != "世line\r\nnext" {
		t.Fatalf("after the LF: %q", got)
	}
	w.Write([]byte("\r"))
	w.Flush()
	if got := buf.String(); got != "世line\r\nnext␍" {
		t.Fatalf("after Flush: %q", got)
	}
}

type failWriter struct{}

var errFull = errors.New("disk full")

func (failWriter) Write(p []byte) (int, error) { return 0, errFull }

func TestWriterReportsErrors(t *testing.T) {
	w := NewWriter(failWriter{})
	for _, p := range []string{"plain", "\x1b[2J"} {
		if n, err := w.Write([]byte(p)); !errors.Is(err, errFull) || n != 0 {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
}

func TestOutputIsSafe(t *testing.T) {
	var all []byte
	for b := range 256 {
		all = append(all, byte(b))
	}
	for r := rune(0); r < 0x100; r++ {
		all = utf8.AppendRune(all, r)
	}
	checkSafe(t, String(string(all)))
}

// checkSafe fails unless s is valid UTF-8 holding no control a terminal
// acts on: no C0 but '\n', '\t' and '\r' before '\n', no DEL, no C1.
func checkSafe(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("output is not valid UTF-8: %q", s)
	}
	for i, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case r < 0x20 || r == 0x7f || isC1(r):
			t.Fatalf("control %U at %d survived in %q", r, i, s)
		}
	}
}

func BenchmarkStringSafe(b *testing.B) {
	s := strings.Repeat("ok  \tgithub.com/swarmhq/swarm/control\t5.807s — ünïcödé\n", 100)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		String(s)
	}
}

func BenchmarkStringHostile(b *testing.B) {
	s := strings.Repeat("\x1b[31mred\x1b[0m \x9b2J \u009b text\r", 100)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		String(s)
	}
}

func BenchmarkWriter(b *testing.B) {
	p := []byte(strings.Repeat("\x1b[32mPASS\x1b[0m: TestSomething (0.01s)\n", 100))
	w := NewWriter(discard{})
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		w.Write(p)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
