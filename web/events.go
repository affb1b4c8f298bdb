package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/swarmhq/swarm/lifecycle"
)

// ringSize is how many events a reconnecting browser can catch up on with
// Last-Event-ID; one further behind is told to reload.
const ringSize = 512

// keepAlive is a comment line sent on an idle stream so that proxies and
// the browser keep it open; the only timer of a stream.
const keepAlive = 30 * time.Second

// event is one server-sent event: a notice, shortened to what the pages
// need to know that something changed.
type event struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	Agent string `json:"agent,omitempty"`
	Text  string `json:"text,omitempty"`
}

func eventOf(n lifecycle.Notice) event {
	ev := event{Kind: string(n.Kind), Agent: n.Agent, Text: n.Text}
	switch {
	case n.Kind == lifecycle.NoticeTransition:
		ev.Text = fmt.Sprintf("%s → %s", n.From, n.To)
	case n.Escalation != nil:
		ev.Text = fmt.Sprintf("escalation %d %s", n.Escalation.ID, n.Escalation.State)
	case n.Message != nil:
		ev.Text = fmt.Sprintf("mail #%d %s → %s", n.Message.ID, n.Message.From, n.Message.To)
	}
	return ev
}

// hub numbers the events and keeps the latest ringSize; every stream
// waits on changed, which publish closes and replaces, so a slow browser
// never holds up the notices, it only reads the ring later.
type hub struct {
	mu      sync.Mutex
	last    int64
	ring    []event
	changed chan struct{}
	closed  bool
}

func newHub() *hub { return &hub{changed: make(chan struct{})} }

func (h *hub) publish(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.last++
	ev.ID = h.last
	h.ring = append(h.ring, ev)
	if len(h.ring) > ringSize {
		h.ring = h.ring[len(h.ring)-ringSize:]
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.changed)
	}
}

// since returns the events after id, whether id is too old for the ring
// (gap), a channel closed at the next change, and whether the hub closed.
func (h *hub) since(id int64) (evs []event, gap bool, wait <-chan struct{}, closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id > h.last {
		id = h.last // an id from before a restart: start from now
	}
	if len(h.ring) > 0 && id < h.ring[0].ID-1 {
		gap = true
		id = h.ring[0].ID - 1
	}
	for _, ev := range h.ring {
		if ev.ID > id {
			evs = append(evs, ev)
		}
	}
	return evs, gap, h.changed, h.closed
}

// current is the newest event's id: where a page's stream starts.
func (h *hub) current() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// serveEvents is GET /events: the stream, from Last-Event-ID (sent by a
// reconnecting browser) or ?after= (the page's id when it was rendered),
// else from now.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	if _, _, _, closed := s.hub.since(0); closed {
		// No Content: the browser's EventSource stops reconnecting.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	after := s.hub.current()
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if id, err := strconv.ParseInt(v, 10, 64); err == nil && id >= 0 {
			after = id
			break
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		evs, gap, wait, closed := s.hub.since(after)
		if gap {
			fmt.Fprintf(w, "event: reload\ndata: {}\n\n")
		}
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\nevent: notice\ndata: %s\n\n", ev.ID, b)
			after = ev.ID
		}
		if len(evs) > 0 || gap {
			fl.Flush()
		}
		if closed {
			return
		}
		select {
		case <-wait:
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}
