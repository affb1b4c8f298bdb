package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
)

// The custom commands of the escalation journeys (testdata/up/escalate_*).
// They wait on what the notify hooks received and on the store, bounded
// by waitLimit; none sleeps for a fixed time.

// hookServer is the webhook every up script may post to: each script gets
// its own path, $WEBHOOK_URL.
type hookServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][]string // path -> bodies, in arrival order
}

func newHookServer() *hookServer {
	h := &hookServer{bodies: map[string][]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies[r.URL.Path] = append(h.bodies[r.URL.Path], string(b))
		h.mu.Unlock()
	}))
	return h
}

// url is the webhook of the script whose work directory is work.
func (h *hookServer) url(work string) string { return h.URL + "/" + filepath.Base(work) }

// cmdWebhook waits for the n-th POST to the script's webhook and prints
// its body: webhook <n>.
func (h *hookServer) cmdWebhook(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: webhook <n>")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		ts.Fatalf("bad count %q", args[0])
	}
	key := "/" + path.Base(ts.Getenv("WORK"))
	var body string
	poll(ts, fmt.Sprintf("webhook POST %d", n), func() (bool, string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		got := h.bodies[key]
		if len(got) < n {
			return false, fmt.Sprintf("%d POST(s)", len(got))
		}
		body = got[n-1]
		return true, ""
	})
	fmt.Fprint(ts.Stdout(), body)
}

// cmdHookLine waits for the n-th event the notify command logged to
// $WORK/hook.log ("<event>\t<unix ns>\t<json>" per line) and prints its
// JSON: hookline <n> [within]. With within, the command must have got it
// at most that long after the escalation was created.
func cmdHookLine(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 || neg {
		ts.Fatalf("usage: hookline <n> [within]")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		ts.Fatalf("bad line number %q", args[0])
	}
	var line string
	poll(ts, fmt.Sprintf("notify command event %d", n), func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(ts.Getenv("WORK"), "hook.log"))
		if err != nil {
			return false, err.Error()
		}
		// Only whole lines: the hook may be writing the last one.
		lines := strings.Split(string(b), "\n")
		lines = lines[:len(lines)-1]
		if len(lines) < n {
			return false, fmt.Sprintf("%d line(s)", len(lines))
		}
		line = lines[n-1]
		return true, ""
	})
	event, rest, _ := strings.Cut(line, "\t")
	at, payload, _ := strings.Cut(rest, "\t")
	var p struct {
		Event     string    `json:"event"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		ts.Fatalf("line %d is not an event: %q", n, line)
	}
	if p.Event != event {
		ts.Fatalf("line %d: SWARM_EVENT %q, but the JSON says %q", n, event, p.Event)
	}
	if len(args) == 2 {
		within, err := time.ParseDuration(args[1])
		if err != nil {
			ts.Fatalf("bad duration %q", args[1])
		}
		ns, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			ts.Fatalf("line %d has no time (date +%%s%%N): %q", n, at)
		}
		lag := time.Unix(0, ns).Sub(p.CreatedAt)
		ts.Logf("escalation created to notify command: %s", lag)
		if lag > within {
			ts.Fatalf("the notify command got the event %s after the escalation was created, want within %s", lag, within)
		}
	}
	fmt.Fprint(ts.Stdout(), payload)
}

// cmdWaitSession waits for the agent's session seq to start, at most
// within from now: waitsession <agent> <seq> <within>.
func cmdWaitSession(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 || neg {
		ts.Fatalf("usage: waitsession <agent> <seq> <within>")
	}
	seq, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("bad session %q", args[1])
	}
	within, err := time.ParseDuration(args[2])
	if err != nil {
		ts.Fatalf("bad duration %q", args[2])
	}
	st := openScriptStore(ts)
	defer st.Close()
	start := time.Now()
	poll(ts, fmt.Sprintf("session %d of %s", seq, args[0]), func() (bool, string) {
		_, err := st.Session(context.Background(), args[0], seq)
		if errors.Is(err, mailbox.ErrNoSuchSession) {
			return false, "not started"
		}
		return err == nil, fmt.Sprint(err)
	})
	if took := time.Since(start); took > within {
		ts.Fatalf("session %d of %s started %s later, want within %s", seq, args[0], took, within)
	}
}

// cmdEscID waits for an escalation of kind about agent and sets $ESC to
// its id: escid <agent> <kind>.
func cmdEscID(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: escid <agent> <kind>")
	}
	st := openScriptStore(ts)
	defer st.Close()
	var id int64
	poll(ts, fmt.Sprintf("a %s escalation about %s", args[1], args[0]), func() (bool, string) {
		es, err := st.Escalations(context.Background(), mailbox.EscalationFilter{All: true, Agent: args[0]})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range es {
			if e.Kind == escalation.Kind(args[1]) {
				id = e.ID
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d other escalation(s)", len(es))
	})
	ts.Setenv("ESC", strconv.FormatInt(id, 10))
}
