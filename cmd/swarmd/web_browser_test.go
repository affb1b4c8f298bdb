package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var screenshots = flag.Bool("screenshots", false, "write the web desk's screenshots to docs/web/*.png (TestWebDeskInBrowser)")

// browserPath finds Debian's chromium; without it the browser test skips
// with one line, unless SWARM_REQUIRE_BROWSER is set (as CI sets it).
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SWARM_REQUIRE_BROWSER") != "" {
		t.Fatal("SWARM_REQUIRE_BROWSER is set but no chromium is installed: apt-get install -y chromium")
	}
	t.Skip("chromium is not installed: the web desk's browser test needs it (apt-get install -y chromium)")
	return ""
}

// webTOML: backend acts on its mail (its first session, at start, says it
// is ready; its second escalates with a hold, its third carries on); frontend and critic run the review
// workflow whose item shows on the workflows page.
const webTOML = `[defaults]
engine = "script"
interrupt_grace = "5s"
[liveness]
nudge_after = "0s"
[sandbox]
mode = "none" # the sessions run the swarm binary of the test, outside their worktrees

[[agent]]
name = "backend"
[[agent]]
name = "frontend"
[[agent]]
name = "critic"

[[workflow]]
name = "review"
kind = "dev-review"
dev = "frontend"
reviewer = "critic"
`

const webBackendScript = `after = "mail"
[[session]]
[[session.turn]]
text = "ready"

[[session]]
[[session.turn]]
tool = "bash"
args = { command = "swarm escalate 'need a decision on the schema' --hold" }
[[session.turn]]
tool = "bash"
args = { command = "sleep 30" }
[[session.turn]]
text = "not reached: the hold interrupts the session"

[[session]]
[[session.turn]]
text = "carrying on with plan B"
`

const webQuietScript = `after = "mail"
[[session]]
[[session.turn]]
text = "looking at it"
`

// TestWebDeskInBrowser is the web desk's journey in a real browser: open
// the page with the token; a scripted agent escalates with a hold; the
// escalation appears live; a note and resume; the agent's next prompt
// carries the note. Then: a cross-site form post changes nothing, an
// agent's <script> in mail shows as text, and the merge queue page lands
// an agent's branch and shows it landed, live.
func TestWebDeskInBrowser(t *testing.T) {
	chromium := browserPath(t)
	env := e2eEnv(t)
	bin := buildSwarm(t)
	env = append(env, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	dir := newE2ERepo(t, bin, env)
	for name, body := range map[string]string{"swarm.toml": webTOML, ".swarm/scripts/backend.toml": webBackendScript,
		".swarm/scripts/frontend.toml": webQuietScript, ".swarm/scripts/critic.toml": webQuietScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	swarmCmd(t, bin, dir, env, 0, "workflow", "start", "review", "--item", "T-1", "--title", "Add the users table", "--criterion", "migrations run both ways")

	// swarm up --web prints the desk's URL.
	up := exec.Command(bin, "up", "--no-tui", "--web")
	up.Dir, up.Env = dir, env
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var upErr strings.Builder
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "swarm web: the operator's desk is at "); ok {
				urls <- u
			}
		}
		io.Copy(io.Discard, stdout)
		upDone <- up.Wait()
	}()
	t.Cleanup(func() {
		up.Process.Signal(syscall.SIGINT)
		select {
		case <-upDone:
		case <-time.After(20 * time.Second):
			up.Process.Kill()
			<-upDone
		}
	})
	var deskURL string
	select {
	case deskURL = <-urls:
	case err := <-upDone:
		t.Fatalf("swarm up --web ended before printing its URL: %v\n%s", err, upErr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("swarm up --web printed no URL within 20s\n%s", upErr.String())
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{48}$`).MatchString(deskURL) {
		t.Fatalf("desk URL %q", deskURL)
	}
	base := strings.SplitN(deskURL, "/?", 2)[0]

	// One headless browser for the whole journey.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The browser starts with the first run on its context, and lives as
	// long as that run's context: bctx, never a step's timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	step := func(what string, within time.Duration, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, within)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			html, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			t.Fatalf("%s: %v\nthe page:\n%s", what, err, html)
		}
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	shot := func(name string) {
		t.Helper()
		if !*screenshots {
			return
		}
		buf, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		out := filepath.Join("..", "..", "docs", "web", name+".png")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	step("open the desk with the token", 30*time.Second, chromedp.Navigate(deskURL),
		chromedp.WaitVisible(`#agent-backend`), chromedp.WaitVisible(`#live-status.on`))
	if u, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href`)); u != base+"/agents" {
		t.Logf("location: %v", err)
		t.Fatalf("after login the page is %s, want %s/agents (the token gone from the URL)", u, base)
	}

	// Escalations, open and live, before anything is raised.
	waitAgentState(t, bin, dir, env, "backend", "Idle")
	step("the escalations page", 10*time.Second, chromedp.Click(`nav a[href="/escalations"]`),
		chromedp.WaitVisible(`#live-status.on`))
	if s := text(`main`); !strings.Contains(s, "Nothing waits for you.") {
		t.Fatalf("escalations before any: %s", s)
	}
	swarmCmd(t, bin, dir, env, 0, "send", "backend", "design the schema")
	raised := time.Now()
	step("the escalation appears live", 20*time.Second, chromedp.WaitVisible(`#escalation-1`))
	t.Logf("the escalation showed %s after the mail that started its session", time.Since(raised).Round(time.Millisecond))
	if s := text(`#escalation-1`); !strings.Contains(s, "need a decision on the schema") || !strings.Contains(s, "holds the agent") {
		t.Fatalf("escalation 1 on the page: %s", s)
	}
	waitAgentState(t, bin, dir, env, "backend", "Held")
	shot("escalations")

	// A note, then resume.
	step("resume with a note", 20*time.Second, chromedp.SendKeys(`#note-1`, "use plan B"),
		chromedp.Click(`#decide-1 button[value="resume"]`), chromedp.WaitVisible(`p.flash`))
	if s := text(`p.flash`); s != "escalation 1 resolved: resume" {
		t.Fatalf("after resume: %q", s)
	}
	prompt := waitPrompt(t, bin, dir, env, "backend", 3)
	if !regexp.MustCompile(`(?s)### Operator Decision\n.*escalation #1 .*: resume\..*\nTheir note:\nuse plan B\n`).MatchString(prompt) {
		t.Fatalf("backend's session 3 prompt lacks the decision and the note:\n%s", prompt)
	}

	// Another origin's page posting to the desk (same site: the cookie
	// goes along): refused for want of the CSRF token, nothing done.
	swarmCmd(t, bin, dir, env, 0, "escalate", "a second question", "--agent", "backend")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/escalations/2/abort"><input name="note" value="pwned"></form><script>document.getElementById('f').submit()</script>`, base)
	}))
	defer evil.Close()
	step("the cross-site post", 15*time.Second, chromedp.Navigate(evil.URL), chromedp.WaitVisible(`main`))
	if s := text(`main`); strings.Contains(s, "resolved") || !strings.Contains(s, "403") || !strings.Contains(s, "CSRF") {
		t.Fatalf("the cross-site post got: %s", s)
	}
	if out := swarmCmd(t, bin, dir, env, 0, "escalation", "show", "2", "--json"); !strings.Contains(out, `"state": "open"`) {
		t.Fatalf("after the cross-site post escalation 2 is not open:\n%s", out)
	}

	// An agent's <script> in mail is text.
	swarmCmd(t, bin, dir, env, 0, "send", "frontend", `<script>document.title="pwned"</script> see docs/schema.md`)
	step("the mail page", 10*time.Second, chromedp.Navigate(base+"/mail"), chromedp.WaitVisible(`table.mail`))
	if title, _ := chromedp.Run(bctx, chromedp.Title()); title == "pwned" {
		t.Fatal("a mail body's script ran")
	}
	if s := text(`table.mail`); !strings.Contains(s, `<script>document.title="pwned"</script>`) {
		t.Fatalf("the mail page does not show the script as text: %s", s)
	}
	shot("mail")

	step("the workflows page", 10*time.Second, chromedp.Navigate(base+"/workflows"), chromedp.WaitVisible(`#item-T-1`))
	shot("workflows")
	step("an item's page", 10*time.Second, chromedp.Click(`#item-T-1 a`), chromedp.WaitVisible(`table.history`))
	if s := text(`table.history`); !strings.Contains(s, "operator") || !strings.Contains(s, "dispatched") {
		t.Fatalf("T-1's history does not say who moved it: %s", s)
	}
	shot("workflow-item")
	step("a session's page", 10*time.Second, chromedp.Navigate(base+"/agents/backend/sessions/3"), chromedp.WaitVisible(`details.section`))
	if s := text(`pre.log`); !strings.Contains(s, "carrying on with plan B") {
		t.Fatalf("backend's session 3 log: %s", s)
	}
	// The merge queue: backend's branch has a commit; the page's land
	// button queues it, and the landing shows live (the queue's notice).
	wt := filepath.Join(dir, ".swarm", "worktrees", "backend")
	if err := os.WriteFile(filepath.Join(wt, "schema.sql"), []byte("create table users (id integer);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "schema.sql"}, {"commit", "-q", "-m", "users table"}} {
		git := exec.Command("git", args...)
		git.Dir, git.Env = wt, env
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git %v in backend's worktree: %v\n%s", args, err, out)
		}
	}
	step("land backend's branch from the merge queue page", 30*time.Second, chromedp.Navigate(base+"/merges"), chromedp.WaitVisible(`#live-status.on`),
		chromedp.SetValue(`#land-agent`, "backend"), chromedp.Click(`form.land button`), chromedp.WaitVisible(`p.flash`),
		chromedp.WaitVisible(`#candidate-1[data-state="landed"]`))
	if s := text(`#candidate-1`); !strings.Contains(s, "backend") || !strings.Contains(s, "landed") {
		t.Fatalf("the landed candidate on the merge queue page: %s", s)
	}
	shot("merges")

	step("the agents page", 10*time.Second, chromedp.Navigate(base+"/agents"), chromedp.WaitVisible(`#agent-backend`))
	shot("agents")
}

// waitAgentState polls swarm status until agent is in state.
func waitAgentState(t *testing.T, bin, dir string, env []string, agent, state string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := swarmCmd(t, bin, dir, env, 0, "status", "--json")
		if regexp.MustCompile(`"name": "` + agent + `",\s+"state": "` + state + `"`).MatchString(out) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not %s within 15s:\n%s", agent, state, out)
		}
		time.Sleep(100 * time.Millisecond) // polling the CLI, bounded by the deadline
	}
}

// waitPrompt polls for the stored prompt of agent's session seq.
func waitPrompt(t *testing.T, bin, dir string, env []string, agent string, seq int) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		cmd := exec.Command(bin, "prompt", agent, "--session", fmt.Sprint(seq))
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err == nil {
			return string(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prompt of %s's session %d within 15s: %v", agent, seq, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the CLI, bounded by the deadline
	}
}

// TestWebAttached: `swarm web` as a process of its own, attached to a
// running supervisor like `swarm watch`: it acts through the same verbs
// (a bearer here, as a script would), its event stream is fed by the
// control socket's notices, and it ends when the supervisor stops.
func TestWebAttached(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a supervisor")
	}
	env := e2eEnv(t)
	bin := buildSwarm(t)
	dir := newE2ERepo(t, bin, env)
	up := exec.Command(bin, "up", "--no-tui", "--engine", "script")
	up.Dir, up.Env = dir, env
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		up.Process.Signal(syscall.SIGINT)
		select {
		case <-upDone:
		case <-time.After(20 * time.Second):
			up.Process.Kill()
		}
	})
	waitAgentState(t, bin, dir, env, "bravo", "Idle")

	web := exec.Command(bin, "web")
	web.Dir, web.Env = dir, env
	stdout, err := web.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var webErr strings.Builder
	web.Stderr = &webErr
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	webDone := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "swarm web: the operator's desk is at "); ok {
				urls <- u
			}
		}
		webDone <- web.Wait()
	}()
	t.Cleanup(func() { web.Process.Kill() })
	var deskURL string
	select {
	case deskURL = <-urls:
	case <-time.After(20 * time.Second):
		t.Fatalf("swarm web printed no URL\n%s", webErr.String())
	}
	base, token, _ := strings.Cut(deskURL, "/?token=")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := func(method, path string, body io.Reader) *http.Response {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctx, method, base+path, body)
		r.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	events := req(http.MethodGet, "/events", nil)
	defer events.Body.Close()
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(events.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// The message button: the send verb as the operator, and its notice
	// on the stream.
	resp := req(http.MethodPost, "/agents/bravo/message", strings.NewReader("body=hello+from+the+web"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "sent") {
		t.Fatalf("message: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	out := swarmCmd(t, bin, dir, env, 0, "inbox", "bravo", "--json")
	if !strings.Contains(out, `"from": "operator"`) || !strings.Contains(out, "hello from the web") {
		t.Fatalf("bravo's inbox:\n%s", out)
	}
	for seen := false; !seen; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the event stream ended")
			}
			seen = strings.Contains(l, `"agent":"bravo"`)
		case <-ctx.Done():
			t.Fatal("no event about bravo on the stream")
		}
	}

	// The supervisor stops: so does the desk, exit 0.
	up.Process.Signal(syscall.SIGINT)
	select {
	case err := <-webDone:
		if err != nil || !strings.Contains(webErr.String(), "swarm web: the supervisor stopped") {
			t.Fatalf("swarm web after the supervisor stopped: %v\n%s", err, webErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("swarm web did not end with the supervisor\n%s", webErr.String())
	}
}
