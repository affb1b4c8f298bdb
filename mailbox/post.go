package mailbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/swarmhq/swarm/message"
)

// Waker is told about mail right after it is stored. In the supervisor it
// wakes the recipients' runners; in a short CLI process it pokes the
// running supervisor over the control socket. It must not block for long.
type Waker interface {
	Wake(ctx context.Context, posted []message.Message)
}

// WakerFunc adapts a function to Waker.
type WakerFunc func(ctx context.Context, posted []message.Message)

// Wake calls f.
func (f WakerFunc) Wake(ctx context.Context, posted []message.Message) { f(ctx, posted) }

// Poster is the one way mail is posted: it validates a draft against the
// names mail may be addressed to, stores it, and wakes whoever must know.
// The CLI, the live view, the engines' tools, nudges and the supervisor's
// own notices all post through it.
type Poster struct {
	store Store
	wake  Waker

	mu    sync.RWMutex
	names []string // agents mail may be addressed to, besides operator
}

// NewPoster returns a Poster over store for the given agent names. wake
// may be nil (nothing to wake: tests, tools that only store).
func NewPoster(store Store, names []string, wake Waker) *Poster {
	return &Poster{store: store, wake: wake, names: slices.Clone(names)}
}

// SetNames replaces the names mail may be addressed to (agents spawned or
// retired at run time).
func (p *Poster) SetNames(names []string) {
	p.mu.Lock()
	p.names = slices.Clone(names)
	p.mu.Unlock()
}

// Names returns the names mail may be addressed to, besides operator.
func (p *Poster) Names() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.names)
}

// Post validates, stores and announces one message. A draft with ReplyTo
// joins the thread of the message it answers.
func (p *Poster) Post(ctx context.Context, d message.Draft) (message.Message, error) {
	d = d.Normalize()
	if err := message.Validate(d, p.Names()); err != nil {
		return message.Message{}, err
	}
	ms, err := p.store.InsertMessages(ctx, []message.Draft{d})
	if err != nil {
		return message.Message{}, fmt.Errorf("send to %s: %w", d.To, err)
	}
	p.announce(ctx, ms)
	return ms[0], nil
}

// Reply answers message id: the reply goes back to that message's sender,
// in its thread.
func (p *Poster) Reply(ctx context.Context, id int64, d message.Draft) (message.Message, error) {
	orig, err := p.store.Message(ctx, id)
	if err != nil {
		return message.Message{}, fmt.Errorf("reply to #%d: %w", id, err)
	}
	d.To, d.ReplyTo = orig.From, id
	return p.Post(ctx, d)
}

// Broadcast sends one copy to every agent except the sender, all or none.
// Operator is not a broadcast recipient.
func (p *Poster) Broadcast(ctx context.Context, d message.Draft) ([]message.Message, error) {
	d = d.Normalize()
	names := p.Names()
	var drafts []message.Draft
	for _, a := range names {
		if a == d.From {
			continue
		}
		c := d
		c.To = a
		if err := message.Validate(c, names); err != nil {
			return nil, err
		}
		drafts = append(drafts, c)
	}
	if len(drafts) == 0 {
		return nil, fmt.Errorf("broadcast from %s: no other agents to send to (swarm.toml has %s)", d.From, strings.Join(names, ", "))
	}
	ms, err := p.store.InsertMessages(ctx, drafts)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	p.announce(ctx, ms)
	return ms, nil
}

func (p *Poster) announce(ctx context.Context, ms []message.Message) {
	if p.wake != nil && len(ms) > 0 {
		p.wake.Wake(ctx, ms)
	}
}
