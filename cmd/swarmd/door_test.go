package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/open"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
)

// cmdDoor stands in for the supervisor's door of one session, for
// scripts that act as an agent without running a swarm: door <agent>
// <seq> opens a door for session <seq> of <agent> in the repository of
// the current directory, serves it in this test process with the
// production door rules (swarm.HandleDoor) and command runner, and sets
// $SWARM_DOOR and $SWARM_ROOT, as a session's environment has them. The
// caller's capabilities are the stored session's, else swarm.toml's.
// door off closes it and unsets them.
func cmdDoor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: door <agent> <seq> | door off")
	}
	if args[0] == "off" {
		if stop := takeDoor(ts); stop != nil {
			stop()
		}
		ts.Setenv(control.DoorEnv, "")
		return
	}
	if len(args) != 2 {
		ts.Fatalf("usage: door <agent> <seq>")
	}
	seq, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("door: %v", err)
	}
	if stop := takeDoor(ts); stop != nil {
		stop()
	}
	cwd, err := filepath.Abs(ts.MkAbs("."))
	ts.Check(err)
	path, root, stop, err := openTestDoor(cwd, tsEnv{ts}, args[0], seq)
	ts.Check(err)
	doorsMu.Lock()
	doors[ts] = stop
	doorsMu.Unlock()
	ts.Defer(func() {
		if s := takeDoor(ts); s != nil {
			s()
		}
	})
	ts.Setenv(control.DoorEnv, path)
	ts.Setenv("SWARM_ROOT", root)
}

// openTestDoor opens and serves, in this process, the door of session seq
// of agent in the repository found from cwd, with the production door
// rules and command runner. stop closes it and waits for it.
func openTestDoor(cwd string, env repo.Env, agent string, seq int64) (path, root string, stop func(), err error) {
	l, err := repo.Find("", cwd, env)
	if err != nil {
		return "", "", nil, err
	}
	cfg, err := config.Load(l.Config, l.Root)
	if err != nil {
		return "", "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := open.Choose(env.Getenv, cfg.Mailbox.URL, l.DB)
	st, err := t.Open(ctx)
	if err != nil {
		cancel()
		return "", "", nil, err
	}
	caps := cfgCaps(cfg, agent)
	if sess, err := st.Session(ctx, agent, seq); err == nil && sess.Capabilities != nil {
		caps = sess.Capabilities
	} else if err != nil && !errors.Is(err, mailbox.ErrNoSuchSession) {
		cancel()
		st.Close()
		return "", "", nil, err
	}
	caller := identity.Session(agent, seq, caps)
	srv, err := control.ListenDoor(l, caller.SessionID())
	if err != nil {
		cancel()
		st.Close()
		return "", "", nil, err
	}
	via := &swarmCommands{store: st, target: t.String(), root: l.Root}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ctx, func(ctx context.Context, req control.Request, send func(any) error) control.Response {
			return swarm.HandleDoorCall(ctx, caller, req, via.run, via.call)
		})
	}()
	return srv.Path(), l.Root, func() {
		cancel()
		<-done
		st.Close()
	}, nil
}

// doors are the scripts' open doors; scripts run one at a time per
// TestScript, and each touches only its own.
var (
	doorsMu sync.Mutex
	doors   = map[*testscript.TestScript]func(){}
)

func takeDoor(ts *testscript.TestScript) func() {
	doorsMu.Lock()
	defer doorsMu.Unlock()
	stop := doors[ts]
	delete(doors, ts)
	return stop
}

func cfgCaps(cfg *config.Config, agent string) mode.Vector {
	if a, ok := cfg.Agent(agent); ok {
		return a.Spec().Vector()
	}
	return nil
}

// tsEnv is the script's environment.
type tsEnv struct{ ts *testscript.TestScript }

func (e tsEnv) Getenv(k string) string { return e.ts.Getenv(k) }

// rawSock is a hostile client for the scripts: rawsock <socket|glob>
// <json line> sends the line as it is to a control socket (a glob picks
// the first match, such as a session's door under .swarm/doors) and
// prints the answer line. It exits 1 when the socket cannot be reached.
func rawSock(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rawsock <socket|glob> <json>")
		return 2
	}
	path := args[0]
	if m, _ := filepath.Glob(path); len(m) > 0 {
		path = m[0]
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawsock:", err)
		return 1
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, args[1]+"\n"); err != nil {
		fmt.Fprintln(os.Stderr, "rawsock:", err)
		return 1
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawsock:", err)
		return 1
	}
	fmt.Print(line)
	return 0
}
