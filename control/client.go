package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/swarmhq/swarm/repo"
)

// Request is one call to the supervisor.
type Request struct {
	Op    string `json:"op"`
	Agent string `json:"agent,omitempty"`
}

// Response is the supervisor's answer.
type Response struct {
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Operations.
const (
	OpPoke   = "poke"   // new mail or work: look now
	OpPing   = "ping"   // is anyone there; returns the pid
	OpStop   = "stop"   // stop gracefully
	OpPause  = "pause"  // pause Agent
	OpResume = "resume" // resume Agent
	OpWatch  = "watch"  // stream notices until the connection closes
)

// ErrNoSupervisor means nothing listens on the control socket.
var ErrNoSupervisor = errors.New("no supervisor is running")

// Poke tells a running supervisor to look at the database now. It does not
// wait for an answer and ignores every failure: the supervisor polls
// data_version as the fallback.
func Poke(l repo.Layout) {
	c, err := net.DialTimeout("unix", SocketPath(l), 200*time.Millisecond)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	c.Write([]byte(`{"op":"poke"}` + "\n"))
}

// Call sends one request and waits for the answer.
func Call(ctx context.Context, l repo.Layout, req Request) (Response, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", SocketPath(l))
	if err != nil {
		return Response{}, fmt.Errorf("%w (%v)", ErrNoSupervisor, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	b, _ := json.Marshal(req)
	_, werr := c.Write(append(b, '\n'))
	// A supervisor that refuses the connection (at its connection limit)
	// answers why and closes at once, maybe before the request was
	// written: the answer is still there to read.
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		if werr != nil {
			err = werr
		}
		return Response{}, fmt.Errorf("control %s: %w", req.Op, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("control %s: bad answer: %w", req.Op, err)
	}
	if !resp.OK {
		return resp, fmt.Errorf("control %s: %s", req.Op, resp.Error)
	}
	return resp, nil
}
