package termsafe

import (
	"bytes"
	"testing"
)

// FuzzString checks, for any input and any way of splitting it into
// writes: the output is valid UTF-8 with no terminal control left in it;
// safe input comes back unchanged; rendering is idempotent; and a Writer
// given the input in three pieces writes what String renders whole.
func FuzzString(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.in, uint(len(tc.in)/2), uint(len(tc.in)/3))
	}
	f.Add("\x1b]52;c;\xe4\xb8\r", uint(1), uint(9))
	f.Fuzz(func(t *testing.T, in string, a, b uint) {
		got := String(in)
		checkSafe(t, got)
		if firstUnsafe(in) == len(in) && got != in {
			t.Fatalf("safe input changed: %q -> %q", in, got)
		}
		if again := String(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
		if app := string(Append(nil, []byte(in))); app != got {
			t.Fatalf("Append %q != String %q", app, got)
		}
		if firstUnsafeBytes([]byte(in)) != firstUnsafe(in) {
			t.Fatalf("firstUnsafeBytes and firstUnsafe disagree on %q", in)
		}

		i := int(a % uint(len(in)+1))
		j := i + int(b%uint(len(in)-i+1))
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, part := range []string{in[:i], in[i:j], in[j:]} {
			if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != got {
			t.Fatalf("Writer split at %d,%d wrote %q, String %q", i, j, buf.String(), got)
		}
	})
}
