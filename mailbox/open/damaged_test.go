package open

import (
	"strings"
	"testing"
)

// The advice for a damaged store fits its backend: SQLite's recovers the
// file, PostgreSQL's points at a backup (and never at sqlite3).
func TestDamagedAdvice(t *testing.T) {
	if a := DamagedAdvice("/repo/.swarm/swarm.db"); !strings.Contains(a, "sqlite3 /repo/.swarm/swarm.db .recover") || !strings.Contains(a, "swarm doctor") {
		t.Errorf("SQLite advice = %q", a)
	}
	for _, url := range []string{"postgres://swarm@db/swarm", "postgresql://db/swarm"} {
		if a := DamagedAdvice(url); strings.Contains(a, "sqlite3") || !strings.Contains(a, "backup") || !strings.Contains(a, "swarm doctor") {
			t.Errorf("PostgreSQL advice for %s = %q", url, a)
		}
	}
}
