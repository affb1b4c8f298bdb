// Package pgtest runs a throwaway PostgreSQL cluster for tests: initdb and
// pg_ctl on a Unix socket in a temporary directory, no TCP port, fsync off.
// A package's TestMain calls Main; each test calls NewDB for a fresh
// database and gets its URL.
//
// PostgreSQL refuses to run as root. When the tests run as root (CI
// containers), every server command runs as the unprivileged user nobody
// through setpriv (or runuser), in a directory chown'ed to it.
//
// When no PostgreSQL binaries are installed, the tests that need them skip
// with one line saying how to run them; with SWARM_REQUIRE_POSTGRES=1 (CI)
// they fail instead. It uses the binaries only, never a driver: only the
// store packages import one.
package pgtest

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Require is the environment variable that turns a skip into a failure.
const Require = "SWARM_REQUIRE_POSTGRES"

// Missing is the line printed when the binaries are absent.
const Missing = "PostgreSQL tests skipped: no initdb/pg_ctl found (on Debian: apt-get install postgresql; they run from /usr/lib/postgresql/<version>/bin)"

// User is the database superuser the cluster is created with.
const User = "swarm"

// Cluster is a running throwaway cluster.
type Cluster struct {
	Dir    string // the temporary directory: data/, the socket, the log
	bin    string
	runAs  []string // the prefix that drops root, or nil
	nextDB atomic.Int64
}

var (
	mu      sync.Mutex
	cluster *Cluster
	why     string // why there is no cluster
)

// Main starts a cluster (when PostgreSQL is installed), runs the tests
// and stops it. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	c, err := Start()
	mu.Lock()
	cluster = c
	if err != nil {
		why = err.Error()
	}
	mu.Unlock()
	code := m.Run()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// NewDB creates a fresh database in the cluster Main started and returns
// its URL. It skips the test when PostgreSQL is not installed (fails when
// SWARM_REQUIRE_POSTGRES=1).
func NewDB(t testing.TB) string {
	t.Helper()
	mu.Lock()
	c, reason := cluster, why
	mu.Unlock()
	if c == nil {
		if reason == "" {
			reason = "pgtest.Main did not run: call it from TestMain"
		}
		if os.Getenv(Require) != "" {
			t.Fatalf("%s is set but: %s", Require, reason)
		}
		t.Skip(reason)
	}
	u, err := c.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Available reports whether a cluster runs; tests that only log use it.
func Available() bool {
	mu.Lock()
	defer mu.Unlock()
	return cluster != nil
}

// BinDir finds the directory of initdb and pg_ctl: PATH first, then the
// newest /usr/lib/postgresql/<version>/bin (Debian keeps them there).
func BinDir() (string, bool) {
	var dirs []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	for _, d := range append(dirs, found...) {
		if complete(d) {
			return d, true
		}
	}
	return "", false
}

// complete reports whether dir has every program the cluster needs.
func complete(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres", "createdb", "psql"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// dropRoot returns the command prefix that runs a server command as
// nobody when this process is root, and the uid/gid to chown to.
func dropRoot() (prefix []string, uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root and there is no user nobody to run PostgreSQL as: %w", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if p, err := exec.LookPath("setpriv"); err == nil {
		return []string{p, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--"}, uid, gid, nil
	}
	if p, err := exec.LookPath("runuser"); err == nil {
		return []string{p, "-u", "nobody", "--"}, uid, gid, nil
	}
	return nil, 0, 0, fmt.Errorf("running as root, and neither setpriv nor runuser is installed to run PostgreSQL as nobody (apt-get install util-linux)")
}

// Start creates and starts a cluster in a new temporary directory.
func Start() (*Cluster, error) {
	bin, ok := BinDir()
	if !ok {
		return nil, fmt.Errorf("%s", Missing)
	}
	prefix, uid, gid, err := dropRoot()
	if err != nil {
		return nil, err
	}
	// A short path: the socket's must fit in 107 bytes.
	dir, err := os.MkdirTemp("", "swarm-pg-")
	if err != nil {
		return nil, err
	}
	if len(dir) > 80 {
		os.RemoveAll(dir)
		if dir, err = os.MkdirTemp("/tmp", "swarm-pg-"); err != nil {
			return nil, err
		}
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("hand %s to nobody: %w", dir, err)
		}
	}
	c := &Cluster{Dir: dir, bin: bin, runAs: prefix}
	if err := c.run("initdb", "-D", c.data(), "-U", User, "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", c.opts(), "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

// opts are the server's options: the socket in Dir, no TCP, no fsync.
func (c *Cluster) opts() string {
	return fmt.Sprintf("-k %s -c listen_addresses='' -F -c max_connections=200 -c synchronous_commit=off", c.Dir)
}

// Restart stops the server (fast: clients are disconnected) and starts it
// again, as an operator's pg_ctl restart does; it returns once the server
// accepts connections again.
func (c *Cluster) Restart() error {
	return c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.Dir, "server.log"), "-m", "fast", "-w", "-t", "60", "-o", c.opts(), "restart")
}

func (c *Cluster) run(name string, args ...string) error {
	argv := append(slices.Clone(c.runAs), append([]string{filepath.Join(c.bin, name)}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: %s: %w\n%s", strings.Join(argv, " "), err, out.String())
	}
	return nil
}

// URL is the URL of database name in the cluster.
func (c *Cluster) URL(name string) string {
	q := url.Values{"host": {c.Dir}, "user": {User}, "sslmode": {"disable"}}
	return "postgres:///" + name + "?" + q.Encode()
}

// CreateDB creates an empty database and returns its URL.
func (c *Cluster) CreateDB() (string, error) {
	name := fmt.Sprintf("t%d", c.nextDB.Add(1))
	if err := c.run("createdb", "-h", c.Dir, "-U", User, name); err != nil {
		return "", err
	}
	return c.URL(name), nil
}

// Psql runs one SQL command as the superuser in database db.
func (c *Cluster) Psql(db, sql string) (string, error) {
	argv := append(slices.Clone(c.runAs), filepath.Join(c.bin, "psql"), "-h", c.Dir, "-U", User, "-d", db, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql %q: %w\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Current is the cluster Main started, or nil.
func Current() *Cluster {
	mu.Lock()
	defer mu.Unlock()
	return cluster
}

// Stop stops the server at once and removes its directory.
func (c *Cluster) Stop() error {
	err := c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	if rerr := os.RemoveAll(c.Dir); err == nil {
		err = rerr
	}
	return err
}
