package main

import (
	"errors"
)

// errNoSupervisor is what commands that need a running supervisor say
// when there is none.
var errNoSupervisor = errors.New("no supervisor is running in this repository; start one with 'swarm up'")
