package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/swarmhq/swarm/repo"
)

// The server's limits. Any process of the user can connect, so none of
// them may be able to take the supervisor down by holding connections or
// sending a huge line (measured before these: 20,000 idle connections
// exhausted the descriptors and ended Serve, which stopped the swarm; a
// 1 GiB line grew the supervisor to 2.1 GB).
const (
	// defaultMaxConns caps open connections. At the cap the oldest idle
	// one is closed to admit the new one: a real client is short-lived
	// and sends its request at once, so the oldest idle connection is the
	// least likely to be one. Busy ones (a request being answered, a watch
	// stream) are never closed for room.
	defaultMaxConns = 256
	// defaultMaxLine bounds a request line. Requests are a few dozen
	// bytes; a longer line is refused and its connection closed, having
	// buffered at most this much.
	defaultMaxLine = 1 << 20
	// defaultIdleTimeout is how long a connection may take to send a
	// whole request line (the first, or the next after an answer).
	defaultIdleTimeout = 10 * time.Second
	// defaultWriteTimeout cuts a client that stops reading its answers or
	// its watch stream, so it cannot pin a busy slot forever.
	defaultWriteTimeout = 10 * time.Second

	// Accept errors (EMFILE above all) are retried after a pause that
	// doubles from acceptBackoffMin to acceptBackoffMax, as net/http does.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// errLineTooLong is a request line over the limit.
var errLineTooLong = errors.New("request line too long")

// Handler answers one request. Stream requests may write further lines with
// send until ctx ends.
type Handler func(ctx context.Context, req Request, send func(any) error) Response

// Server is a listening control socket.
type Server struct {
	ln   *net.UnixListener
	path string
	addr string // control.addr written, if any
	dir  string // a door's private directory, removed with it

	// Limits; Listen sets the defaults and tests lower them before Serve.
	maxConns     int
	maxLine      int
	idleTimeout  time.Duration
	writeTimeout time.Duration

	// hook, when set (by tests), is told of every event, from any
	// goroutine; nil in production.
	hook func(ev event, err error)

	mu        sync.Mutex
	conns     map[*conn]struct{} // until its goroutine has closed it
	active    int                // conns not yet closed: what the cap counts
	idleSeq   uint64             // orders idle connections, oldest first
	capWarned bool
}

// event is what Server.hook is told.
type event int

const (
	evAdmit       event = iota // a connection was registered
	evEvict                    // an idle one was closed for room
	evDrop                     // a connection's descriptor is closed and it is gone
	evAcceptError              // accept failed; err says why
)

func (s *Server) notify(ev event, err error) {
	if s.hook != nil {
		s.hook(ev, err)
	}
}

// conn is one accepted connection. Its fields are guarded by Server.mu.
type conn struct {
	net.Conn
	busy    bool   // a request is being answered (a watch stays busy)
	idleSeq uint64 // when it last became idle
	closed  bool   // dropped: evicted for room or finished
}

// Listen binds the control socket for l with mode 0600 (see bindPrivate).
// It must only be called while holding the supervisor lock: any socket file
// already there is stale. When .swarm/ is too deep for a socket path, the
// socket goes into a private directory under $XDG_RUNTIME_DIR or the temp
// dir (see privateRuntimeDir) and its path into control.addr.
func Listen(l repo.Layout) (*Server, error) {
	_ = os.Remove(l.ControlAddr())
	path, fallback, err := socketPath(l)
	if err != nil {
		return nil, err
	}
	ln, err := bindPrivate(path)
	if err != nil {
		return nil, err
	}
	s := newServer(ln, path)
	if fallback {
		s.addr = l.ControlAddr()
		if err := os.WriteFile(s.addr, []byte(path+"\n"), 0o644); err != nil {
			ln.Close()
			os.Remove(path)
			return nil, fmt.Errorf("write %s: %w", s.addr, err)
		}
	}
	return s, nil
}

func newServer(ln *net.UnixListener, path string) *Server {
	return &Server{
		ln:           ln,
		path:         path,
		maxConns:     defaultMaxConns,
		maxLine:      defaultMaxLine,
		idleTimeout:  defaultIdleTimeout,
		writeTimeout: defaultWriteTimeout,
		conns:        make(map[*conn]struct{}),
	}
}

// Close closes a server that will not Serve (Serve cleans up after
// itself): its socket and a door's directory are removed.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.cleanup()
	return err
}

func (s *Server) cleanup() {
	os.Remove(s.path)
	if s.addr != "" {
		os.Remove(s.addr)
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// Path is the bound socket path.
func (s *Server) Path() string { return s.path }

// Serve answers connections until ctx ends, then closes the socket and
// waits for the connections it started. Failing to accept a connection
// (out of descriptors, say) never ends it: the error is logged and accept
// is retried with backoff. Only ctx ending does, or the listener being
// closed under it.
func (s *Server) Serve(ctx context.Context, h Handler) error {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		wg.Wait()
		s.cleanup()
	}()
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("control socket %s: listener closed while serving: %w", s.path, err)
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			// Out of descriptors, an idle connection is the one
			// descriptor swarm can give back at once. accept4 fails so
			// whether or not anyone is connecting (the kernel takes the
			// descriptor first), so one is closed only for a connection
			// that is actually waiting: else every retry would close the
			// connection just admitted before it sent its request.
			freed := false
			if (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && s.pending() {
				freed = s.evictIdle()
			}
			// The listener's own address is where it was bound, the
			// staging path; name the socket by its real path instead.
			cause := err
			if op := (*net.OpError)(nil); errors.As(err, &op) {
				cause = op.Err
			}
			slog.Warn("control socket: accept failed; retrying", "path", s.path, "err", cause, "retry_in", backoff, "closed_idle", freed)
			s.notify(evAcceptError, err)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		backoff = 0
		cn := s.admit(c)
		if cn == nil {
			s.refuse(c)
			continue
		}
		wg.Go(func() { s.serveConn(ctx, cn, h) })
	}
}

// pending reports whether a connection waits to be accepted. It polls the
// listener, which takes no descriptor; when it cannot tell it says yes.
func (s *Server) pending() bool {
	rc, err := s.ln.SyscallConn()
	if err != nil {
		return true
	}
	ready := true
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		ready = err != nil || n > 0 && fds[0].Revents&unix.POLLIN != 0
	})
	return ready
}

// admit registers c, closing the oldest idle connection first when at the
// cap. It returns nil when every connection is busy.
func (s *Server) admit(c net.Conn) *conn {
	s.mu.Lock()
	full := s.active >= s.maxConns
	if full && !s.capWarned {
		s.capWarned = true
		slog.Warn("control socket: connection cap reached; closing the oldest idle connections to admit new ones", "max_conns", s.maxConns)
	}
	s.mu.Unlock()
	if full && !s.evictIdle() {
		return nil
	}
	s.mu.Lock()
	s.idleSeq++
	cn := &conn{Conn: c, idleSeq: s.idleSeq}
	s.conns[cn] = struct{}{}
	s.active++
	s.mu.Unlock()
	s.notify(evAdmit, nil)
	return cn
}

// evictIdle closes the oldest idle connection, if there is one.
func (s *Server) evictIdle() bool {
	s.mu.Lock()
	var oldest *conn
	for cn := range s.conns {
		if !cn.busy && !cn.closed && (oldest == nil || cn.idleSeq < oldest.idleSeq) {
			oldest = cn
		}
	}
	if oldest != nil {
		oldest.closed = true
		s.active--
	}
	s.mu.Unlock()
	if oldest == nil {
		return false
	}
	// Closing wakes its goroutine's pending read; the descriptor itself is
	// released when that read returns, and the goroutine then drops it.
	oldest.Close()
	slog.Debug("control socket: closed the oldest idle connection for room")
	s.notify(evEvict, nil)
	return true
}

// refuse answers a connection that cannot be admitted and closes it. The
// socket buffer of a fresh connection takes the short answer at once; the
// deadline covers a broken peer.
func (s *Server) refuse(c net.Conn) {
	slog.Debug("control socket: refused a connection; all are busy", "max_conns", s.maxConns)
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	b, _ := json.Marshal(Response{Error: fmt.Sprintf("the supervisor is answering %d connections (its limit); close a watching swarm command and retry", s.maxConns)})
	c.Write(append(b, '\n'))
	c.Close()
}

// setBusy marks cn busy or idle again. It reports false when cn was
// evicted meanwhile: its request, if any, must then not run.
func (s *Server) setBusy(cn *conn, busy bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cn.closed {
		return false
	}
	cn.busy = busy
	if !busy {
		s.idleSeq++
		cn.idleSeq = s.idleSeq
	}
	return true
}

// drop closes cn and unregisters it. It runs on cn's own goroutine, with
// no read pending, so the descriptor is closed by the time it returns.
func (s *Server) drop(cn *conn) {
	s.mu.Lock()
	if !cn.closed {
		cn.closed = true
		s.active--
	}
	s.mu.Unlock()
	cn.Close()
	s.mu.Lock()
	delete(s.conns, cn)
	s.mu.Unlock()
	s.notify(evDrop, nil)
}

// openConns is the number of connections whose descriptors are open.
func (s *Server) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) serveConn(ctx context.Context, cn *conn, h Handler) {
	defer s.drop(cn)
	if pid, ok := peerPID(cn.Conn); ok {
		ctx = context.WithValue(ctx, peerKey{}, pid)
	}
	stop := context.AfterFunc(ctx, func() { cn.Close() })
	defer stop()
	r := bufio.NewReader(cn)
	var mu sync.Mutex
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		cn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		_, err = cn.Write(append(b, '\n'))
		return err
	}
	for {
		// The deadline covers the whole line, so trickling one byte at a
		// time does not keep a connection alive either.
		cn.SetReadDeadline(time.Now().Add(s.idleTimeout))
		line, err := readLine(r, s.maxLine)
		if errors.Is(err, errLineTooLong) {
			slog.Warn("control socket: dropped a request line over the limit", "limit_bytes", s.maxLine)
			_ = send(Response{Error: fmt.Sprintf("request longer than %d bytes", s.maxLine)})
			return
		}
		if err != nil {
			return
		}
		if !s.setBusy(cn, true) {
			return
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			_ = send(Response{Error: "bad request: " + err.Error()})
			return
		}
		resp := h(ctx, req, send)
		if req.Op != OpPoke {
			// Pokes are fire-and-forget: the sender has already gone.
			if err := send(resp); err != nil {
				slog.Debug("control reply failed", "op", req.Op, "err", err)
				return
			}
		}
		if !s.setBusy(cn, false) {
			return
		}
	}
}

// readLine reads one '\n'-terminated line of at most limit bytes. A longer
// line returns errLineTooLong having held at most limit bytes plus r's
// buffer: unlike ReadBytes or a growing bufio.Scanner, it never buffers a
// line whole.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > limit {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
