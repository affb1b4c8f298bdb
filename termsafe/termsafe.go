// Package termsafe makes untrusted text safe to show on a terminal.
//
// Message bodies, bash output, exec agents' logs and model text can hold
// anything, and a terminal acts on what it is sent: ESC [2J clears the
// screen, SGR sequences fake colours and prompts, OSC 52 writes the
// clipboard, OSC 8 hides link targets, a lone CR or a backspace overwrites
// what was already printed. Only C0 controls (U+0000–U+001F), DEL and C1
// controls (U+0080–U+009F, which many terminals honour as ESC [ and friends
// even UTF-8 encoded) and, on 8-bit terminals, the bytes 0x80–0x9F start
// such sequences, so rendering exactly those visibly neutralises every one
// of them while leaving all other text as it was:
//
//   - '\n' and '\t' are kept, and so is '\r' directly before '\n' (CRLF
//     line ends display like LF).
//   - Every other C0 control becomes its Control Picture, one column wide:
//     ESC → ␛ (U+241B), BEL → ␇, NUL → ␀, a lone CR → ␍; DEL → ␡.
//   - A C1 control becomes \u0080 … \u009f.
//   - A byte that is not part of valid UTF-8 becomes \xNN.
//
// The rendering is for reading, not for parsing back: a literal "\x1b" in
// the text looks the same as an escaped byte.
//
// Use it wherever swarm prints text it did not write to a terminal: the
// CLI puts every human-readable command's stdout and its errors through
// it, and the live view renders with it. Apply it to
// the untrusted text before adding swarm's own colours, never to the
// styled result. Never use it for --json or --raw output, which must stay
// byte-exact (JSON escapes controls itself), nor on what is stored:
// sanitise at display time only.
//
// The package is a leaf: it imports only the standard library.
package termsafe

import (
	"io"
	"sync"
	"unicode/utf8"
)

const (
	// pictureBase is U+2400 SYMBOL FOR NULL: the picture of C0 control c
	// is pictureBase+c.
	pictureBase = 0x2400
	delPicture  = '\u2421' // ␡ SYMBOL FOR DELETE
	hexDigits   = "0123456789abcdef"
)

// String returns s with every terminal control character rendered
// visibly (see the package doc). Text that needs no change is returned as
// is, without allocating.
func String(s string) string {
	i := firstUnsafe(s)
	if i == len(s) {
		return s
	}
	out := make([]byte, i, len(s)+len(s)/8+8)
	copy(out, s[:i])
	out, _ = appendSafe(out, []byte(s[i:]), true)
	return string(out)
}

// Append appends src to dst with every terminal control character rendered
// visibly, and returns the extended buffer.
func Append(dst, src []byte) []byte {
	dst, _ = appendSafe(dst, src, true)
	return dst
}

// safeASCII reports whether the ASCII byte c is shown as is; '\r' is
// decided with the byte after it.
func safeASCII(c byte) bool {
	return 0x20 <= c && c < 0x7f || c == '\n' || c == '\t'
}

func isC1(r rune) bool { return 0x80 <= r && r <= 0x9f }

// firstUnsafe returns the index of the first byte of s that must be
// rendered, or len(s).
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII(c) {
				i++
				continue
			}
			if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				i += 2
				continue
			}
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || isC1(r) {
			return i
		}
		i += size
	}
	return len(s)
}

// appendSafe appends src to dst rendered, and returns how many bytes of src
// it consumed. Unless final, it stops before an incomplete UTF-8 sequence
// or a '\r' at the end of src, which the next bytes decide (a stream may
// split anywhere); final renders them as they are.
func appendSafe(dst, src []byte, final bool) ([]byte, int) {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			switch {
			case safeASCII(c):
				// Copy the whole run of plain ASCII at once.
				j := i + 1
				for j < len(src) && src[j] < utf8.RuneSelf && safeASCII(src[j]) {
					j++
				}
				dst = append(dst, src[i:j]...)
				i = j
				continue
			case c == '\r' && i+1 == len(src) && !final:
				return dst, i
			case c == '\r' && i+1 < len(src) && src[i+1] == '\n':
				dst = append(dst, '\r', '\n')
				i += 2
				continue
			case c == 0x7f:
				dst = utf8.AppendRune(dst, delPicture)
			default:
				dst = utf8.AppendRune(dst, pictureBase+rune(c))
			}
			i++
			continue
		}
		if !final && !utf8.FullRune(src[i:]) {
			return dst, i
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		case isC1(r):
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		default:
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst, i
}

// Writer renders what is written through it (see the package doc) before
// passing it on. Writes may split the text anywhere, even inside a UTF-8
// sequence or between CR and LF: the undecided bytes (at most 4) are held
// until the next Write or Flush. It is safe for concurrent use; writes are
// not interleaved.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte // the undecided tail of the last Write
	in      []byte // pending joined with the next Write
	out     []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Unwrap returns the writer w writes to, so a caller can still ask
// whether the stream underneath is a terminal.
func (w *Writer) Unwrap() io.Writer { return w.w }

// Write renders p and writes it to the underlying writer. It reports all
// of p written unless the underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	src := p
	if len(w.pending) > 0 {
		w.in = append(append(w.in[:0], w.pending...), p...)
		src = w.in
	} else if firstUnsafeBytes(p) == len(p) {
		// Nothing to render or hold: pass p through uncopied.
		if _, err := w.w.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	out, n := appendSafe(w.out[:0], src, false)
	w.pending = append(w.pending[:0], src[n:]...)
	w.out = shrink(out)
	w.in = shrink(w.in)
	if len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes the bytes held back by the last Write, rendered as they
// are (an incomplete UTF-8 sequence as \xNN, a CR as ␍). Call it when the
// stream ends. It does not flush the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	out, _ := appendSafe(w.out[:0], w.pending, true)
	w.pending = w.pending[:0]
	w.out = shrink(out)
	_, err := w.w.Write(out)
	return err
}

// shrink keeps a buffer for reuse unless one large write grew it: a Writer
// that once saw a 100 MB chunk should not hold 100 MB forever.
func shrink(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}

// firstUnsafeBytes is firstUnsafe for a byte slice, without copying it.
func firstUnsafeBytes(p []byte) int {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if safeASCII(c) {
				i++
				continue
			}
			if c == '\r' && i+1 < len(p) && p[i+1] == '\n' {
				i += 2
				continue
			}
			return i
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 || isC1(r) {
			return i
		}
		i += size
	}
	return len(p)
}
