package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/internal/front"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/open"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/sandbox"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/web"
	"github.com/swarmhq/swarm/worktree"
)

// UpOptions are the inputs of `swarm up`.
type UpOptions struct {
	App    *App
	Engine string
	Agents []string
	NoTUI  bool
	Detach bool // -d: run in the background (up_detach.go)
	// Yes runs settings that run programs (a [notify] command, an engine's
	// command, args or base_url) although they changed since the last
	// supervisor ran.
	Yes bool
	// Web serves the operator's desk from the supervisor (cmd_web.go).
	Web bool
}

func newUpCmd(app *App, runF func(*UpOptions) error) *cobra.Command {
	opts := &UpOptions{App: app}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the supervisor: every agent gets a worktree and runs sessions",
		Long: `Start the swarm in the foreground. Every agent gets its own git worktree
(.swarm/worktrees/<agent>, branch swarm/<agent>) and a runner that builds
its prompt, runs sessions on its engine, and waits for mail or tasks when
it has nothing to do.

When stdout is a terminal, a live view shows the agents, their mail and the
selected agent's session log (keys: ? for help; 'swarm watch' attaches the
same view from another terminal). With --no-tui, or when stdout is not a
terminal, one line is printed per transition and per message instead.
Everything also goes to .swarm/logs/supervisor.log, and each session logs
to .swarm/logs/<agent>/<session>.log.

Ctrl-C (or q then y in the view, SIGTERM, or 'swarm down') stops gracefully: running sessions are
cancelled, waiting up to interrupt_grace, mail they had is queued again, and
swarm exits 0. A second Ctrl-C forces the stop: every session's processes
are killed at once. After a crash, the next 'swarm up' recovers: nothing is
lost, session numbers continue, and what an interrupted 'swarm down' left
half done in the worktrees is finished first ("recovered: ...").

With -d it runs in the background instead: it returns as soon as the
supervisor answers on its control socket, printing its pid, and the
supervisor's output goes to .swarm/logs/up.out. 'swarm watch' shows it and
'swarm down' stops it. Exit status 1 when it stops before it answers (its
last output is shown).

A [notify] command or webhook, or an engine's command, args or base_url
that changed since the last supervisor ran is named (old → new) and runs
only once you confirm: answer y on a terminal, or pass --yes. An agent
without a sandbox can write swarm.toml.

Only one supervisor runs per repository. It refuses to start inside an
agent session ($SWARM_SESSION_ID set): that is the operator's.`,
		Example: `  swarm up
  swarm up --engine script            # offline, with scripted agents
  swarm up --agents backend,frontend  # only some agents
  swarm up -d && swarm watch          # in the background`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runUp(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Engine, "engine", "", "run every agent on this engine (gemini, script, or an [engine.NAME])")
	f.StringSliceVar(&opts.Agents, "agents", nil, "run only these agents (comma-separated)")
	f.BoolVar(&opts.NoTUI, "no-tui", false, "print plain lines instead of the full-screen view")
	f.BoolVarP(&opts.Detach, "detach", "d", false, "run in the background: return once the supervisor answers, output in .swarm/logs/up.out")
	f.BoolVarP(&opts.Yes, "yes", "y", false, "run changed [notify] and engine commands without asking")
	f.BoolVar(&opts.Web, "web", false, "serve the operator's desk in a browser too (as 'swarm web'; the URL is printed)")
	cmd.RegisterFlagCompletionFunc("agents", app.completeAgents(false))
	return cmd
}

func runUp(ctx context.Context, opts *UpOptions) error {
	app := opts.App
	who, err := app.callerOf(ctx, nil, nil)
	if err != nil {
		return err
	}
	return verbs.Up(ctx, who, func(ctx context.Context) error { return upSwarm(ctx, opts) })
}

// upSwarm is runUp once the verb let the caller through.
func upSwarm(ctx context.Context, opts *UpOptions) error {
	app := opts.App
	l, cfg, err := app.loadConfig()
	if err != nil {
		return err
	}
	for _, name := range opts.Agents {
		if _, err := agentIn(cfg, name); err != nil {
			return usagef("--agents: %v", err)
		}
	}
	if opts.Engine != "" {
		if err := checkEngineFlag(cfg, opts.Engine); err != nil {
			return err
		}
	}
	if exe, err := os.Executable(); err == nil {
		if err := front.CheckBeside(exe); err != nil {
			return err
		}
	}
	// Enough open files for every agent, or a refusal naming the limit
	// needed, before anything is touched: never a half-started swarm.
	if err := ensureFDLimit(upAgents(cfg, opts.Agents)); err != nil {
		return err
	}
	if opts.Web {
		// A desk it may not serve stops it before anything starts.
		if err := web.CheckAddr(cmp.Or(cfg.Web.Addr, "127.0.0.1:0"), cfg.Web.TokenFile); err != nil {
			return err
		}
	}
	if opts.Detach {
		// The background supervisor has no terminal to ask on: ask here,
		// and tell it the answer.
		if !opts.Yes {
			st, err := app.openStore(ctx, l, cfg)
			if err != nil {
				return err
			}
			err = confirmSettings(ctx, app, st, cfg, false)
			st.Close()
			if err != nil {
				return err
			}
			opts.Yes = true
		}
		return runUpDetached(ctx, opts, l)
	}

	// Worktree problems (no commits, detached HEAD, old git) stop us
	// before anything is created.
	wtm, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Pass: cfg.Env.Pass})
	if err != nil {
		return err
	}
	if err := wtm.Preflight(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(l.Logs(), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", l.Logs(), err)
	}
	// A clone that was never swarm init-ed (a second host's) would show
	// ?? .swarm/ in git status.
	if _, err := excludeState(ctx, l.Root); err != nil {
		slog.Warn("could not keep .swarm/ out of git status", "err", err)
	}
	if err := hardenSupervisor(); err != nil {
		slog.Warn("could not make the supervisor non-dumpable", "err", err)
	}
	lock, err := swarm.AcquireLock(l.Lock())
	if err != nil {
		return err
	}
	defer lock.Release()

	logFile, err := os.OpenFile(filepath.Join(l.Logs(), "supervisor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open supervisor log: %w", err)
	}
	defer logFile.Close()
	level := slog.LevelInfo
	if app.Verbose > 0 {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: level}))
	prev := slog.Default()
	slog.SetDefault(logger)
	defer slog.SetDefault(prev)

	app.supervising = true // it holds the lock: the database is its to create
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := confirmSettings(ctx, app, st, cfg, opts.Yes); err != nil {
		return err
	}
	// A PostgreSQL restart under a starting swarm up is waited out here as
	// the supervisor's own start-up steps wait it out.
	if err := swarm.WhileAway(ctx, st, nil, logger, "record the trusted settings", func() error { return swarm.RecordSettings(ctx, st, cfg) }); err != nil {
		return err
	}
	wtm, err = worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: st, Pass: cfg.Env.Pass})
	if err != nil {
		return err
	}
	// The live view shows the notices; the supervisor log still gets them.
	useTUI, lineOut := !opts.NoTUI && !app.JSON && isTerminal(app.Stdout), app.Stdout
	if useTUI {
		lineOut = io.Discard
	}
	// The sessions' swarm commands come through their doors and run here,
	// as the session; the operator's `swarm send` too.
	target := open.Choose(app.Env.Getenv, cfg.Mailbox.URL, l.DB)
	via := &swarmCommands{store: st, target: target.String(), root: l.Root}
	sup, err := newSupervisor(cfg, l, st, wtm, opts, logger, newLinePrinter(lineOut, app.JSON, logger), via)
	if err != nil {
		return err
	}
	if err := sup.Preflight(ctx); err != nil {
		return err
	}
	if d := sup.Sandbox(); !d.Contained() {
		// Never silently: the sessions get the operator's rights.
		fmt.Fprintf(app.Stderr, "swarm: warning: no sandbox (%s): sessions run with your rights; fix: %s\n", d.Why, sandbox.Fix)
	}
	// The agents' leases before their worktrees are touched: on a swarm
	// spanning hosts, another supervisor may run some of them.
	if err := sup.Claim(ctx); err != nil {
		return err
	}
	defer sup.Release()
	// What an interrupted run left half done is finished before any
	// runner starts, under the lock; what was done is said, and logged.
	recoverOut := io.Writer(app.Stdout)
	if useTUI {
		recoverOut = io.Discard
	} else if app.JSON {
		recoverOut = app.Stderr
	}
	recoverWorktrees(ctx, wtm, st, sup.AgentNames(), recoverOut, logger)

	// The first signal stops gracefully; a second one forces the stop. The
	// watcher ends with runUp, which waits for it.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	// A reader that goes away (swarm up | head) must not kill the
	// supervisor mid-stop: writes to a closed pipe fail with EPIPE
	// instead, and the line printer stops printing.
	signal.Ignore(syscall.SIGPIPE)
	watchDone := make(chan struct{})
	endWatch := make(chan struct{})
	defer func() {
		signal.Stop(sigs)
		close(endWatch)
		<-watchDone
	}()
	go func() {
		defer close(watchDone)
		select {
		case <-endWatch:
			return
		case sig := <-sigs:
			if !useTUI { // the view shows the agents stopping; text would tear it
				fmt.Fprintf(app.Stderr, "swarm: %s: stopping gracefully (again to force)\n", sig)
			}
			cancel(fmt.Errorf("%w: %s", swarm.ErrShutdown, sig))
		}
		select {
		case <-endWatch:
		case <-sigs:
			// Nothing of a session may outlive a forced stop.
			n := sup.KillSessions()
			fmt.Fprintf(app.Stderr, "swarm: forced stop: killed %d session process group(s); the next 'swarm up' recovers\n", n)
			os.Exit(exitError)
		}
	}()

	// With --json, stdout carries only the notices.
	talk := app.Stdout
	if app.JSON {
		talk = app.Stderr
	}
	if useTUI {
		talk = io.Discard // the view owns the terminal; the log has it
	}
	stopHUP := reloadOnHUP(ctx, sup, talk, l.Root, logger)
	defer stopHUP()
	webURL := ""
	if opts.Web {
		// The URL goes where the operator sees it: in the view's title
		// line, or printed.
		webCtx, endWeb := context.WithCancel(context.WithoutCancel(ctx))
		url, waitWeb, err := startUpWeb(webCtx, talk, l, cfg, st, sup, logger)
		if err != nil {
			endWeb()
			return err
		}
		// After the supervisor's Run: the desk shows the agents stopping,
		// then goes.
		defer waitWeb()
		defer endWeb()
		webURL = url
	}
	if useTUI {
		return runUpTUI(ctx, cancel, app, l, cfg, st, sup, webURL)
	}
	fmt.Fprintf(talk, "swarm up: %d agent(s) in %s (pid %d); Ctrl-C to stop\n", len(sup.AgentNames()), l.Root, os.Getpid())
	err = sup.Run(ctx)
	if err != nil && !errors.Is(err, swarm.ErrShutdown) && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintln(talk, stoppedLine)
	return nil
}

// confirmSettings stops swarm up when a setting that runs a program or
// sends data out changed since the last supervisor ran, unless yes is set
// or the operator answers y on a terminal. Values are an agent's text, so
// they are made safe for the terminal.
func confirmSettings(ctx context.Context, app *App, st mailbox.Store, cfg *config.Config, yes bool) error {
	var changes []swarm.SettingChange
	err := swarm.WhileAway(ctx, st, nil, slog.Default(), "read the trusted settings", func() (err error) {
		changes, err = swarm.ChangedSettings(ctx, st, cfg)
		return err
	})
	if err != nil || len(changes) == 0 || yes {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s changed what swarm runs since the last supervisor ran:\n", rel(cfg.Root, cfg.Path))
	for _, c := range changes {
		fmt.Fprintf(&b, "  %s\n", termsafe.String(c.String()))
	}
	if !stdinIsTerminal(app.Stdin) {
		return &codeError{code: exitError, err: fmt.Errorf("%san agent without a sandbox can write that file, so nothing was started: look at the change, then run 'swarm up --yes' if it is yours", b.String())}
	}
	fmt.Fprint(app.Stderr, b.String())
	fmt.Fprint(app.Stderr, "An agent without a sandbox can write that file. Run with these? [y/N] ")
	line, err := bufio.NewReader(app.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return &codeError{code: exitError, err: errors.New("nothing was started; fix swarm.toml, or run 'swarm up --yes' to run with it")}
}

// newSupervisor wires the real packages into a supervisor.
func newSupervisor(cfg *config.Config, l repo.Layout, st mailbox.Store, wtm *worktree.Manager, opts *UpOptions, logger *slog.Logger, notify func(lifecycle.Notice), via *swarmCommands) (*swarm.Supervisor, error) {
	tasks := swarm.NewBeadsTasks(l.Root, cfg.Prompt.BDTimeout)
	o := swarm.Options{
		Config:         cfg,
		Layout:         l,
		Store:          st,
		Agents:         opts.Agents,
		EngineOverride: opts.Engine,
		Engines:        swarm.EngineFactory(cfg, opts.Engine),
		Worktrees:      swarm.GitWorktrees{M: wtm, Meta: st},
		Prompts:        swarm.NewPipePrompts(cfg, l, st, tasks, time.Now, logger),
		Logger:         logger,
		Notify:         notify,
	}
	if tasks != nil { // a nil *BeadsTasks must not become a non-nil Tasks
		o.Tasks = tasks
	}
	if via != nil {
		o.RunCommand = via.run
	}
	o.Verbs = supervisorVerbs{via: via} // the engines' tools and the socket go through the verbs
	return swarm.New(o)
}

// recoverWorktrees finishes what an interrupted run left half done in the
// worktrees, printing each line to w (the supervisor log has them already);
// a problem it could not solve is printed and logged, and the agents it
// concerns fail on their own when they start.
func recoverWorktrees(ctx context.Context, wtm *worktree.Manager, st mailbox.Store, agents []string, w io.Writer, logger *slog.Logger) {
	// Its reads of the store wait out a database restart, as the
	// supervisor's own start-up does; what each try did is kept.
	var lines []string
	err := swarm.WhileAway(ctx, st, nil, logger, "recover the worktrees", func() error {
		more, err := swarm.RecoverWorktrees(ctx, wtm, st, agents)
		lines = append(lines, more...)
		return err
	})
	for _, l := range lines {
		fmt.Fprintf(w, "swarm up: recovered: %s\n", l)
	}
	if err != nil {
		fmt.Fprintf(w, "swarm up: could not finish what an interrupted run left: %v\n", err)
		logger.Error("could not finish what an interrupted run left", "err", err)
	}
}

// stoppedLine is what swarm up says last. It cannot know what a 'swarm
// down' that stopped it does next, so it only says where things stand.
const stoppedLine = "swarm stopped"

// newLinePrinter prints one readable line (or, with asJSON, one JSON
// object) per transition and message, and logs the same to the supervisor
// log.
func newLinePrinter(w io.Writer, asJSON bool, logger *slog.Logger) func(lifecycle.Notice) {
	var (
		mu     sync.Mutex
		broken bool // the reader went away: stop printing, keep running
	)
	enc := json.NewEncoder(w)
	return func(n lifecycle.Notice) {
		mu.Lock()
		if !broken {
			var err error
			if asJSON {
				if n.Kind != lifecycle.NoticeActivity {
					err = enc.Encode(n)
				}
			} else if line := formatNotice(n); line != "" {
				_, err = fmt.Fprintln(w, line)
			}
			if err != nil {
				broken = true
				logger.Warn("stopped printing notices: the output is gone", "err", err)
			}
		}
		mu.Unlock()
		switch n.Kind {
		case lifecycle.NoticeTransition:
			logger.Info("transition", "agent", n.Agent, "from", string(n.From), "to", string(n.To), "cause", n.Cause, "session_seq", n.Seq)
		case lifecycle.NoticeMessage:
			logger.Info("message", "id", n.Message.ID, "from", n.Message.From, "to", n.Message.To, "urgency", string(n.Message.Urgency), "kind", string(n.Message.Kind))
		case lifecycle.NoticeInfo:
			logger.Info(n.Text, "agent", n.Agent)
		case lifecycle.NoticeEscalation:
			logger.Warn(n.Text, "agent", n.Agent, "cause", n.Cause)
		}
	}
}

func formatNotice(n lifecycle.Notice) string {
	ts := n.At.Local().Format("15:04:05.000")
	switch n.Kind {
	case "transition":
		cause := ""
		if n.Cause != "" && n.Cause != string(n.To) {
			cause = "  (" + termsafe.String(n.Cause) + ")"
		}
		return fmt.Sprintf("%s  %-12s %s → %s%s", ts, n.Agent, n.From, n.To, cause)
	case "message":
		m := n.Message
		urgent := ""
		if m.IsUrgent() {
			urgent = "[URGENT] "
		}
		return fmt.Sprintf("%s  %-12s mail #%d %s → %s: %s%s", ts, "", m.ID, m.From, m.To, urgent, firstLineCut(m.Body, 70))
	case "info":
		return fmt.Sprintf("%s  %-12s %s", ts, n.Agent, termsafe.String(n.Text))
	case "escalation":
		return fmt.Sprintf("%s  %-12s ! %s", ts, n.Agent, termsafe.String(n.Text))
	}
	return ""
}

// reloadOnHUP makes SIGHUP do what 'swarm reload' does, printing the
// report to w (a refusal too: the running configuration stays). The
// returned func stops it and waits.
func reloadOnHUP(ctx context.Context, sup *swarm.Supervisor, w io.Writer, root string, logger *slog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, end := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-end:
				return
			case <-hup:
				rep, err := sup.Reload(ctx)
				if err != nil {
					logger.Error("reload refused", "err", err)
					fmt.Fprintf(w, "swarm: SIGHUP: reload refused: %v\n", err)
					continue
				}
				fmt.Fprint(w, "swarm: SIGHUP: ")
				printReload(w, root, rep)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(end)
		<-done
	}
}

// upAgents is how many agents swarm up runs: those of --agents, else every
// one in swarm.toml but the retired.
func upAgents(cfg *config.Config, only []string) int {
	if len(only) > 0 {
		return len(only)
	}
	n := 0
	for _, a := range cfg.Agents {
		if a.Spawned == nil || !a.Spawned.Retired {
			n++
		}
	}
	return n
}
