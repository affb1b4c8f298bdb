package web

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/verbs"
)

// maxForm bounds a POST's body: a note or a message, never a file.
const maxForm = 1 << 20

// interruptBody is the urgent mail the interrupt button sends, as the live
// view's i key does.
const interruptBody = "interrupted by operator"

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", staticFS())
	m.HandleFunc("GET /{$}", s.authed(func(w http.ResponseWriter, r *http.Request, _ access) {
		http.Redirect(w, r, "/agents", http.StatusSeeOther)
	}))
	m.HandleFunc("POST /login", s.loginForm)
	m.HandleFunc("GET /events", s.authed(func(w http.ResponseWriter, r *http.Request, _ access) { s.serveEvents(w, r) }))
	for _, p := range s.pages {
		m.HandleFunc("GET "+p.Pattern, s.authed(s.pageHandler(p)))
	}
	m.HandleFunc("POST /agents/{agent}/message", s.action(s.doMessage))
	m.HandleFunc("POST /agents/{agent}/interrupt", s.action(s.doInterrupt))
	m.HandleFunc("POST /agents/{agent}/pause", s.action(s.doPause(true)))
	m.HandleFunc("POST /agents/{agent}/resume", s.action(s.doPause(false)))
	m.HandleFunc("POST /escalations/{id}/{action}", s.action(s.doDecide))
	m.HandleFunc("POST /mail/{id}/reply", s.action(s.doReply))
	m.HandleFunc("POST /mail/{id}/read", s.action(s.doRead))
	m.HandleFunc("POST /workflows/{id}/merge", s.action(s.doMerge))
	m.HandleFunc("POST /workflows/{id}/abort", s.action(s.doAbort))
	m.HandleFunc("POST /merges/land", s.action(s.doLand))
	m.HandleFunc("POST /merges/{id}/cancel", s.action(s.doCancelLanding))
	m.HandleFunc("POST /reservations/{agent}/release", s.action(s.doRelease))
	s.mux = m
}

// headers every answer carries: no framing, no script but the desk's own,
// nothing cached, no referrer to other sites (a URL may carry the token
// once).
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make a browser send "Origin: null" with the forms
	h.Set("Cache-Control", "no-store")
}

// authed serves only a logged-in browser or a bearer. A GET with the
// right ?token= logs in: the cookie is set and the token leaves the URL.
func (s *Server) authed(next func(http.ResponseWriter, *http.Request, access)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		if tok := r.URL.Query().Get("token"); tok != "" {
			if !s.auth.tokenOK(tok) {
				s.loginPage(w, http.StatusUnauthorized, "That token is wrong: use the URL 'swarm web' printed.")
				return
			}
			http.SetCookie(w, s.auth.login())
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		acc := s.auth.who(r)
		if !acc.ok() {
			s.loginPage(w, http.StatusUnauthorized, "")
			return
		}
		next(w, r, acc)
	}
}

func (s *Server) loginPage(w http.ResponseWriter, code int, problem string) {
	s.write(w, code, "login", view{Title: "Log in", Data: problem}, false)
}

// loginForm is POST /login: the token pasted into the login page.
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	secure(w)
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if !sameOrigin(r) || !s.auth.tokenOK(r.PostFormValue("token")) {
		s.loginPage(w, http.StatusUnauthorized, "That token is wrong: use the one 'swarm web' printed.")
		return
	}
	http.SetCookie(w, s.auth.login())
	http.Redirect(w, r, "/agents", http.StatusSeeOther)
}

func (s *Server) pageHandler(p page) func(http.ResponseWriter, *http.Request, access) {
	return func(w http.ResponseWriter, r *http.Request, acc access) {
		after := s.hub.current() // before the read: a change during it is sent again
		data, err := p.load(s, r)
		if err != nil {
			s.fail(w, r, acc, err)
			return
		}
		v := view{Title: p.Title, Active: p.Name, CSRF: acc.csrf, After: after, Done: r.URL.Query().Get("done"), Data: data}
		s.write(w, http.StatusOK, p.Name, v, r.Header.Get("X-Fragment") == "1")
	}
}

// write renders a page, or only its content for the script's swap.
func (s *Server) write(w http.ResponseWriter, code int, name string, v view, fragment bool) {
	// The login page names nothing of the swarm, not even where it is.
	if name != "login" {
		v.Repo = s.opts.Title
		for _, p := range s.pages {
			if p.Nav != "" {
				v.Nav = append(v.Nav, p)
			}
		}
	}
	t := s.render.pages[name]
	var b bytes.Buffer
	tmpl := "layout"
	if fragment {
		tmpl = "content"
	}
	if err := t.ExecuteTemplate(&b, tmpl, v); err != nil {
		s.log.Error("web: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered; the desk's log says why", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes()) //nolint:errcheck // the browser went
}

// fail answers an error: a refusal of a verb is 403 naming the rule, a
// decision already made 409, a thing not there 404, bad input 400.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, acc access, err error) {
	code := http.StatusInternalServerError
	var ref *identity.Refusal
	var nf notFound
	var ue *verbs.UsageError
	var ill *verbs.IllegalSignalError
	var bad badInput
	switch {
	case errors.As(err, &ref):
		code = http.StatusForbidden
	case errors.Is(err, verbs.ErrDecided), errors.Is(err, mailbox.ErrStateConflict), errors.Is(err, verbs.ErrLeftQueue):
		code = http.StatusConflict
	case errors.As(err, &nf), errors.Is(err, mailbox.ErrNoSuchMessage), errors.Is(err, mailbox.ErrNoSuchAgent),
		errors.Is(err, mailbox.ErrNoSuchItem), errors.Is(err, mailbox.ErrNoSuchEscalation), errors.Is(err, mailbox.ErrNoSuchSession),
		errors.Is(err, mailbox.ErrNoSuchCandidate):
		code = http.StatusNotFound
	case errors.As(err, &ue), errors.As(err, &ill), errors.As(err, &bad):
		code = http.StatusBadRequest
	}
	if code == http.StatusInternalServerError {
		s.log.Error("web: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	s.write(w, code, "error", view{Title: http.StatusText(code), CSRF: acc.csrf, Data: errorData{Code: code, Text: err.Error(), Back: back(r)}}, false)
}

type errorData struct {
	Code int
	Text string
	Back string
}

// badInput is a form the desk cannot act on.
type badInput string

func (e badInput) Error() string { return string(e) }

// action runs a state-changing POST: the session's cookie and its CSRF
// token (or the bearer token), from this origin; then the verb, then back
// to the page with what it did.
func (s *Server) action(fn func(r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		acc := s.auth.who(r)
		if !acc.ok() {
			s.loginPage(w, http.StatusUnauthorized, "")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, acc, badInput("the form could not be read: "+err.Error()))
			return
		}
		if !sameOrigin(r) || !acc.csrfOK(r) {
			s.write(w, http.StatusForbidden, "error", view{Title: "Forbidden", CSRF: acc.csrf, Data: errorData{Code: http.StatusForbidden,
				Text: "this form's CSRF token is missing or stale (or it came from another site): nothing was done; reload the page and try again", Back: back(r)}}, false)
			return
		}
		done, err := fn(r)
		if err != nil {
			s.fail(w, r, acc, err)
			return
		}
		s.log.Info("web: operator action", "path", r.URL.Path, "done", done)
		// Other browsers look again too: not every verb has a notice of
		// its own (a candidate queued, a reservation released).
		s.hub.publish(event{Kind: "desk", Text: done})
		to := back(r)
		sep := "?"
		if strings.Contains(to, "?") {
			sep = "&"
		}
		http.Redirect(w, r, to+sep+"done="+url.QueryEscape(done), http.StatusSeeOther)
	}
}

// back is where an action returns: the form's back field when it is a
// path of this desk, else the agents page.
func back(r *http.Request) string {
	b := r.PostFormValue("back")
	if u, err := url.Parse(b); err == nil && strings.HasPrefix(b, "/") && !strings.HasPrefix(b, "//") && u.Host == "" && !strings.Contains(b, "\\") {
		q := u.Query()
		q.Del("done")
		u.RawQuery = q.Encode()
		return u.RequestURI()
	}
	return "/agents"
}

func (s *Server) doMessage(r *http.Request) (string, error) {
	agent, body := r.PathValue("agent"), strings.TrimSpace(r.PostFormValue("body"))
	if body == "" {
		return "", badInput("the message is empty: write something to send")
	}
	urgent := r.PostFormValue("urgent") != ""
	m, err := s.opts.Desk.Send(r.Context(), agent, body, urgent)
	if err != nil {
		return "", err
	}
	what := "sent"
	if urgent {
		what = "sent urgent"
	}
	return fmt.Sprintf("%s #%d to %s", what, m.ID, agent), nil
}

func (s *Server) doInterrupt(r *http.Request) (string, error) {
	agent := r.PathValue("agent")
	m, err := s.opts.Desk.Send(r.Context(), agent, interruptBody, true)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("interrupting %s (urgent #%d)", agent, m.ID), nil
}

func (s *Server) doPause(pause bool) func(r *http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		agent := r.PathValue("agent")
		if err := s.opts.Desk.SetPaused(r.Context(), agent, pause); err != nil {
			return "", err
		}
		if pause {
			return agent + " pauses after its session", nil
		}
		return agent + " resumed", nil
	}
}

func (s *Server) doDecide(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return "", notFound{"no escalation " + r.PathValue("id")}
	}
	action := escalation.Event(r.PathValue("action"))
	if action != escalation.Ack && !escalation.Decision(action).Valid() {
		return "", badInput(fmt.Sprintf("unknown action %q (valid: ack, resume, abort, approve, reject)", action))
	}
	e, err := s.opts.Desk.DecideNote(r.Context(), id, action, r.PostFormValue("note"))
	if err != nil {
		return "", err
	}
	if action == escalation.Ack {
		return fmt.Sprintf("escalation %d acked", e.ID), nil
	}
	return fmt.Sprintf("escalation %d resolved: %s", e.ID, action), nil
}

func (s *Server) doReply(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return "", notFound{"no message " + r.PathValue("id")}
	}
	body := strings.TrimSpace(r.PostFormValue("body"))
	if body == "" {
		return "", badInput("the reply is empty: write something to send")
	}
	m, err := s.opts.Desk.Reply(r.Context(), id, message.Draft{Body: body})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("replied #%d to %s", m.ID, m.To), nil
}

func (s *Server) doRead(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return "", notFound{"no message " + r.PathValue("id")}
	}
	n, err := s.opts.Desk.MarkRead(r.Context(), []int64{id})
	if err != nil {
		return "", err
	}
	if n == 0 {
		return fmt.Sprintf("message %d was read already", id), nil
	}
	return fmt.Sprintf("message %d marked read", id), nil
}

func (s *Server) doMerge(r *http.Request) (string, error) {
	return s.opts.Desk.Merge(r.Context(), r.PathValue("id"))
}

func (s *Server) doAbort(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := s.opts.Desk.Abort(r.Context(), id, r.PostFormValue("note")); err != nil {
		return "", err
	}
	return "item " + id + " aborted; its agents' branches keep their work", nil
}

func (s *Server) doLand(r *http.Request) (string, error) {
	agent := strings.TrimSpace(r.PostFormValue("agent"))
	if agent == "" {
		return "", badInput("name the agent whose branch lands")
	}
	res, err := s.opts.Desk.Land(r.Context(), agent)
	if err != nil {
		return "", err
	}
	var done []string
	for _, o := range res.Outcomes {
		switch {
		case o.Nothing:
			done = append(done, fmt.Sprintf("nothing to land: %s's branch has no commit the base branch lacks", o.Agent))
		case o.Already:
			done = append(done, fmt.Sprintf("%s's commit %s is in the merge queue already as #%d (%s)", o.Agent, merge.Short(o.Candidate.Commit), o.Candidate.ID, o.Candidate.State))
		case o.Candidate != nil:
			done = append(done, fmt.Sprintf("queued %s's commit %s as merge candidate #%d", o.Agent, merge.Short(o.Candidate.Commit), o.Candidate.ID))
		}
	}
	if len(done) == 0 {
		return "nothing to land", nil
	}
	return strings.Join(done, "; "), nil
}

func (s *Server) doCancelLanding(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return "", notFound{"no merge candidate " + r.PathValue("id")}
	}
	c, err := s.opts.Desk.CancelLanding(r.Context(), id, strings.TrimSpace(r.PostFormValue("note")))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("merge candidate %d (%s at %s) cancelled", c.ID, c.Agent, merge.Short(c.Commit)), nil
}

// doRelease releases one reservation of an agent (the form's glob), or
// every one of its reservations without one.
func (s *Server) doRelease(r *http.Request) (string, error) {
	agent := r.PathValue("agent")
	if !s.known(r, agent) {
		return "", notFound{"no agent " + agent + ": the reservations page lists who holds what"}
	}
	var globs []string
	if g := strings.TrimSpace(r.PostFormValue("glob")); g != "" {
		globs = []string{g}
	}
	res, err := s.opts.Desk.Release(r.Context(), agent, globs)
	if err != nil {
		return "", err
	}
	if len(res.Released) == 0 {
		if len(res.Warnings) > 0 {
			return strings.Join(res.Warnings, "; "), nil
		}
		return agent + " held no reservations", nil
	}
	var gs []string
	for _, rv := range res.Released {
		gs = append(gs, rv.Glob)
	}
	return fmt.Sprintf("released %s of %s", strings.Join(gs, ", "), agent), nil
}
