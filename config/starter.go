package config

import _ "embed"

//go:embed starter.toml
var starter []byte

// Starter returns the commented swarm.toml that `swarm init` writes.
func Starter() []byte { return append([]byte(nil), starter...) }
