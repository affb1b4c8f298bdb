package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/web"
)

// WebOptions are the inputs of `swarm web`.
type WebOptions struct {
	App       *App
	Addr      string
	TokenFile string
}

func newWebCmd(app *App, runF func(*WebOptions) error) *cobra.Command {
	opts := &WebOptions{App: app}
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Serve the operator's desk as a web page, attached to the running swarm",
		Long: `Serve the operator's desk in a browser, attached to the supervisor running
in this repository (as 'swarm watch' is): the agents live, mail with its
threads and a search, the escalations to ack and decide (with a note the
agent reads), the workflows' items with their history, reviewed diff and
merge, the merge queue (land an agent's branch, cancel a candidate), the
file reservations (release one), and each session's log and prompt.
Pages change as the swarm does (server-sent events from the supervisor's
notices). 'swarm up --web' serves the same desk from the supervisor
itself.

It listens on 127.0.0.1 with a free port and prints the URL to open, with
a login token in it: the first visit sets a session cookie (HttpOnly,
SameSite=Strict) and every button also sends a CSRF token. Every button
runs the verb the CLI runs, as the operator; what the CLI refuses, the
page refuses (403, naming the rule).

--addr (or [web] addr) listens elsewhere; any address but loopback needs
a token the operator keeps, in [web] token_file or --token-file, and is
refused without one. With a token file the URL is printed without the
token: log in with the file's token. Scripts may send it as
'Authorization: Bearer <token>' instead of the cookie and CSRF token.

It refuses to run inside an agent's session. It ends when the supervisor
stops, or on Ctrl-C.`,
		Example: `  swarm web
  swarm web --addr 0.0.0.0:8080 --token-file ~/.config/swarm/desk.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runWeb(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "", "host:port to listen on (default [web] addr, else 127.0.0.1 with a free port)")
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "a file holding the login token (default [web] token_file; required off loopback)")
	return cmd
}

func runWeb(ctx context.Context, opts *WebOptions) error {
	app := opts.App
	who, err := app.callerOf(ctx, nil, nil)
	if err != nil {
		return err
	}
	return verbs.Web(ctx, who, func(ctx context.Context) error { return serveWeb(ctx, opts) })
}

// serveWeb is runWeb once the verb let the caller through.
func serveWeb(ctx context.Context, opts *WebOptions) error {
	app := opts.App
	if opts.Addr != "" {
		if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
			return usagef("--addr %q is not host:port (for example 127.0.0.1:8080)", opts.Addr)
		}
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	ln, token, fromFile, err := webListen(cfg, opts.Addr, opts.TokenFile)
	if err != nil {
		return err
	}
	defer ln.Close()
	stream, err := control.Watch(ctx, l)
	if errors.Is(err, control.ErrNoSupervisor) {
		return errNoSupervisor
	}
	if err != nil {
		return err
	}
	defer stream.Close()
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	desk := &webDesk{storeSource: newStoreSource(l, cfg, st, app.poster(st, l, cfg)), next: (&watchSource{stream: stream}).Next}
	srv, err := web.New(web.Options{Desk: desk, Store: st, Config: cfg, Token: token, Title: l.Root, Log: slog.Default()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() {
		runErr <- srv.Run(ctx)
		cancel() // the supervisor stopped: so does the desk
	}()
	printWebURL(app.Stdout, ln, token, fromFile)
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("web desk: %w", err)
	}
	if err := <-runErr; err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	fmt.Fprintln(app.Stderr, "swarm web: the supervisor stopped")
	return nil
}

// webListen opens the desk's listener: flags over [web], loopback with a
// free port by default, and a token file required anywhere else.
func webListen(cfg *config.Config, addr, tokenFile string) (ln net.Listener, token string, fromFile bool, err error) {
	if addr == "" {
		addr = cfg.Web.Addr
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if tokenFile == "" {
		tokenFile = cfg.Web.TokenFile
	}
	if err := web.CheckAddr(addr, tokenFile); err != nil {
		return nil, "", false, err
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, "", false, fmt.Errorf("read the desk's token file: %w; write a long random token there (for example: openssl rand -hex 24 > %s)", err, tokenFile)
		}
		token = strings.TrimSpace(string(b))
		if len(token) < 16 {
			return nil, "", false, fmt.Errorf("the token in %s is %d characters: use at least 16 random ones (for example: openssl rand -hex 24 > %s)", tokenFile, len(token), tokenFile)
		}
		fromFile = true
	} else if token, err = web.NewToken(); err != nil {
		return nil, "", false, err
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, "", false, fmt.Errorf("web desk: listen on %s: %w; choose another --addr", addr, err)
	}
	return ln, token, fromFile, nil
}

// webURLPrefix starts the line that says where the desk is.
const webURLPrefix = "swarm web: the operator's desk is at "

// printWebURL says where the desk is, and returns the URL. A token from a
// file stays out of the output: the operator has it.
func printWebURL(w io.Writer, ln net.Listener, token string, fromFile bool) string {
	url := web.URL(ln, token)
	if fromFile {
		url = fmt.Sprintf("http://%s/", ln.Addr())
		fmt.Fprintf(w, "%s%s (log in with the token in your token file)\n", webURLPrefix, url)
		return url
	}
	fmt.Fprintf(w, "%s%s\n", webURLPrefix, url)
	return url
}

// startUpWeb serves the desk from inside `swarm up --web`, fed by the
// supervisor's own notices; decisions release holds at once. It returns
// once the listener is open; the desk stops with ctx.
func startUpWeb(ctx context.Context, out io.Writer, l repo.Layout, cfg *config.Config, st mailbox.Store, sup *swarm.Supervisor, logger *slog.Logger) (url string, wait func(), err error) {
	ln, token, fromFile, err := webListen(cfg, "", "")
	if err != nil {
		return "", nil, err
	}
	notices := sup.Watch(ctx)
	src := newStoreSource(l, cfg, st, sup.Poster())
	src.decide = sup.Decide
	up := &upSource{storeSource: src, notices: notices, done: ctx.Done()}
	srv, err := web.New(web.Options{Desk: &webDesk{storeSource: src, next: up.Next}, Store: st, Config: cfg, Token: token, Title: l.Root, Log: logger})
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	url = printWebURL(out, ln, token, fromFile)
	logger.Info("web desk listening", "addr", ln.Addr().String())
	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(ctx) }) //nolint:errcheck // it ends with the supervisor
	wg.Go(func() {
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("web desk", "err", err)
		}
	})
	return url, wg.Wait, nil
}

// webDesk is the desk's data path: the live view's (storeSource), with
// notices from wherever this process gets them.
type webDesk struct {
	*storeSource
	next func(ctx context.Context) (lifecycle.Notice, error)
}

func (d *webDesk) Next(ctx context.Context) (lifecycle.Notice, error) { return d.next(ctx) }

// sessionLogBytes bounds the log the session page shows: its end.
const sessionLogBytes = 512 << 10

// SessionLog is the end of a session's log as 'swarm logs' prints it.
func (s *storeSource) SessionLog(ctx context.Context, agent string, seq int64) (string, error) {
	f, err := os.Open(s.l.SessionLog(agent, seq))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	// Whether it is an exec agent's log shows in its first lines.
	first := make([]byte, min(fi.Size(), 4<<10))
	if _, err := io.ReadFull(f, first); err != nil {
		return "", err
	}
	exec := execengine.IsExecLog(first)
	head := ""
	off := int64(0)
	if fi.Size() > sessionLogBytes {
		off = fi.Size() - sessionLogBytes
		head = fmt.Sprintf("[the first %d bytes are left out: 'swarm logs %s --session %d' prints them]\n", off, agent, seq)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", err
	}
	text, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	if exec {
		text = execengine.Render(text)
	}
	return head + termsafe.String(string(text)), nil
}

// Merge is 'swarm workflow merge' as the operator.
func (s *storeSource) Merge(ctx context.Context, item string) (string, error) {
	q, err := mergeQueue(ctx, s.l, s.cfg, s.st, s.poster)
	if err != nil {
		return "", err
	}
	it, landing, err := verbs.MergeItem(ctx, identity.Operator(), s.st, s.cfg, q, item)
	if err != nil {
		return "", err
	}
	pokeSupervisor(s.l)
	if landing.Commit == "" {
		return fmt.Sprintf("item %s merged: its reviewed commit %.12s was on the base branch already", it.ID, it.ReviewCommit), nil
	}
	return fmt.Sprintf("item %s merged: reviewed commit %.12s is on the base branch as %.12s", it.ID, it.ReviewCommit, landing.Commit), nil
}

// reviewDiffMax bounds the diff the item page shows, as a review request's.
const reviewDiffMax = 256 << 10

// ReviewDiff is the reviewed diff of commit.
func (s *storeSource) ReviewDiff(ctx context.Context, commit string) (string, error) {
	git, err := workflowGit(ctx, s.l, s.cfg.Worktree.Dir, s.st)
	if err != nil {
		return "", err
	}
	p, err := git.ReviewDiff(ctx, commit, reviewDiffMax)
	if err != nil {
		return "", err
	}
	return p.Diff, nil
}

// Abort is 'swarm workflow abort' as the operator.
func (s *storeSource) Abort(ctx context.Context, item, note string) error {
	if _, err := verbs.AbortItem(ctx, identity.Operator(), s.st, item, note); err != nil {
		return err
	}
	pokeSupervisor(s.l)
	return nil
}

// Reply is the reply verb as the operator.
func (s *storeSource) Reply(ctx context.Context, id int64, d message.Draft) (message.Message, error) {
	return verbs.Reply(ctx, identity.Operator(), s.poster, id, d)
}

// MarkRead is the mark-read verb as the operator, on the operator's mail.
func (s *storeSource) MarkRead(ctx context.Context, ids []int64) (int64, error) {
	return verbs.MarkRead(ctx, identity.Operator(), s.st, message.Operator, ids)
}

// Land is 'swarm land <agent>' as the operator: the merge queue takes the
// agent's branch, and the supervisor is poked to look at it now.
func (s *storeSource) Land(ctx context.Context, agent string) (verbs.LandResult, error) {
	git, err := workflowGit(ctx, s.l, s.cfg.Worktree.Dir, s.st)
	if err != nil {
		return verbs.LandResult{}, err
	}
	res, err := verbs.Land(ctx, identity.Operator(), s.st, s.cfg, git, verbs.LandRequest{Agent: agent})
	if err != nil {
		return res, err
	}
	pokeSupervisor(s.l)
	return res, nil
}

// CancelLanding is 'swarm land --cancel' as the operator.
func (s *storeSource) CancelLanding(ctx context.Context, id int64, note string) (merge.Candidate, error) {
	c, err := verbs.CancelLanding(ctx, identity.Operator(), s.st, id, note)
	if err != nil {
		return c, err
	}
	pokeSupervisor(s.l)
	return c, nil
}

// CheckoutBehind is the line 'swarm status' prints about the operator's
// checkout behind the base branch.
func (s *storeSource) CheckoutBehind(ctx context.Context) string {
	return behindLine(checkoutOf(ctx, s.l, s.cfg, s.st))
}

// Release is 'swarm release --agent' as the operator.
func (s *storeSource) Release(ctx context.Context, agent string, globs []string) (verbs.ReleaseResult, error) {
	return verbs.Release(ctx, identity.Operator(), verbs.ReleaseRequest{Store: s.st, Agent: agent, Globs: globs, Now: s.now()})
}
