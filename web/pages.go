package web

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/team"
	"github.com/swarmhq/swarm/tui"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/workflow"
)

//go:embed templates static
var assets embed.FS

// page is one page of the desk at a stable URL. Adding a page is a row
// here and templates/<Name>.html defining "content"; Nav puts it in the
// header's menu.
type page struct {
	Name    string // its template, and the nav's current-page mark
	Title   string
	Pattern string // the mux pattern after "GET "
	Nav     string // the menu's link; empty: not in the menu
	load    func(s *Server, r *http.Request) (any, error)
}

func pages() []page {
	return []page{
		{Name: "agents", Title: "Agents", Pattern: "/agents", Nav: "/agents", load: (*Server).agentsPage},
		{Name: "escalations", Title: "Escalations", Pattern: "/escalations", Nav: "/escalations", load: (*Server).escalationsPage},
		{Name: "mail", Title: "Mail", Pattern: "/mail", Nav: "/mail", load: (*Server).mailPage},
		{Name: "thread", Title: "Thread", Pattern: "/mail/{id}", load: (*Server).threadPage},
		{Name: "workflows", Title: "Workflows", Pattern: "/workflows", Nav: "/workflows", load: (*Server).workflowsPage},
		{Name: "merges", Title: "Merge queue", Pattern: "/merges", Nav: "/merges", load: (*Server).mergesPage},
		{Name: "reservations", Title: "Reservations", Pattern: "/reservations", Nav: "/reservations", load: (*Server).reservationsPage},
		{Name: "team", Title: "Team", Pattern: "/team", Nav: "/team", load: (*Server).teamPage},
		{Name: "item", Title: "Work item", Pattern: "/workflows/{id}", load: (*Server).itemPage},
		{Name: "session", Title: "Session", Pattern: "/agents/{agent}/sessions/{seq}", load: (*Server).sessionPage},
	}
}

// renderer holds each page's template: the layout plus the page's content.
type renderer struct {
	pages map[string]*template.Template
}

// newRenderer parses the templates; now and loc are the clock and the
// zone the pages' times are told in.
func newRenderer(ps []page, now func() time.Time, loc *time.Location) (*renderer, error) {
	funcs := template.FuncMap{
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return humanize.RelTime(t, now(), "ago", "from now")
		},
		"clip":  text.Truncate,
		"short": merge.Short,
		"comma": func(n int64) string { return humanize.Comma(n) },
		"deref": func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		},
		"time": func(t time.Time) string { return t.In(loc).Format(time.DateTime) },
		"prev": func(n int64) int64 { return n - 1 },
		"next": func(n int64) int64 { return n + 1 },
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	r := &renderer{pages: map[string]*template.Template{}}
	for _, name := range append(pageNames(ps), "login", "error") {
		t, err := template.Must(base.Clone()).ParseFS(assets, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", name, err)
		}
		r.pages[name] = t
	}
	return r, nil
}

func pageNames(ps []page) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func staticFS() http.Handler {
	sub, _ := fs.Sub(assets, "static")
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

// view is what the layout gets.
type view struct {
	Title  string
	Repo   string
	Active string
	Nav    []page
	CSRF   string
	After  int64  // the events' id when the page was read: its stream starts there
	Done   string // what the last action did
	Data   any
}

// maxClip is how much of a body a list shows; the whole is a link away.
const maxClip = 300

// notFound is a load's answer for a thing that is not there.
type notFound struct{ what string }

func (e notFound) Error() string { return e.what }

// agentRow is one agent on the agents page.
type agentRow struct {
	tui.Agent
	Held string // the escalation that holds it and why; empty when none
}

type agentsData struct {
	Agents   []agentRow
	Team     string
	Budget   string
	Tokens   int64
	Sessions int64
}

func (s *Server) agentsPage(r *http.Request) (any, error) {
	snap, err := s.opts.Desk.Snapshot(r.Context())
	if err != nil {
		return nil, err
	}
	d := agentsData{Team: snap.Team, Budget: snap.Budget, Tokens: snap.Tokens, Sessions: snap.Sessions}
	for _, a := range snap.Agents {
		row := agentRow{Agent: a}
		for _, e := range snap.Escalations {
			if e.Holds() && e.AgentName() == a.Name {
				row.Held = fmt.Sprintf("escalation %d: %s", e.ID, e.Summary)
				break
			}
		}
		d.Agents = append(d.Agents, row)
	}
	return d, nil
}

type escalationsData struct {
	Open, Closed []escalation.Escalation
	Actions      []string
}

// closedShown is how many resolved escalations the page lists.
const closedShown = 50

func (s *Server) escalationsPage(r *http.Request) (any, error) {
	all, err := s.opts.Store.Escalations(r.Context(), mailbox.EscalationFilter{All: true})
	if err != nil {
		return nil, err
	}
	var d escalationsData
	for _, e := range all {
		if e.State.Unresolved() {
			d.Open = append(d.Open, e)
		} else {
			d.Closed = append(d.Closed, e)
		}
	}
	slices.SortStableFunc(d.Closed, func(a, b escalation.Escalation) int { return cmp.Compare(b.ID, a.ID) })
	d.Closed = d.Closed[:min(len(d.Closed), closedShown)]
	return d, nil
}

type mailData struct {
	Q, From, To, Kind string
	Kinds             []message.Kind
	Messages          []message.Message
	Clip              int
}

// mailShown is how many messages a search lists, newest first.
const mailShown = 100

func (s *Server) mailPage(r *http.Request) (any, error) {
	q := r.URL.Query()
	d := mailData{Q: q.Get("q"), From: q.Get("from"), To: q.Get("to"), Kind: q.Get("kind"), Kinds: message.Kinds, Clip: maxClip}
	f := mailbox.Filter{Limit: mailShown, From: d.From, Kind: message.Kind(d.Kind), Grep: d.Q}
	names := []string{d.To}
	if d.To == "" {
		// Every message has an agent or the operator as its recipient.
		agents, err := s.opts.Store.Agents(r.Context())
		if err != nil {
			return nil, err
		}
		names = []string{message.Operator}
		for _, a := range agents {
			names = append(names, a.Name)
		}
	}
	seen := map[int64]bool{}
	for _, n := range names {
		ms, err := s.opts.Store.Inbox(r.Context(), n, f)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if !seen[m.ID] {
				seen[m.ID] = true
				d.Messages = append(d.Messages, m)
			}
		}
	}
	slices.SortFunc(d.Messages, func(a, b message.Message) int { return cmp.Compare(b.ID, a.ID) })
	d.Messages = d.Messages[:min(len(d.Messages), mailShown)]
	return d, nil
}

type threadData struct {
	ID       int64
	Messages []threadMessage
}

type threadMessage struct {
	message.Message
	Envelope string // a protocol message's envelope, indented
	Depth    int
}

func (s *Server) threadPage(r *http.Request) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, notFound{"no message " + r.PathValue("id")}
	}
	ms, err := s.opts.Store.Thread(r.Context(), id)
	if err != nil || len(ms) == 0 {
		return nil, notFound{fmt.Sprintf("no message %d", id)}
	}
	depth := map[int64]int{}
	d := threadData{ID: id}
	for _, m := range ms {
		tm := threadMessage{Message: m}
		if m.ReplyTo != nil {
			tm.Depth = min(depth[*m.ReplyTo]+1, 8)
		}
		depth[m.ID] = tm.Depth
		if len(m.Payload) > 0 {
			tm.Envelope = indentJSON(m.Payload)
		}
		d.Messages = append(d.Messages, tm)
	}
	return d, nil
}

type workflowsData struct {
	Workflows []verbs.WorkflowView
}

func (s *Server) workflowsPage(r *http.Request) (any, error) {
	sts, err := verbs.WorkflowStatus(r.Context(), identity.Operator(), s.opts.Store, s.opts.Config, "")
	if err != nil {
		return nil, err
	}
	return workflowsData{Workflows: sts}, nil
}

type itemData struct {
	Item    workflow.Item
	History []workflow.Entry
	Commit  string
	Diff    string
	DiffErr string
}

func (s *Server) itemPage(r *http.Request) (any, error) {
	id := r.PathValue("id")
	it, err := s.opts.Store.Item(r.Context(), id)
	if err != nil {
		return nil, notFound{"no work item " + id + ": the workflows page lists them"}
	}
	h, err := verbs.History(r.Context(), identity.Operator(), s.opts.Store, id)
	if err != nil {
		return nil, err
	}
	d := itemData{Item: it, History: h, Commit: it.ReviewCommit}
	if it.ReviewCommit != "" {
		if d.Diff, err = s.opts.Desk.ReviewDiff(r.Context(), it.ReviewCommit); err != nil {
			d.DiffErr = err.Error()
		}
	}
	return d, nil
}

type mergesData struct {
	Queue   []merge.Candidate // queued and testing, first in first out
	History []merge.Candidate // the newest that left the queue, newest first
	Behind  string            // the operator's checkout behind the base, as 'swarm status' says it
	Agents  []string          // whose branch the land form offers
}

// mergesHistory is how many candidates that left the queue the page lists,
// as 'swarm merges' does.
const mergesHistory = 20

func (s *Server) mergesPage(r *http.Request) (any, error) {
	ctx := r.Context()
	var d mergesData
	var err error
	if d.Queue, err = s.opts.Store.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Queued, merge.Testing}}); err != nil {
		return nil, err
	}
	if d.History, err = s.opts.Store.Candidates(ctx, mailbox.CandidateFilter{
		States: []merge.State{merge.Landed, merge.Conflict, merge.Failed, merge.Cancelled}, Newest: mergesHistory}); err != nil {
		return nil, err
	}
	slices.Reverse(d.History)
	// The agents verbs.Land knows: swarm.toml's and the spawned ones.
	d.Agents = s.opts.Config.AgentNames()
	d.Behind = s.opts.Desk.CheckoutBehind(ctx)
	return d, nil
}

type reservationsData struct {
	Live []mailbox.Reservation
}

func (s *Server) reservationsPage(r *http.Request) (any, error) {
	rs, err := verbs.Reservations(r.Context(), identity.Operator(), verbs.ReservationsRequest{Store: s.opts.Store, Now: s.now()})
	if err != nil {
		return nil, err
	}
	return reservationsData{Live: rs}, nil
}

type teamData struct {
	Team    *config.Team
	Launch  *team.Launch
	Pings   []teamPing
	History []fsm.Event
}

type teamPing struct {
	Agent string
	team.Ping
}

// teamHistory is how many of the launch's latest moves the page lists.
const teamHistory = 50

func (s *Server) teamPage(r *http.Request) (any, error) {
	d := teamData{Team: s.opts.Config.Team}
	if d.Team == nil {
		return d, nil
	}
	l, err := s.opts.Store.Team(r.Context(), d.Team.Name)
	switch {
	case errors.Is(err, mailbox.ErrNoSuchTeam):
		return d, nil
	case err != nil:
		return nil, err
	}
	d.Launch = &l
	for _, a := range d.Team.Core {
		d.Pings = append(d.Pings, teamPing{Agent: a, Ping: l.Pings[a]})
	}
	if d.History, err = s.opts.Store.Events(r.Context(), mailbox.EventFilter{Kind: fsm.SubjectTeam, Subjects: []string{d.Team.Name}, Limit: teamHistory}); err != nil {
		return nil, err
	}
	return d, nil
}

type sessionData struct {
	Agent    string
	Seq      int64
	Log      string
	Sections []tui.Section
	Err      string
}

func (s *Server) sessionPage(r *http.Request) (any, error) {
	agent := r.PathValue("agent")
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 || !s.known(r, agent) {
		return nil, notFound{fmt.Sprintf("no session %s of %s", r.PathValue("seq"), agent)}
	}
	d := sessionData{Agent: agent, Seq: seq}
	if d.Log, err = s.opts.Desk.SessionLog(r.Context(), agent, seq); err != nil {
		return nil, err
	}
	if d.Sections, err = s.opts.Desk.Prompt(r.Context(), agent, seq); err != nil {
		if !errors.Is(err, mailbox.ErrNoSuchSession) {
			return nil, err
		}
		d.Err = fmt.Sprintf("no stored prompt for %s's session %d", agent, seq)
	}
	return d, nil
}

// known reports whether name is an agent of the swarm (configured or
// spawned: every one is registered in the store).
func (s *Server) known(r *http.Request, name string) bool {
	_, err := s.opts.Store.Agent(r.Context(), name)
	return err == nil
}

func indentJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
