package engine

import (
	"slices"
	"strings"
	"testing"
)

func TestSessionEnv(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/home/u", "SWARM_AGENT=stale", "GEMINI_API_KEY=sk-test"}
	s := &Session{Agent: "backend", ID: "7", Seq: 3, DB: "/r/.swarm/swarm.db", Root: "/r", Agents: []string{"backend", "frontend"}}
	env := SessionEnv(base, s)
	want := map[string]string{
		"SWARM_AGENT": "backend", "SWARM_SESSION_ID": "7", "SWARM_SESSION_SEQ": "3",
		"SWARM_DB": "/r/.swarm/swarm.db", "SWARM_AGENTS": "backend,frontend", "SWARM_ROOT": "/r",
		"GIT_AUTHOR_NAME": "swarm/backend", "GIT_COMMITTER_NAME": "swarm/backend", "BD_ACTOR": "backend",
		"EMAIL": FallbackEmail, "HOME": "/home/u", "GEMINI_API_KEY": "sk-test",
	}
	for k, v := range want {
		if got := lookup(env, k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "SWARM_AGENT=") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("SWARM_AGENT set %d times", n)
	}
	if !strings.HasSuffix(lookup(env, "PATH"), "/usr/bin") {
		t.Errorf("PATH = %q", lookup(env, "PATH"))
	}
	if got := lookup(SessionEnv([]string{"EMAIL=me@x"}, s), "EMAIL"); got != "me@x" {
		t.Errorf("EMAIL overridden: %q", got)
	}
}

func TestScrub(t *testing.T) {
	env := []string{"PATH=/bin", "GEMINI_API_KEY=a", "GOOGLE_API_KEY=b", "ANTHROPIC_API_KEY=c", "OPENAI_API_KEY=d",
		"MY_SERVICE_API_KEY=e", "GITHUB_TOKEN=f", "DB_PASSWORD=g", "AWS_SECRET=h", "TOKENIZER=ok", "SWARM_AGENT=a",
		"GITHUB_PAT=i"}
	got := Scrub(env, nil)
	if !slices.Equal(got, []string{"PATH=/bin", "TOKENIZER=ok", "SWARM_AGENT=a"}) {
		t.Fatalf("Scrub = %v", got)
	}
	got = Scrub(env, []string{"GITHUB_PAT"})
	if !slices.Equal(got, []string{"PATH=/bin", "TOKENIZER=ok", "SWARM_AGENT=a", "GITHUB_PAT=i"}) {
		t.Fatalf("Scrub with GITHUB_PAT passed = %v", got)
	}
}
