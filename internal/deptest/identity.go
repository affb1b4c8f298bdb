package deptest

import (
	"fmt"
	"regexp"
	"strings"
)

// The caller is a fact the transport establishes (DESIGN §13): these rules
// read the production source, since no import shows them.
//   - no code reads who is asking from the environment: SWARM_AGENT,
//     SWARM_SESSION_ID and SWARM_SESSION_SEQ are set for a session's tools
//     and its scripts, never read as its identity;
//   - only the supervisor (the doors it opens, the engines' in-process
//     tools of a session) builds a session's identity.Caller.

// File is one production source file: its path relative to the module
// root and its text.
type File struct {
	Path string
	Src  string
}

var (
	readsIdentity = regexp.MustCompile(`Getenv\("SWARM_(AGENT|SESSION_ID|SESSION_SEQ)"\)`)
	buildsSession = regexp.MustCompile(`identity\.Session\(`)
)

// sessionBuilders may build a session's Caller: the supervisor's doors and
// sessions, and the bench, which stands in for a supervisor's door to
// measure `swarm mcp`.
var sessionBuilders = []string{"swarm/", "cmd/swarmbench/"}

// CheckIdentity returns every violation of the identity rules in files.
func CheckIdentity(files []File) []Violation {
	var out []Violation
	for _, f := range files {
		if strings.HasSuffix(f.Path, "_test.go") || !strings.HasSuffix(f.Path, ".go") {
			continue
		}
		for i, line := range strings.Split(f.Src, "\n") {
			at := fmt.Sprintf("%s:%d", f.Path, i+1)
			if m := readsIdentity.FindString(line); m != "" {
				out = append(out, Violation{Pkg: at, Import: m, Rule: "the caller comes from the door, never from a variable (DESIGN §13.2)"})
			}
			if buildsSession.MatchString(line) && !hasAnyPrefix(f.Path, sessionBuilders) {
				out = append(out, Violation{Pkg: at, Import: "identity.Session", Rule: "only the supervisor's doors build a session's caller (DESIGN §13.1)"})
			}
		}
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
