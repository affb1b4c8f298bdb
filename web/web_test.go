package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/tui"
	"github.com/swarmhq/swarm/verbs"
)

const testToken = "t0k3n-for-the-tests-0123456789"

// fakeDesk reads and decides through the real store, and counts the
// actions it was asked for.
type fakeDesk struct {
	st      mailbox.Store
	poster  *mailbox.Poster
	notices chan lifecycle.Notice
	decide  func(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error)
	cfg     *config.Config
	// as is who the merge queue's and reservations' verbs are called as:
	// the operator when unset, as the real desk always calls them.
	as     *identity.Caller
	behind string

	mu      sync.Mutex
	actions []string
}

func (d *fakeDesk) did(what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.actions = append(d.actions, what)
}

func (d *fakeDesk) done() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.actions...)
}

func (d *fakeDesk) Next(ctx context.Context) (lifecycle.Notice, error) {
	select {
	case n, ok := <-d.notices:
		if !ok {
			return n, io.EOF
		}
		return n, nil
	case <-ctx.Done():
		return lifecycle.Notice{}, ctx.Err()
	}
}

func (d *fakeDesk) Snapshot(ctx context.Context) (tui.Snapshot, error) {
	es, err := d.st.Escalations(ctx, mailbox.EscalationFilter{})
	return tui.Snapshot{Agents: []tui.Agent{{Name: "alpha", State: lifecycle.Held, Seq: 2, Activity: "bash: go test <./...>", Cost: "$0.12", Mode: "execute/plan"}},
		Escalations: es}, err
}

func (d *fakeDesk) Tail(ctx context.Context, agent string, seq int64, lines int) ([]string, error) {
	return []string{"a log line <b>"}, nil
}

func (d *fakeDesk) SessionLog(ctx context.Context, agent string, seq int64) (string, error) {
	return "a log line <b>\n", nil
}

func (d *fakeDesk) Prompt(ctx context.Context, agent string, seq int64) ([]tui.Section, error) {
	return []tui.Section{{Number: 1, Title: "Identity", Body: "you are " + agent}}, nil
}

func (d *fakeDesk) Send(ctx context.Context, to, body string, urgent bool) (message.Message, error) {
	d.did("send " + to + " " + body)
	ms, err := verbs.Send(ctx, identity.Operator(), d.poster, message.Draft{To: to, Body: body}, false)
	if err != nil {
		return message.Message{}, err
	}
	return ms[0], nil
}

func (d *fakeDesk) SetPaused(ctx context.Context, agent string, paused bool) error {
	d.did(fmt.Sprintf("pause %s %v", agent, paused))
	return nil
}

func (d *fakeDesk) Decide(ctx context.Context, id int64, action escalation.Event) (escalation.Escalation, error) {
	return d.DecideNote(ctx, id, action, "")
}

func (d *fakeDesk) DecideNote(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
	d.did(fmt.Sprintf("decide %d %s %s", id, action, note))
	if d.decide != nil {
		return d.decide(ctx, id, action, note)
	}
	return verbs.Decide(ctx, identity.Operator(), d.st, id, action, note)
}

func (d *fakeDesk) Merge(ctx context.Context, item string) (string, error) {
	d.did("merge " + item)
	return "merged", nil
}

func (d *fakeDesk) ReviewDiff(ctx context.Context, commit string) (string, error) { return "", nil }

func (d *fakeDesk) Abort(ctx context.Context, item, note string) error {
	d.did("abort " + item)
	return nil
}

func (d *fakeDesk) Reply(ctx context.Context, id int64, dr message.Draft) (message.Message, error) {
	d.did(fmt.Sprintf("reply %d", id))
	return verbs.Reply(ctx, identity.Operator(), d.poster, id, dr)
}

func (d *fakeDesk) MarkRead(ctx context.Context, ids []int64) (int64, error) {
	d.did("read")
	return verbs.MarkRead(ctx, identity.Operator(), d.st, message.Operator, ids)
}

func (d *fakeDesk) caller() identity.Caller {
	if d.as != nil {
		return *d.as
	}
	return identity.Operator()
}

// landGit says every agent's branch has one commit the base lacks.
type landGit struct{}

func (landGit) Tip(ctx context.Context, agent string) (string, error) {
	return fmt.Sprintf("%040x", len(agent)), nil
}

func (landGit) UnmergedCommits(ctx context.Context, agent string) ([]string, error) {
	return []string{fmt.Sprintf("%040x", len(agent))}, nil
}

func (d *fakeDesk) Land(ctx context.Context, agent string) (verbs.LandResult, error) {
	d.did("land " + agent)
	return verbs.Land(ctx, d.caller(), d.st, d.cfg, landGit{}, verbs.LandRequest{Agent: agent})
}

func (d *fakeDesk) CancelLanding(ctx context.Context, id int64, note string) (merge.Candidate, error) {
	d.did(fmt.Sprintf("cancel %d %s", id, note))
	return verbs.CancelLanding(ctx, d.caller(), d.st, id, note)
}

func (d *fakeDesk) CheckoutBehind(ctx context.Context) string { return d.behind }

func (d *fakeDesk) Release(ctx context.Context, agent string, globs []string) (verbs.ReleaseResult, error) {
	d.did(fmt.Sprintf("release %s %v", agent, globs))
	return verbs.Release(ctx, d.caller(), verbs.ReleaseRequest{Store: d.st, Agent: agent, Globs: globs, Now: time.Now()})
}

type fixture struct {
	t    *testing.T
	st   mailbox.Store
	desk *fakeDesk
	srv  *Server
	ts   *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte("[defaults]\nengine = \"script\"\n[[agent]]\nname = \"alpha\"\n"), "swarm.toml", dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.RegisterAgent(ctx, mailbox.AgentInfo{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	desk := &fakeDesk{st: st, poster: mailbox.NewPoster(st, []string{"alpha"}, nil), notices: make(chan lifecycle.Notice, 16), cfg: cfg}
	srv, err := New(Options{Desk: desk, Store: st, Config: cfg, Token: testToken, Title: dir})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(runCtx) }()
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); cancel(); <-done })
	return &fixture{t: t, st: st, desk: desk, srv: srv, ts: ts}
}

// client is a browser that does not follow redirects, so each answer can
// be checked.
func (f *fixture) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login visits the token URL and returns the logged-in client.
func (f *fixture) login() *http.Client {
	f.t.Helper()
	c := f.client()
	resp := f.get(c, "/?token="+testToken)
	if resp.code != http.StatusSeeOther || resp.header.Get("Location") != "/" {
		f.t.Fatalf("login: %d to %q, want 303 to /", resp.code, resp.header.Get("Location"))
	}
	return c
}

type answer struct {
	code   int
	header http.Header
	body   string
}

func (f *fixture) do(c *http.Client, req *http.Request) answer {
	f.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (f *fixture) get(c *http.Client, path string) answer {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.ts.URL+path, nil)
	return f.do(c, req)
}

func (f *fixture) post(c *http.Client, path string, form url.Values, header ...string) answer {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return f.do(c, req)
}

// csrf reads the CSRF token of the client's session from a page.
func (f *fixture) csrf(c *http.Client) string {
	f.t.Helper()
	body := f.get(c, "/agents").body
	_, rest, ok := strings.Cut(body, `name="csrf" value="`)
	if !ok {
		f.t.Fatalf("no CSRF token on the agents page:\n%s", body)
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}

func (f *fixture) raise(summary string) escalation.Escalation {
	f.t.Helper()
	e, _, err := swarm.Raise(context.Background(), f.st, escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Hold: true, Summary: summary})
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	resp := f.get(c, "/agents?token="+testToken)
	if resp.code != http.StatusSeeOther || resp.header.Get("Location") != "/agents" {
		t.Fatalf("token visit: %d to %q; want 303 to /agents (the token leaves the URL)", resp.code, resp.header.Get("Location"))
	}
	ck := resp.header.Get("Set-Cookie")
	for _, want := range []string{cookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(ck, want) {
			t.Errorf("cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, testToken) {
		t.Errorf("the cookie carries the token itself: %q", ck)
	}
	if a := f.get(c, "/agents"); a.code != http.StatusOK || !strings.Contains(a.body, `id="agent-alpha"`) {
		t.Fatalf("after login: %d\n%s", a.code, a.body)
	}
}

func TestWithoutLoginTheLoginPageOnly(t *testing.T) {
	f := newFixture(t)
	f.raise("secret summary")
	c := f.client()
	for _, path := range []string{"/agents", "/escalations", "/mail", "/events", "/agents?token=wrong", "/agents/alpha/sessions/1"} {
		a := f.get(c, path)
		if a.code != http.StatusUnauthorized {
			t.Errorf("GET %s without login: %d, want 401", path, a.code)
		}
		if !strings.Contains(a.body, "Log in to the desk") || strings.Contains(a.body, "alpha") || strings.Contains(a.body, "secret summary") ||
			strings.Contains(a.body, f.srv.opts.Title) || strings.Contains(a.body, "/escalations") {
			t.Errorf("GET %s without login shows more than the login page:\n%s", path, a.body)
		}
	}
	// A wrong bearer is no login either.
	req, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/agents", nil)
	req.Header.Set("Authorization", "Bearer nope")
	if a := f.do(c, req); a.code != http.StatusUnauthorized {
		t.Errorf("wrong bearer: %d, want 401", a.code)
	}
	// The login form with the token logs in.
	a := f.post(c, "/login", url.Values{"token": {testToken}})
	if a.code != http.StatusSeeOther || !strings.Contains(a.header.Get("Set-Cookie"), cookieName) {
		t.Fatalf("login form: %d %q", a.code, a.header.Get("Set-Cookie"))
	}
}

func TestPostNeedsTheSessionsCSRFToken(t *testing.T) {
	f := newFixture(t)
	e := f.raise("need a decision")
	c := f.login()
	tok := f.csrf(c)
	other := f.login()
	otherTok := f.csrf(other)
	path := fmt.Sprintf("/escalations/%d/resume", e.ID)
	for name, try := range map[string]func() answer{
		"no cookie":            func() answer { return f.post(f.client(), path, url.Values{"csrf": {tok}}) },
		"no CSRF token":        func() answer { return f.post(c, path, url.Values{"note": {"x"}}) },
		"a wrong CSRF token":   func() answer { return f.post(c, path, url.Values{"csrf": {flip(tok)}}) },
		"another's CSRF token": func() answer { return f.post(c, path, url.Values{"csrf": {otherTok}}) },
		"a cross-site origin": func() answer {
			return f.post(c, path, url.Values{"csrf": {tok}}, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
		},
	} {
		a := try()
		want := http.StatusForbidden
		if name == "no cookie" {
			want = http.StatusUnauthorized
		}
		if a.code != want {
			t.Errorf("%s: %d, want %d\n%s", name, a.code, want, a.body)
		}
	}
	if got := f.desk.done(); len(got) != 0 {
		t.Fatalf("refused posts still acted: %v", got)
	}
	if got, _ := f.st.Escalation(context.Background(), e.ID); got.State != escalation.Open {
		t.Fatalf("escalation %d is %s after refused posts, want open", e.ID, got.State)
	}
	a := f.post(c, path, url.Values{"csrf": {tok}, "note": {"use plan B"}, "back": {"/escalations"}})
	if a.code != http.StatusSeeOther || !strings.HasPrefix(a.header.Get("Location"), "/escalations?done=") {
		t.Fatalf("the right post: %d to %q\n%s", a.code, a.header.Get("Location"), a.body)
	}
	if got, _ := f.st.Escalation(context.Background(), e.ID); got.State != escalation.Resolved || got.Note != "use plan B" {
		t.Fatalf("after resume: %s %q", got.State, got.Note)
	}
	// A stale page acts again: the verb's word, 409, nothing done twice.
	a = f.post(c, path, url.Values{"csrf": {tok}, "note": {"again"}})
	if a.code != http.StatusConflict || !strings.Contains(a.body, "was resolved already") {
		t.Fatalf("second resume: %d\n%s", a.code, a.body)
	}
	if got, _ := f.st.Escalation(context.Background(), e.ID); got.Note != "use plan B" {
		t.Fatalf("the second resume changed the note to %q", got.Note)
	}
}

// flip changes a token's first character.
func flip(tok string) string {
	if tok[0] == '0' {
		return "1" + tok[1:]
	}
	return "0" + tok[1:]
}

func TestBearerTokenActsWithoutCookie(t *testing.T) {
	f := newFixture(t)
	e := f.raise("x")
	a := f.post(f.client(), fmt.Sprintf("/escalations/%d/ack", e.ID), nil, "Authorization", "Bearer "+testToken)
	if a.code != http.StatusSeeOther {
		t.Fatalf("bearer ack: %d\n%s", a.code, a.body)
	}
	if got, _ := f.st.Escalation(context.Background(), e.ID); got.State != escalation.Acked {
		t.Fatalf("after bearer ack: %s", got.State)
	}
}

func TestGetChangesNothing(t *testing.T) {
	f := newFixture(t)
	e := f.raise("x")
	c := f.login()
	ms, err := verbs.Send(context.Background(), identity.Operator(), f.desk.poster, message.Draft{To: "alpha", Body: "hi"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/agents", "/escalations", "/mail", fmt.Sprintf("/mail/%d", ms[0].ID), "/workflows", "/agents/alpha/sessions/1",
		fmt.Sprintf("/escalations/%d/resume", e.ID), "/agents/alpha/pause", "/agents/alpha/message?body=x", "/workflows/T-1/merge",
		"/merges", "/reservations", "/merges/land?agent=alpha", "/merges/1/cancel", "/reservations/alpha/release",
	} {
		f.get(c, path)
	}
	if got := f.desk.done(); len(got) != 0 {
		t.Fatalf("GETs acted: %v", got)
	}
	if a := f.get(c, fmt.Sprintf("/escalations/%d/resume", e.ID)); a.code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", a.code)
	}
	if got, _ := f.st.Escalation(context.Background(), e.ID); got.State != escalation.Open {
		t.Fatalf("escalation %d is %s after GETs", e.ID, got.State)
	}
}

func TestRefusalIs403WithTheRule(t *testing.T) {
	f := newFixture(t)
	e := f.raise("x")
	f.desk.decide = func(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
		// What the verb says to a caller it refuses.
		return verbs.Decide(ctx, identity.Caller{}, f.st, id, action, note)
	}
	c := f.login()
	a := f.post(c, fmt.Sprintf("/escalations/%d/abort", e.ID), url.Values{"csrf": {f.csrf(c)}})
	if a.code != http.StatusForbidden || !strings.Contains(a.body, "is refused") {
		t.Fatalf("refused verb: %d\n%s", a.code, a.body)
	}
}

func TestAgentTextIsEscaped(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	huge := "<script>alert(1)</script>" + strings.Repeat("long ", 400) + "THE-END"
	ms, err := verbs.Send(ctx, identity.Operator(), f.desk.poster, message.Draft{To: "alpha", Body: huge}, false)
	if err != nil {
		t.Fatal(err)
	}
	f.raise("<img src=x onerror=alert(1)>")
	c := f.login()
	for _, path := range []string{"/mail", fmt.Sprintf("/mail/%d", ms[0].ID), "/escalations", "/agents", "/agents/alpha/sessions/1"} {
		a := f.get(c, path)
		if a.code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, a.code, a.body)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "<./...>", "<b>"} {
			if strings.Contains(a.body, bad) {
				t.Errorf("GET %s: agent text %q is not escaped", path, bad)
			}
		}
	}
	list := f.get(c, "/mail").body
	if !strings.Contains(list, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(list, "THE-END") ||
		!strings.Contains(list, fmt.Sprintf(`<a href="/mail/%d">the whole message</a>`, ms[0].ID)) {
		t.Errorf("the mail list does not clip a huge body with a link to the whole:\n%s", list)
	}
	if whole := f.get(c, fmt.Sprintf("/mail/%d", ms[0].ID)).body; !strings.Contains(whole, "THE-END") {
		t.Errorf("the thread page does not show the whole body")
	}
}

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:0", "localhost:8080", "[::1]:9000"} {
		if err := CheckAddr(ok, ""); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	err := CheckAddr("0.0.0.0:8080", "")
	if err == nil || !strings.Contains(err.Error(), "[web] token_file") {
		t.Errorf("0.0.0.0 without a token file: %v", err)
	}
	if err := CheckAddr("0.0.0.0:8080", "/some/file"); err != nil {
		t.Errorf("with a token file: %v", err)
	}
	if err := CheckAddr("8080", ""); err == nil {
		t.Errorf("no host:port accepted")
	}
}

// sse reads one event stream: each event's id and kind.
func sse(t *testing.T, ctx context.Context, c *http.Client, url, lastID string, n int) []string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(got) < n {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			got = append(got, id)
		}
	}
	return got
}

func TestEventsResumeFromLastEventID(t *testing.T) {
	f := newFixture(t)
	c := f.login()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		f.desk.notices <- lifecycle.Notice{Kind: lifecycle.NoticeTransition, Agent: "alpha", From: lifecycle.Idle, To: lifecycle.Running, Seq: int64(i)}
	}
	// The pump numbers them 1..3; a browser that saw 1 gets 2 and 3.
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.hub.current() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the notices never reached the hub")
		}
		time.Sleep(time.Millisecond) // polling the hub, bounded by the deadline
	}
	if got := sse(t, ctx, c, f.ts.URL+"/events", "1", 2); strings.Join(got, ",") != "2,3" {
		t.Fatalf("after Last-Event-ID 1: %v, want 2,3", got)
	}
	// A live one reaches a stream opened before it.
	res := make(chan []string, 1)
	go func() { res <- sse(t, ctx, c, f.ts.URL+"/events?after=3", "", 1) }()
	f.desk.notices <- lifecycle.Notice{Kind: lifecycle.NoticeEscalation, Agent: "alpha"}
	select {
	case got := <-res:
		if strings.Join(got, ",") != "4" {
			t.Fatalf("live: %v, want 4", got)
		}
	case <-ctx.Done():
		t.Fatal("no live event")
	}
}

func TestSupervisorGoneEndsStreams(t *testing.T) {
	f := newFixture(t)
	c := f.login()
	close(f.desk.notices)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, _, closed := f.srv.hub.since(0); closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub did not close when the notices ended")
		}
		time.Sleep(time.Millisecond) // polling the hub, bounded by the deadline
	}
	// No Content: a browser's EventSource stops reconnecting.
	if a := f.get(c, "/events"); a.code != http.StatusNoContent {
		t.Fatalf("events after the supervisor stopped: %d", a.code)
	}
}

// settle moves a queued candidate through testing to its end, with its
// bookkeeping, as the merge queue does.
func settle(t *testing.T, st mailbox.Store, id int64, ev merge.Event, to merge.State, edit func(*merge.Candidate)) {
	t.Helper()
	err := st.InTx(context.Background(), func(tx mailbox.Tx) error {
		if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(id), merge.Queued, merge.Claim, merge.Testing, "claimed", 0); err != nil {
			return err
		}
		c, err := tx.Candidate(id)
		if err != nil {
			return err
		}
		edit(&c)
		if err := tx.SaveCandidate(c); err != nil {
			return err
		}
		_, err = fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(id), merge.Testing, ev, to, string(to), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMergesPageLandsAndCancels(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.desk.behind = "checkout behind main by 2: git switch main (your uncommitted changes come along)"
	c := f.login()
	a := f.get(c, "/merges")
	if a.code != http.StatusOK || !strings.Contains(a.body, "The queue is empty") || !strings.Contains(a.body, `<option>alpha</option>`) ||
		!strings.Contains(a.body, "checkout behind main by 2: git switch main") || !strings.Contains(a.body, `href="/merges" aria-current="page"`) {
		t.Fatalf("empty merge queue page: %d\n%s", a.code, a.body)
	}
	tok := f.csrf(c)

	// Land: the verb queues alpha's branch; the page lists it.
	a = f.post(c, "/merges/land", url.Values{"csrf": {tok}, "agent": {"alpha"}, "back": {"/merges"}})
	if a.code != http.StatusSeeOther || !strings.HasPrefix(a.header.Get("Location"), "/merges?done=") ||
		!strings.Contains(a.header.Get("Location"), url.QueryEscape("as merge candidate #1")) {
		t.Fatalf("land: %d to %q\n%s", a.code, a.header.Get("Location"), a.body)
	}
	cs, err := f.st.Candidates(ctx, mailbox.CandidateFilter{})
	if err != nil || len(cs) != 1 || cs[0].Agent != "alpha" || cs[0].State != merge.Queued || cs[0].By != "operator" {
		t.Fatalf("after land: %+v %v", cs, err)
	}
	if a = f.get(c, "/merges"); !strings.Contains(a.body, `<tr id="candidate-1" data-state="queued">`) || !strings.Contains(a.body, `action="/merges/1/cancel"`) {
		t.Fatalf("the queue does not list candidate 1:\n%s", a.body)
	}
	// Landing it again says it is queued already; nothing new is queued.
	a = f.post(c, "/merges/land", url.Values{"csrf": {tok}, "agent": {"alpha"}, "back": {"/merges"}})
	if loc, _ := url.QueryUnescape(a.header.Get("Location")); a.code != http.StatusSeeOther || !strings.Contains(loc, "in the merge queue already as #1 (queued)") {
		t.Fatalf("land again: %d to %q", a.code, loc)
	}

	// Cancel with a note: the verb moves it, the history says why.
	a = f.post(c, "/merges/1/cancel", url.Values{"csrf": {tok}, "note": {"wrong <branch>"}, "back": {"/merges"}})
	if a.code != http.StatusSeeOther {
		t.Fatalf("cancel: %d\n%s", a.code, a.body)
	}
	got, err := f.st.Candidate(ctx, 1)
	if err != nil || got.State != merge.Cancelled || got.Reason != "cancelled by operator: wrong <branch>" {
		t.Fatalf("after cancel: %+v %v", got, err)
	}
	if a = f.get(c, "/merges"); !strings.Contains(a.body, `<tr id="candidate-1" data-state="cancelled">`) ||
		!strings.Contains(a.body, "cancelled by operator: wrong &lt;branch&gt;") || !strings.Contains(a.body, "The queue is empty") {
		t.Fatalf("the history does not show the cancelled candidate:\n%s", a.body)
	}
	// A stale page cancels again: the verb's word, 409, nothing done twice.
	a = f.post(c, "/merges/1/cancel", url.Values{"csrf": {tok}, "note": {"again"}})
	if a.code != http.StatusConflict || !strings.Contains(a.body, "merge candidate 1 is cancelled already") {
		t.Fatalf("second cancel: %d\n%s", a.code, a.body)
	}
	if got, _ := f.st.Candidate(ctx, 1); got.Reason != "cancelled by operator: wrong <branch>" {
		t.Fatalf("the second cancel changed the reason to %q", got.Reason)
	}
	if a = f.post(c, "/merges/99/cancel", url.Values{"csrf": {tok}}); a.code != http.StatusNotFound {
		t.Fatalf("cancel of no candidate: %d\n%s", a.code, a.body)
	}

	// A landed candidate in the history: the commit it landed as, its CI runs.
	a = f.post(c, "/merges/land", url.Values{"csrf": {tok}, "agent": {"alpha"}})
	if a.code != http.StatusSeeOther {
		t.Fatalf("land: %d\n%s", a.code, a.body)
	}
	settle(t, f.st, 2, merge.Land, merge.Landed, func(c *merge.Candidate) { c.LandedAs = "abcdef0123456789"; c.CIRuns = 1 })
	if a = f.get(c, "/merges"); !regexp.MustCompile(`(?s)<tr id="candidate-2" data-state="landed">.*<code>abcdef0123</code>.*<tr id="candidate-1"`).MatchString(a.body) {
		t.Fatalf("the history does not show the landing:\n%s", a.body)
	}
}

func TestReservationsPageReleases(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.login()
	if a := f.get(c, "/reservations"); a.code != http.StatusOK || !strings.Contains(a.body, "No file reservations hold now.") {
		t.Fatalf("no reservations: %d\n%s", a.code, a.body)
	}
	if _, err := verbs.Reserve(ctx, identity.Operator(), verbs.ReserveRequest{Store: f.st, Agent: "alpha", Globs: []string{"api/**", "docs/*.md"},
		Exclusive: true, TTL: time.Hour, Reason: "migrating <the> schema", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	a := f.get(c, "/reservations")
	for _, want := range []string{"<code>api/**</code>", "<code>docs/*.md</code>", "<strong>exclusive</strong>", "migrating &lt;the&gt; schema", `action="/reservations/alpha/release"`, `name="glob" value="api/**"`} {
		if !strings.Contains(a.body, want) {
			t.Fatalf("the reservations page lacks %q:\n%s", want, a.body)
		}
	}
	a = f.post(c, "/reservations/alpha/release", url.Values{"csrf": {f.csrf(c)}, "glob": {"api/**"}, "back": {"/reservations"}})
	if loc, _ := url.QueryUnescape(a.header.Get("Location")); a.code != http.StatusSeeOther || loc != "/reservations?done=released api/** of alpha" {
		t.Fatalf("release: %d to %q\n%s", a.code, loc, a.body)
	}
	live, err := f.st.Reservations(ctx, time.Now(), false)
	if err != nil || len(live) != 1 || live[0].Glob != "docs/*.md" {
		t.Fatalf("after releasing api/**: %+v %v", live, err)
	}
	if a = f.get(c, "/reservations"); strings.Contains(a.body, "<code>api/**</code>") {
		t.Fatalf("a released reservation is still listed:\n%s", a.body)
	}
	if a = f.post(c, "/reservations/nobody/release", url.Values{"csrf": {f.csrf(c)}}); a.code != http.StatusNotFound {
		t.Fatalf("release of no agent: %d\n%s", a.code, a.body)
	}
}

// TestMergeAndReservationRefusals: what the verbs refuse the page refuses,
// 403 naming the rule, and nothing is done; without the CSRF token nothing
// reaches the verbs at all.
func TestMergeAndReservationRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := verbs.Reserve(ctx, identity.Operator(), verbs.ReserveRequest{Store: f.st, Agent: "alpha", Globs: []string{"api/**"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	queued, _, err := swarm.Enqueue(ctx, f.st, merge.Candidate{Agent: "alpha", Commit: strings.Repeat("a", 40), Source: merge.FromLand, By: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	c := f.login()
	tok := f.csrf(c)
	forms := map[string]url.Values{
		"/merges/land": {"agent": {"alpha"}}, fmt.Sprintf("/merges/%d/cancel", queued.ID): {"note": {"x"}}, "/reservations/alpha/release": {"glob": {"api/**"}},
	}
	for path, form := range forms {
		for name, hdr := range map[string][]string{"no CSRF token": nil, "a cross-site origin": {"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}} {
			v := url.Values{}
			for k, vs := range form {
				v[k] = vs
			}
			if hdr != nil {
				v.Set("csrf", tok)
			}
			if a := f.post(c, path, v, hdr...); a.code != http.StatusForbidden || !strings.Contains(a.body, "CSRF") {
				t.Errorf("POST %s with %s: %d\n%s", path, name, a.code, a.body)
			}
		}
	}
	if got := f.desk.done(); len(got) != 0 {
		t.Fatalf("posts without the CSRF token reached the verbs: %v", got)
	}
	// A caller the verbs refuse (nobody): 403 with the rule.
	f.desk.as = &identity.Caller{}
	for path, form := range forms {
		form.Set("csrf", tok)
		if a := f.post(c, path, form); a.code != http.StatusForbidden || !strings.Contains(a.body, "is refused") {
			t.Errorf("refused POST %s: %d\n%s", path, a.code, a.body)
		}
	}
	if cs, _ := f.st.Candidates(ctx, mailbox.CandidateFilter{}); len(cs) != 1 || cs[0].State != merge.Queued {
		t.Fatalf("refused verbs changed the queue: %+v", cs)
	}
	if live, _ := f.st.Reservations(ctx, time.Now(), false); len(live) != 1 {
		t.Fatalf("a refused release released: %+v", live)
	}
}

// TestActionTellsOtherBrowsers: a verb without a notice of its own (a
// candidate queued, a reservation released) still refreshes the other
// browsers' pages: the action is an event on the stream.
func TestActionTellsOtherBrowsers(t *testing.T) {
	f := newFixture(t)
	c := f.login()
	before := f.srv.hub.current()
	if a := f.post(c, "/merges/land", url.Values{"csrf": {f.csrf(c)}, "agent": {"alpha"}}); a.code != http.StatusSeeOther {
		t.Fatalf("land: %d\n%s", a.code, a.body)
	}
	evs, _, _, _ := f.srv.hub.since(before)
	if len(evs) != 1 || evs[0].Kind != "desk" || !strings.Contains(evs[0].Text, "queued alpha's commit") {
		t.Fatalf("events after the land button: %+v", evs)
	}
}
