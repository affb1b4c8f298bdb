package config

import "testing"

func TestSuggestAgentNames(t *testing.T) {
	cfg, err := Parse([]byte("[defaults]\nengine = \"script\"\n[[agent]]\nname = \"backend\"\n[[agent]]\nname = \"frontend\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for word, want := range map[string]string{
		"Backend": "backend", "backedn": "backend", "fronted": "frontend", "Operator": "operator", "oprator": "operator", "db": "",
	} {
		if got := Suggest(word, cfg.Recipients()); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
}
