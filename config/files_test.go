package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, text string, perm os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestEngineSecretFiles(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "secrets", "gemini.key"), "AIzaSy-test\n", 0o600)
	writeFile(t, filepath.Join(root, "secrets", "open.key"), "AIzaSy-test\n", 0o644)
	writeFile(t, filepath.Join(root, "secrets", "empty.key"), "", 0o600)
	writeFile(t, filepath.Join(root, "secrets", "claude.env"), "ANTHROPIC_API_KEY=sk-test\n", 0o600)
	writeFile(t, filepath.Join(root, "secrets", "bad.env"), "# ok\nANTHROPIC_API_KEY sk-secret\n", 0o600)
	if err := os.Symlink("/proc/self/environ", filepath.Join(root, "secrets", "environ")); err != nil {
		t.Fatal(err)
	}

	src := `[engine.gemini]
kind = "gemini"
api_key_file = "secrets/gemini.key"

[engine.claude]
kind = "exec"
preset = "claude"
env_file = "secrets/claude.env"

[[agent]]
name = "a"
`
	cfg, err := Parse([]byte(src), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := cfg.EngineFor(Agent{Settings: Settings{Engine: "gemini"}}, "")
	if want := filepath.Join(root, "secrets", "gemini.key"); g.APIKeyFile != want {
		t.Errorf("APIKeyFile = %q, want %q", g.APIKeyFile, want)
	}
	c := cfg.Engines["claude"]
	if want := filepath.Join(root, "secrets", "claude.env"); c.EnvFile != want {
		t.Errorf("EnvFile = %q, want %q", c.EnvFile, want)
	}
	key, err := ReadKeyFile(g.APIKeyFile)
	if err != nil || key != "AIzaSy-test" {
		t.Errorf("ReadKeyFile = %q, %v", key, err)
	}
	env, err := ReadEnvFile(c.EnvFile)
	if err != nil || !slices.Equal(env, []string{"ANTHROPIC_API_KEY=sk-test"}) {
		t.Errorf("ReadEnvFile = %q, %v", env, err)
	}

	for _, tt := range []struct{ table, want string }{
		{"kind = \"gemini\"\napi_key_file = \"secrets/open.key\"", "swarm.toml:3: api_key_file secrets/open.key: its group or others may open it (mode 0644); make it private: chmod 600 " + filepath.Join(root, "secrets", "open.key")},
		{"kind = \"gemini\"\napi_key_file = \"secrets/none.key\"", "swarm.toml:3: api_key_file secrets/none.key: no such file or directory"},
		{"kind = \"gemini\"\napi_key_file = \"secrets/empty.key\"", "swarm.toml:3: api_key_file secrets/empty.key: empty"},
		{"kind = \"gemini\"\napi_key_file = \"secrets\"", "swarm.toml:3: api_key_file secrets: not a regular file"},
		{"kind = \"gemini\"\napi_key_file = \"secrets/environ\"", "swarm.toml:3: api_key_file secrets/environ: links to /proc/"},
		{"kind = \"gemini\"\napi_key_file = \"\"", "swarm.toml:3: api_key_file : empty path"},
		{"kind = \"exec\"\npreset = \"claude\"\napi_key_file = \"secrets/gemini.key\"", "swarm.toml:4: api_key_file only applies to kind = \"gemini\""},
		{"kind = \"gemini\"\nenv_file = \"secrets/claude.env\"", "swarm.toml:3: env_file only applies to kind = \"exec\""},
		{"kind = \"exec\"\npreset = \"claude\"\nenv_file = \"secrets/open.key\"", "swarm.toml:4: env_file secrets/open.key: its group or others may open it"},
		{"kind = \"exec\"\npreset = \"claude\"\nenv_file = \"secrets/bad.env\"", "swarm.toml:4: env_file secrets/bad.env: line 2: expected NAME=value"},
		{"kind = \"exec\"\npreset = \"claude\"\nenv_file = \"/dev/null\"", "swarm.toml:4: env_file /dev/null: under /dev"},
	} {
		_, err := Parse([]byte("[engine.x]\n"+tt.table+"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", root)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n  %v\nwant %q", tt.table, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("the error shows a secret: %v", err)
		}
	}
}

func TestSecretFileUnderHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeFile(t, filepath.Join(home, ".config", "gemini.key"), "k\n", 0o400)
	cfg, err := Parse([]byte("[engine.g]\nkind = \"gemini\"\napi_key_file = \"~/.config/gemini.key\"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".config", "gemini.key"); cfg.Engines["g"].APIKeyFile != want {
		t.Errorf("APIKeyFile = %q, want %q", cfg.Engines["g"].APIKeyFile, want)
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		text string
		perm os.FileMode
		want string // the key, or a part of the error
		ok   bool
	}{
		{"  AIza-key \r\n\n", 0o600, "AIza-key", true},
		{"AIza-key", 0o400, "AIza-key", true},
		{"AIza-key\n", 0o640, "chmod 600", false},
		{"\n \n", 0o600, "empty; write the API key in it", false},
		{"GEMINI_API_KEY= AIza-key\n", 0o600, "holds more than the key", false},
		{strings.Repeat("k", maxKeyFile+1), 0o600, "more than 64 KiB", false},
	} {
		path := writeFile(t, filepath.Join(dir, "key"), tt.text, tt.perm)
		key, err := ReadKeyFile(path)
		switch {
		case tt.ok && (err != nil || key != tt.want):
			t.Errorf("ReadKeyFile(%q) = %q, %v", tt.text, key, err)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), path+": ")):
			t.Errorf("ReadKeyFile(%q) = %q, %v, want an error with %q", tt.text, key, err, tt.want)
		case !tt.ok && strings.Contains(err.Error(), "AIza"):
			t.Errorf("the error shows the key: %v", err)
		}
	}
	if _, err := ReadKeyFile("/proc/self/environ"); err == nil || !strings.Contains(err.Error(), "under /proc") {
		t.Errorf("ReadKeyFile(/proc/self/environ) = %v", err)
	}
}

func TestReadEnvFile(t *testing.T) {
	text := "# credentials for the claude CLI\n" +
		"\n" +
		"ANTHROPIC_API_KEY=sk-ant-1\n" +
		"export  GH_TOKEN = ghp_2  \n" +
		"SPACED=  a b  # a comment\n" +
		"HASH=a#b\n" +
		"DQ=\"x \\\"y\\\" \\n\\t\\\\ \\$HOME \\q # not a comment\"  # a comment\n" +
		"SQ='x \"y\" \\n $HOME'\n" +
		"EMPTY=\n" +
		"EMPTY_QUOTED=\"\"\n" +
		"EQ=a=b=c\r\n" +
		"exporter=1\n" +
		"ANTHROPIC_API_KEY=sk-ant-2\n" +
		"  # indented comment\n" +
		"LAST=no newline"
	path := writeFile(t, filepath.Join(t.TempDir(), ".env"), text, 0o600)
	got, err := ReadEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ANTHROPIC_API_KEY=sk-ant-2",
		"GH_TOKEN=ghp_2",
		"SPACED=a b",
		"HASH=a#b",
		"DQ=x \"y\" \n\t\\ $HOME \\q # not a comment",
		"SQ=x \"y\" \\n $HOME",
		"EMPTY=",
		"EMPTY_QUOTED=",
		"EQ=a=b=c",
		"exporter=1",
		"LAST=no newline",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ReadEnvFile =\n%q\nwant\n%q", got, want)
	}
}

func TestReadEnvFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ text, want string }{
		{"A=1\nsk-secret-line\n", ":2: expected NAME=value"},
		{"A=1\n\n1A=sk-secret\n", ":3: expected NAME=value, with a name of letters, digits and '_'"},
		{"MY KEY=sk-secret\n", ":1: expected NAME=value, with a name"},
		{"A=\"sk-secret\nmore\"\n", `:1: A: the value's " quote is not closed on its line`},
		{"A='sk-secret\n", `:1: A: the value's ' quote is not closed`},
		{"A=\"sk\" secret\n", ":1: A: text after the closing quote"},
		{"A=sk\x00secret\n", ":1: A: the value holds a NUL byte"},
		{"A=1\nB\nC=\"\n", ":2: expected NAME=value\n"},
	} {
		path := writeFile(t, filepath.Join(dir, ".env"), tt.text, 0o600)
		_, err := ReadEnvFile(path)
		if err == nil || !strings.Contains(err.Error(), path+tt.want) {
			t.Errorf("ReadEnvFile(%q) = %v, want %q", tt.text, err, path+tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows a value: %v", err)
		}
	}
	path := writeFile(t, filepath.Join(dir, ".env"), "A=1\n", 0o644)
	if _, err := ReadEnvFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a readable env file: %v", err)
	}
	if _, err := ReadEnvFile(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing env file read")
	}
}
