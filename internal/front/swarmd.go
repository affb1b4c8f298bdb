package front

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Program is the name of the whole program, which the front hands every
// command it does not answer itself.
const Program = "swarmd"

// Name is the front's own name, the command users and sessions type.
const Name = "swarm"

// ErrNoProgram is a front with no swarmd beside it or on PATH.
var ErrNoProgram = errors.New("no " + Program)

// FindProgram returns swarmd: the one beside the running front (the two
// are installed together), else the first on PATH.
func FindProgram() (string, error) {
	if exe, err := os.Executable(); err == nil {
		if p, ok := besideFront(exe); ok {
			return p, nil
		}
	}
	if p, err := exec.LookPath(Program); err == nil {
		return p, nil
	}
	dir := "the directory this swarm is in"
	if exe, err := os.Executable(); err == nil {
		dir = filepath.Dir(exe)
	}
	return "", fmt.Errorf("%w: swarm hands this command to %s, the whole program, and found none beside it (%s) or on PATH; install both with: go install github.com/swarmhq/swarm/cmd/swarm@latest github.com/swarmhq/swarm/cmd/swarmd@latest (or make build, which writes bin/swarm and bin/swarmd)", ErrNoProgram, Program, dir)
}

// besideFront is the swarmd beside exe, the path the front was run as,
// else beside the file a link there names (os.Executable resolves links on
// Linux, not everywhere).
func besideFront(exe string) (string, bool) {
	dirs := []string{filepath.Dir(exe)}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		if p := filepath.Join(d, Program); isProgram(p) {
			return p, true
		}
	}
	return "", false
}

// Beside returns the swarm front installed beside exe (a swarmd), or exe
// itself when there is none: what a session runs as `swarm`, since the
// front starts in a fraction of swarmd's time.
func Beside(exe string) string {
	if p := filepath.Join(filepath.Dir(exe), Name); filepath.Base(exe) == Program && isProgram(p) {
		return p
	}
	return exe
}

// IsSwarm reports whether exe is one of swarm's two binaries (and not,
// say, a test binary).
func IsSwarm(exe string) bool {
	b := filepath.Base(exe)
	return b == Name || b == Program
}

func isProgram(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// CheckBeside returns an error when exe is swarmd with no swarm front
// beside it: the agents' sessions run `swarm` from swarmd's directory
// (the supervisor puts it first on their PATH), and would find none, or
// another installation's.
func CheckBeside(exe string) error {
	if filepath.Base(exe) != Program || isProgram(filepath.Join(filepath.Dir(exe), Name)) {
		return nil
	}
	return fmt.Errorf("no %s beside %s in %s: the agents' sessions run '%s' from there; install it: go install github.com/swarmhq/swarm/cmd/swarm@latest (or make build, which writes bin/swarm and bin/swarmd)", Name, Program, filepath.Dir(exe), Name)
}
