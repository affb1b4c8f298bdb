package control

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/swarmhq/swarm/repo"
)

// maxSocketPath is the longest socket path bound in place; macOS allows 104
// bytes including the terminating NUL, Linux 108.
const maxSocketPath = 100

// Handler answers one request. Stream requests may write further lines with
// send until ctx ends.
type Handler func(ctx context.Context, req Request, send func(any) error) Response

// Server is a listening control socket.
type Server struct {
	ln   net.Listener
	path string
	addr string // control.addr written, if any
}

// Listen binds the control socket for l. It must only be called while
// holding the supervisor lock: any socket file already there is stale.
func Listen(l repo.Layout) (*Server, error) {
	path := l.Socket()
	addrFile := ""
	_ = os.Remove(l.ControlAddr())
	if len(path) > maxSocketPath {
		dir := os.Getenv("XDG_RUNTIME_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		sum := sha256.Sum256([]byte(l.State))
		path = filepath.Join(dir, "swarm-"+hex.EncodeToString(sum[:6])+".sock")
		addrFile = l.ControlAddr()
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(path+"\n"), 0o644); err != nil {
			ln.Close()
			return nil, fmt.Errorf("write %s: %w", addrFile, err)
		}
	}
	return &Server{ln: ln, path: path, addr: addrFile}, nil
}

// Path is the bound socket path.
func (s *Server) Path() string { return s.path }

// Serve answers connections until ctx ends, then closes the socket and
// waits for the connections it started.
func (s *Server) Serve(ctx context.Context, h Handler) error {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		wg.Wait()
		os.Remove(s.path)
		if s.addr != "" {
			os.Remove(s.addr)
		}
	}()
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("control socket: %w", err)
		}
		wg.Go(func() { serveConn(ctx, c, h) })
	}
}

func serveConn(ctx context.Context, c net.Conn, h Handler) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r := bufio.NewReader(c)
	var mu sync.Mutex
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = c.Write(append(b, '\n'))
		return err
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			_ = send(Response{Error: "bad request: " + err.Error()})
			return
		}
		resp := h(ctx, req, send)
		if req.Op == OpPoke {
			// Pokes are fire-and-forget: the sender has already gone.
			continue
		}
		if err := send(resp); err != nil {
			slog.Debug("control reply failed", "op", req.Op, "err", err)
			return
		}
	}
}
