// Package web is the operator's desk on the web (DESIGN §15): `swarm web`
// and `swarm up --web` serve server-rendered pages (html/template, assets
// embedded, no build step, no CDN) of the agents, the mail, the
// escalations, the workflows, the merge queue, the file reservations and
// each session's log and prompt, kept live by server-sent events fed from
// the supervisor's notice bus.
//
// Every button calls a verb of DESIGN §13.1 as the operator, through the
// Desk (the live view's data path, tui.Source, plus the verbs the view does
// not use); a refusal is a 403 that names the rule. Reads go to the store.
// Only a request that carries the login token (a bearer header, or once in
// a URL to get a session cookie) is served; every POST also needs the
// session's CSRF token, and GET never changes anything.
package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/tui"
	"github.com/swarmhq/swarm/verbs"
)

// Desk is what the pages do as the operator, and read besides the store.
// cmd/swarmd implements it over the live view's source: in `swarm web`
// Next reads the control socket's watch stream, in `swarm up --web` the
// supervisor's notice bus.
type Desk interface {
	tui.Source
	// DecideNote acks or resolves an escalation as the operator with a
	// note (verbs.Decide), and tells the supervisor; approving a work
	// item's approval merges it, as 'swarm escalation approve' does.
	DecideNote(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error)
	// Merge merges an approved work item as 'swarm workflow merge' does,
	// and returns what it printed.
	Merge(ctx context.Context, item string) (string, error)
	// ReviewDiff is the reviewed diff of a commit, as a review request
	// carries it.
	ReviewDiff(ctx context.Context, commit string) (string, error)
	// Abort aborts a work item as 'swarm workflow abort' does.
	Abort(ctx context.Context, item, note string) error
	// Reply answers message id as the operator (verbs.Reply).
	Reply(ctx context.Context, id int64, d message.Draft) (message.Message, error)
	// MarkRead marks the operator's messages read (verbs.MarkRead).
	MarkRead(ctx context.Context, ids []int64) (int64, error)
	// SessionLog is the end of a session's log as 'swarm logs' renders it
	// (an exec agent's JSON events made readable, terminal controls shown
	// visibly); "" when there is none yet.
	SessionLog(ctx context.Context, agent string, seq int64) (string, error)
	// Land queues agent's branch in the merge queue as the operator
	// (verbs.Land, as 'swarm land <agent>' does) and tells the supervisor.
	Land(ctx context.Context, agent string) (verbs.LandResult, error)
	// CancelLanding takes merge candidate id out of the queue as the
	// operator (verbs.CancelLanding, 'swarm land --cancel').
	CancelLanding(ctx context.Context, id int64, note string) (merge.Candidate, error)
	// CheckoutBehind is the line 'swarm status' prints when the
	// operator's checkout is behind the base branch (a landing left a
	// dirty checkout alone); "" when it is not, or nobody can tell.
	CheckoutBehind(ctx context.Context) string
	// Release releases agent's reservations of globs (every one of the
	// agent's with none) as the operator (verbs.Release).
	Release(ctx context.Context, agent string, globs []string) (verbs.ReleaseResult, error)
}

// Options configure a Server.
type Options struct {
	Desk   Desk
	Store  mailbox.Store // reads only; writes go through the Desk's verbs
	Config *config.Config
	// Token is the login token; empty means a fresh random one.
	Token string
	// Title heads every page: the repository's root.
	Title string
	Log   *slog.Logger
	// Now is the clock ("3 minutes ago"); nil means time.Now. Location is
	// the zone times are shown in; nil means the machine's.
	Now      func() time.Time
	Location *time.Location
}

// Server is the desk: an http.Handler plus the notice pump behind its
// event stream.
type Server struct {
	opts   Options
	token  string
	auth   *auth
	hub    *hub
	mux    *http.ServeMux
	pages  []page
	render *renderer
	log    *slog.Logger
	now    func() time.Time
}

// New builds the desk. Run must be called for its event stream to move.
func New(opts Options) (*Server, error) {
	if opts.Desk == nil || opts.Store == nil || opts.Config == nil {
		return nil, errors.New("web: a desk, a store and a configuration are required")
	}
	tok := opts.Token
	if tok == "" {
		var err error
		if tok, err = NewToken(); err != nil {
			return nil, err
		}
	}
	s := &Server{opts: opts, token: tok, log: opts.Log, now: opts.Now}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.auth = newAuth(tok)
	s.hub = newHub()
	s.pages = pages()
	loc := opts.Location
	if loc == nil {
		loc = time.Local
	}
	r, err := newRenderer(s.pages, s.now, loc)
	if err != nil {
		return nil, err
	}
	s.render = r
	s.routes()
	return s, nil
}

// NewToken returns a fresh random login token.
func NewToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("web: make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Token is the login token.
func (s *Server) Token() string { return s.token }

// ServeHTTP serves the desk.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Run pumps the desk's notices into the event stream until ctx ends or the
// stream does (the supervisor stopped): the pages then say so.
func (s *Server) Run(ctx context.Context) error {
	defer s.hub.close()
	for {
		n, err := s.opts.Desk.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.hub.publish(event{Kind: "stopped", Text: "the supervisor stopped"})
			return err
		}
		s.hub.publish(eventOf(n))
	}
}

// CheckAddr refuses an address the desk may not listen on: anything but
// loopback needs a token file, so that the token is the operator's, kept
// where they chose, not one printed to a terminal.
func CheckAddr(addr string, tokenFile string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q is not host:port (for example 127.0.0.1:8080): %w", addr, err)
	}
	if isLoopback(host) || tokenFile != "" {
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address: the desk serves it only with a token the operator keeps; set [web] token_file in swarm.toml (or --token-file) to a file holding a long random token, or use 127.0.0.1", addr)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve serves the desk on l until ctx ends, then shuts down: open event
// streams end at once, requests in flight get a moment.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(s.hub.close)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // the server is going
	}()
	err := srv.Serve(l)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// URL is the address to open: with the token once, so the first visit
// logs in.
func URL(l net.Listener, token string) string {
	return fmt.Sprintf("http://%s/?token=%s", l.Addr().String(), token)
}
