package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/repo"
)

// failsafe bounds waits that only a broken server would reach; the tests
// wait on channels and reads, never on sleeps.
const failsafe = 30 * time.Second

func newLayout(t *testing.T) repo.Layout {
	t.Helper()
	l := repo.At(t.TempDir(), "")
	if err := os.MkdirAll(l.State, 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

func pingHandler(ctx context.Context, req Request, send func(any) error) Response {
	if req.Op == OpPing {
		return Response{OK: true, Data: json.RawMessage(`{"pid":1}`)}
	}
	return Response{OK: true}
}

// start runs srv until the test ends and returns a channel that receives
// Serve's result should it return early.
func start(t *testing.T, srv *Server, h Handler) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return done
}

func ping(t *testing.T, l repo.Layout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	if _, err := Call(ctx, l, Request{Op: OpPing}); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func checkMode(t *testing.T, path string, typ, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != typ || fi.Mode().Perm() != perm {
		t.Fatalf("%s has mode %v, want %v%#o", path, fi.Mode(), typ, perm)
	}
}

func TestSocketIsPrivateWhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0o002, 0o000, 0o077} {
		withUmask(t, mask)
		l := newLayout(t)
		// A stale socket file, as a kill -9 leaves it, is replaced.
		os.WriteFile(l.Socket(), nil, 0o666)
		srv, err := Listen(l)
		if err != nil {
			t.Fatalf("umask %#o: %v", mask, err)
		}
		start(t, srv, pingHandler)
		checkMode(t, l.Socket(), fs.ModeSocket, 0o600)
		if _, err := os.Stat(l.Socket() + stageSuffix); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("umask %#o: staging directory left behind: %v", mask, err)
		}
		ping(t, l)
	}
}

func TestFallbackSocketIsPrivate(t *testing.T) {
	withUmask(t, 0o002)
	l := repo.At(filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60)), "")
	os.MkdirAll(l.State, 0o755)
	xdg := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	start(t, srv, pingHandler)
	dir := filepath.Join(xdg, "swarm-"+strconv.Itoa(os.Getuid()))
	if filepath.Dir(srv.Path()) != dir {
		t.Fatalf("socket %s is not in %s", srv.Path(), dir)
	}
	checkMode(t, dir, fs.ModeDir, 0o700)
	checkMode(t, srv.Path(), fs.ModeSocket, 0o600)
	ping(t, l)
}

func TestFallbackDirectoryRefusedUnlessPrivate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir string)
		want  string
	}{
		{"open mode", func(t *testing.T, dir string) {
			os.Mkdir(dir, 0o755)
			os.Chmod(dir, 0o755)
		}, "its mode is 0755, not 0700"},
		{"symlink", func(t *testing.T, dir string) {
			target := t.TempDir() // 0700 and ours: only the link is wrong
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}, "it is a symlink"},
		{"file", func(t *testing.T, dir string) {
			os.WriteFile(dir, nil, 0o600)
		}, "it is not a directory"},
		{"owner", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to make a directory owned by someone else")
			}
			os.Mkdir(dir, 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "it is owned by uid 65534, not by you"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := repo.At(filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60)), "")
			os.MkdirAll(l.State, 0o755)
			xdg := t.TempDir()
			t.Setenv("XDG_RUNTIME_DIR", xdg)
			dir := filepath.Join(xdg, "swarm-"+strconv.Itoa(os.Getuid()))
			tc.plant(t, dir)
			srv, err := Listen(l)
			if err == nil {
				srv.ln.Close()
				t.Fatalf("Listen used %s", srv.Path())
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") {
				t.Fatalf("err = %v, want %q and what to do", err, tc.want)
			}
		})
	}
}

// 5,000 idle connections: the server holds at most its cap, closing the
// oldest idle ones, and a real request is still answered.
func TestIdleConnectionsAreCapped(t *testing.T) {
	const idle = 5000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < idle+defaultMaxConns+100 {
		t.Skipf("needs %d descriptors (limit %d, %v)", idle+defaultMaxConns+100, lim.Cur, err)
	}
	l := newLayout(t)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	srv.idleTimeout = time.Hour // only the cap closes connections here
	var evicted atomic.Int64
	admitted := make(chan struct{}, idle+10)
	srv.hook = func(ev event, _ error) {
		switch ev {
		case evEvict:
			evicted.Add(1)
		case evAdmit:
			admitted <- struct{}{}
		}
	}
	start(t, srv, pingHandler)

	conns := make([]net.Conn, 0, idle)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	seen := 0
	for range idle {
		// A unix connect fails with EAGAIN when the accept backlog is
		// full: stay well within it.
		for len(conns)-seen >= 1000 {
			<-admitted
			seen++
		}
		c, err := net.Dial("unix", srv.Path())
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Accepts are in order: the ping is answered after all idle ones
	// were admitted.
	ping(t, l)
	if got, want := evicted.Load(), int64(idle+1-defaultMaxConns); got != want {
		t.Errorf("closed %d idle connections for room, want %d", got, want)
	}
	if n := activeConns(srv); n > defaultMaxConns {
		t.Errorf("%d connections open, cap %d", n, defaultMaxConns)
	}
	// The oldest went first.
	conns[0].SetReadDeadline(time.Now().Add(failsafe))
	if _, err := conns[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("oldest idle connection: read = %v, want EOF", err)
	}
	t.Logf("%d idle connections: %d closed for room, %d open, ping answered", idle, evicted.Load(), activeConns(srv))
}

// A watch stream is busy: at the cap, idle connections are closed for room
// and the stream goes on. When everything is busy a new connection is
// refused with an answer that says why.
func TestWatchIsNotClosedForRoom(t *testing.T) {
	l := newLayout(t)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	srv.maxConns = 2
	evicted := make(chan struct{}, 10)
	dropped := make(chan struct{}, 10)
	srv.hook = func(ev event, _ error) {
		switch ev {
		case evEvict:
			evicted <- struct{}{}
		case evDrop:
			dropped <- struct{}{}
		}
	}
	notify := make(chan string)
	start(t, srv, func(ctx context.Context, req Request, send func(any) error) Response {
		if req.Op != OpWatch {
			return Response{OK: true}
		}
		send(Response{OK: true})
		for {
			select {
			case <-ctx.Done():
				return Response{OK: true}
			case kind := <-notify:
				send(notice{Kind: kind})
			}
		}
	})
	s, err := Watch(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var idle []net.Conn
	for range 3 {
		c, err := net.Dial("unix", srv.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	ping(t, l) // admitted by closing the last idle connection
	for range 3 {
		<-evicted
	}
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(failsafe))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection %d: read = %v, want EOF", i, err)
		}
	}
	notify <- "still-here"
	if got, err := s.Next(); err != nil || !strings.Contains(string(got), "still-here") {
		t.Fatalf("watch after the cap: %s, %v", got, err)
	}

	// Only busy connections: refused, with a reason. The connections
	// above must be gone first, the ping's included, or one would still
	// be idle.
	for range 4 {
		<-dropped
	}
	srv.mu.Lock()
	srv.maxConns = 1
	srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	if _, err := Call(ctx, l, Request{Op: OpPing}); err == nil || !strings.Contains(err.Error(), "its limit") {
		t.Fatalf("ping with every connection busy: %v", err)
	}
	notify <- "and-still"
	if got, err := s.Next(); err != nil || !strings.Contains(string(got), "and-still") {
		t.Fatalf("watch after a refusal: %s, %v", got, err)
	}
}

// A connection that does not finish its line in time is closed, however
// it trickles.
func TestIdleConnectionTimesOut(t *testing.T) {
	l := newLayout(t)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	srv.idleTimeout = 50 * time.Millisecond
	dropped := make(chan struct{}, 2)
	srv.hook = func(ev event, _ error) {
		if ev == evDrop {
			dropped <- struct{}{}
		}
	}
	start(t, srv, pingHandler)
	for _, partial := range []string{"", `{"op":`} {
		c, err := net.Dial("unix", srv.Path())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(partial))
		c.SetReadDeadline(time.Now().Add(failsafe))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("after %q: read = %v, want EOF from the server", partial, err)
		}
		c.Close()
		<-dropped
	}
	if n := srv.openConns(); n != 0 {
		t.Fatalf("%d connections still open", n)
	}
}

// A long request within the limit spans many reads of the buffer and is
// answered.
func TestLongRequestWithinLimit(t *testing.T) {
	l := newLayout(t)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	start(t, srv, func(ctx context.Context, req Request, send func(any) error) Response {
		got <- req.Agent
		return Response{OK: true}
	})
	agent := strings.Repeat("a", defaultMaxLine-100)
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	if _, err := Call(ctx, l, Request{Op: OpPause, Agent: agent}); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a != agent {
		t.Fatalf("agent of %d bytes arrived as %d bytes", len(agent), len(a))
	}
}

// A 100 MB line is dropped after the first MiB: the connection is closed
// and the server's memory does not follow the line.
func TestHugeLineDroppedWithBoundedMemory(t *testing.T) {
	const lineSize = 100 << 20
	l := newLayout(t)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	start(t, srv, pingHandler)
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// The line is streamed from one reused chunk, so the only memory that
	// can grow with it is the server's.
	chunk := []byte(strings.Repeat("x", 64<<10))
	c.SetWriteDeadline(time.Now().Add(failsafe))
	sent := 0
	for sent < lineSize {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	runtime.ReadMemStats(&after)
	if sent >= lineSize {
		t.Fatalf("the server took all %d bytes of the line", sent)
	}
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	total := after.TotalAlloc - before.TotalAlloc
	t.Logf("100 MB line: server closed after %d bytes; heap grew %d bytes, %d bytes allocated in all", sent, heap, total)
	// TotalAlloc counts what a collection may have freed meanwhile, so it
	// catches buffering that HeapAlloc could miss.
	if heap > 50<<20 || total > 50<<20 {
		t.Fatalf("heap grew %d bytes, %d allocated, for one dropped line", heap, total)
	}
	ping(t, l)
}

func activeConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// The supervisor's descriptors run out: accept fails with EMFILE, and Serve
// retries instead of ending (which stopped the whole swarm). The limit is
// lowered in a child process, since RLIMIT_NOFILE is process-wide.
func TestServeSurvivesDescriptorExhaustion(t *testing.T) {
	if os.Getenv("CONTROL_TEST_EMFILE_CHILD") == "1" {
		emfileChild(t)
		return
	}
	cmd := execSelf(t, "^TestServeSurvivesDescriptorExhaustion$", "CONTROL_TEST_EMFILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "emfile child: ok") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "emfile child:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// execSelf runs this test binary again with only the tests matching run,
// bounded so a hung child fails rather than stalls the suite.
func execSelf(t *testing.T, run string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// rawRequest makes an unconnected unix socket now and returns a function
// that connects it, sends one request and returns the answer. Connecting
// takes no descriptor, so it works with none left, leaving the server's
// accept to find none either.
func rawRequest(t *testing.T, path string) func() (string, error) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return func() (string, error) {
		defer syscall.Close(fd)
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
			return "", fmt.Errorf("connect: %w", err)
		}
		if _, err := syscall.Write(fd, []byte(`{"op":"ping"}`+"\n")); err != nil {
			return "", fmt.Errorf("write: %w", err)
		}
		var answer []byte
		buf := make([]byte, 256)
		for !strings.HasSuffix(string(answer), "\n") {
			n, err := syscall.Read(fd, buf)
			if err != nil || n == 0 {
				return string(answer), fmt.Errorf("read: %v after %q", err, answer)
			}
			answer = append(answer, buf[:n]...)
		}
		return string(answer), nil
	}
}

func emfileChild(t *testing.T) {
	l := newLayout(t)
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	admitted := make(chan struct{}, 100)
	dropped := make(chan struct{}, 100)
	acceptErrs := make(chan error, 1000)
	srv.hook = func(ev event, err error) {
		switch ev {
		case evAdmit:
			admitted <- struct{}{}
		case evDrop:
			dropped <- struct{}{}
		case evAcceptError:
			select {
			case acceptErrs <- err:
			default:
			}
		}
	}
	served := start(t, srv, pingHandler)
	lim := syscall.Rlimit{Cur: 64, Max: 64}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}

	var fillers []*os.File
	// fill takes every free descriptor.
	fill := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				if !errors.Is(err, syscall.EMFILE) {
					t.Fatal(err)
				}
				return
			}
			fillers = append(fillers, f)
		}
	}
	unfill := func() {
		for _, f := range fillers {
			f.Close()
		}
		fillers = nil
	}
	defer unfill()
	answer := func(request func() (string, error)) <-chan error {
		done := make(chan error, 1)
		go func() {
			got, err := request()
			if err == nil && !strings.Contains(got, `"ok":true`) {
				err = fmt.Errorf("answer %q", got)
			}
			done <- err
		}()
		return done
	}

	// 1. With an idle connection open, the server gives its descriptor
	// back and answers without any other descriptor being freed.
	idle, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	<-admitted
	request := rawRequest(t, srv.Path())
	fill()
	if err := <-answer(request); err != nil {
		t.Fatalf("request with descriptors exhausted: %v", err)
	}
	if len(acceptErrs) == 0 {
		t.Fatal("accept never failed: the limit did not bite")
	}
	if err := <-acceptErrs; !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("accept error = %v, want EMFILE", err)
	}
	idle.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read = %v, want EOF (closed to free a descriptor)", err)
	}
	idle.Close()
	<-dropped // the idle connection
	<-dropped // the request's
	for len(acceptErrs) > 0 {
		<-acceptErrs
	}
	unfill()

	// 2. Nothing to give back: accept keeps failing, Serve keeps trying,
	// and answers once descriptors are free again.
	request = rawRequest(t, srv.Path())
	fill()
	answered := answer(request)
	for range 3 {
		if err := <-acceptErrs; !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("accept error = %v, want EMFILE", err)
		}
	}
	select {
	case err := <-served:
		t.Fatalf("Serve ended on EMFILE: %v", err)
	default:
	}
	unfill()
	if err := <-answered; err != nil {
		t.Fatalf("request after descriptors came back: %v", err)
	}
	ping(t, l)
	t.Logf("emfile child: ok: descriptor limit %d, Serve survived repeated EMFILE and answered", lim.Cur)
}
