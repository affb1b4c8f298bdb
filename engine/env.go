package engine

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/internal/front"
	"github.com/swarmhq/swarm/proc"
)

// FallbackEmail is used for agents' commits when git has no user.email, so a
// commit never fails for want of an identity.
const FallbackEmail = "swarm@localhost"

// SessionEnv returns base (usually os.Environ()) with the session's
// variables set:
//
//	SWARM_AGENT, SWARM_SESSION_ID, SWARM_SESSION_SEQ, SWARM_DB, SWARM_AGENTS,
//	SWARM_ROOT, SWARM_DOOR (when the session has a door), GIT_AUTHOR_NAME/GIT_COMMITTER_NAME = swarm/<agent>,
//	EMAIL = a fallback address when base has none, BD_ACTOR, and the
//	directory of the running swarm binary first on PATH.
//
// API keys stay in: exec agents need them. In-process tools get Scrub(env).
func SessionEnv(base []string, s *Session) []string {
	set := map[string]string{
		"SWARM_AGENT":        s.Agent,
		"SWARM_SESSION_ID":   s.ID,
		"SWARM_SESSION_SEQ":  fmt.Sprint(s.Seq),
		"SWARM_DB":           s.DB,
		"SWARM_AGENTS":       strings.Join(s.Agents, ","),
		"SWARM_ROOT":         s.Root,
		"GIT_AUTHOR_NAME":    "swarm/" + s.Agent,
		"GIT_COMMITTER_NAME": "swarm/" + s.Agent,
		"BD_ACTOR":           s.Agent,
	}
	if s.Door != "" {
		set["SWARM_DOOR"] = s.Door
	}
	if lookup(base, "EMAIL") == "" {
		// git prefers user.email from its config over $EMAIL, so this is
		// only a fallback: commits never fail for want of an address.
		set["EMAIL"] = FallbackEmail
	}
	path := lookup(base, "PATH")
	if exe, err := os.Executable(); err == nil && front.IsSwarm(exe) {
		path = filepath.Dir(exe) + string(os.PathListSeparator) + path
	}
	set["PATH"] = path
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := set[k]; override {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k])
	}
	return out
}

// Scrub removes credentials from env, except the names in pass (see
// proc.Scrub). In-process tools run model-chosen commands, and those must
// never see the swarm's keys unless the user let one through ([env] pass).
func Scrub(env, pass []string) []string { return proc.Scrub(env, pass) }

// IsSecretName reports whether an environment variable holds a credential.
func IsSecretName(k string) bool { return proc.IsSecretName(k) }

func lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
