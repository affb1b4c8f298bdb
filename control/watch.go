package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/swarmhq/swarm/repo"
)

// watchHandshake bounds the wait for the supervisor's first answer.
const watchHandshake = 5 * time.Second

// Stream is a subscription to a running supervisor's notices (OpWatch).
// It reads from one connection and is not safe for concurrent Next calls.
type Stream struct {
	ctx  context.Context
	c    net.Conn
	r    *bufio.Reader
	stop func() bool
}

// Watch subscribes to the supervisor's notices. It fails with
// ErrNoSupervisor (wrapped) when nothing listens. The stream ends when ctx
// ends, Close is called, or the supervisor stops.
func Watch(ctx context.Context, l repo.Layout) (*Stream, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", SocketPath(l))
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoSupervisor, err)
	}
	b, _ := json.Marshal(Request{Op: OpWatch})
	c.SetDeadline(time.Now().Add(watchHandshake))
	_, werr := c.Write(append(b, '\n'))
	// As in Call: a refusal may have been answered before the write.
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err != nil {
		c.Close()
		if werr != nil {
			err = werr
		}
		return nil, fmt.Errorf("control watch: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		c.Close()
		return nil, fmt.Errorf("control watch: bad answer: %w", err)
	}
	if !resp.OK {
		c.Close()
		return nil, fmt.Errorf("control watch: %s", resp.Error)
	}
	c.SetDeadline(time.Time{}) // notices come when they come
	s := &Stream{ctx: ctx, c: c, r: r}
	// Closing the connection is what unblocks a pending read.
	s.stop = context.AfterFunc(ctx, func() { c.Close() })
	return s, nil
}

// Next returns the next notice, one JSON object. It returns io.EOF when the
// supervisor ended the stream (it is stopping), and the cause of the
// Watch context when that ended.
func (s *Stream) Next() (json.RawMessage, error) {
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			if s.ctx.Err() != nil {
				return nil, context.Cause(s.ctx)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("control watch: %w", err)
		}
		// The supervisor ends the stream with its final Response, which
		// has "ok"; a notice never does.
		var probe struct {
			OK *bool `json:"ok"`
		}
		if json.Unmarshal(line, &probe) == nil && probe.OK != nil {
			return nil, io.EOF
		}
		if len(line) > 1 {
			return json.RawMessage(line[:len(line)-1]), nil
		}
	}
}

// Close ends the subscription.
func (s *Stream) Close() error {
	s.stop()
	return s.c.Close()
}
