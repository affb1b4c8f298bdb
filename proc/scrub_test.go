package proc

import (
	"slices"
	"testing"
)

func TestIsSecret(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		secret      bool
	}{
		// The names issue 14 found leaking.
		{"AWS_SECRET_ACCESS_KEY", "x", true},
		{"GITHUB_PAT", "ghp_x", true},
		{"OPENAI_KEY", "sk-x", true},
		{"DATABASE_URL", "postgres://app:hunter2@db.internal:5432/app", true},
		// The suffixes the old rule knew still count.
		{"GEMINI_API_KEY", "x", true},
		{"GITHUB_TOKEN", "x", true},
		{"STRIPE_SECRET", "x", true},
		{"DB_PASSWORD", "x", true},
		// Each word, anywhere in the name, in any case.
		{"SECRET_KEY_BASE", "x", true},
		{"token", "x", true},
		{"my_pass", "x", true},
		{"PAT", "x", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", "/home/u/sa.json", true},
		{"AZURE_CREDENTIAL", "x", true},
		{"NPM_CONFIG__AUTH", "x", true},
		{"DOCKER_AUTH_CONFIG", "{}", true},
		{"OPENAI_APIKEY", "x", true},
		{"MYSQL_PASSWD", "x", true},
		{"GPG_PASSPHRASE", "x", true},
		{"AWS_ACCESS_KEY_ID", "AKIA", true}, // harmless alone; [env] pass lets it through
		// Credentials in values.
		{"HTTPS_PROXY", "http://me:s3cret@proxy:3128", true},
		{"REDIS_URLS", "redis://cache:6379,redis://u:p@cache2:6379", true},
		{"DATABASE_URL", "postgres://app:p@ss@db/app", true}, // a raw @ in the password
		{"WEBHOOK", "https://hooks.example.com/x?token=abc", true},
		{"MAPS", "https://maps.example.com/api?v=3&api-key=abc", true},
		// Not credentials.
		{"SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1", false},
		{"KEYBOARD", "us", false},
		{"KEYTIMEOUT", "1", false},
		{"TOKENIZERS_PARALLELISM", "false", false},
		{"GIT_ASKPASS", "/usr/bin/ksshaskpass", false},
		{"PATH", "/usr/bin", false},
		{"GOPATH", "/home/u/go", false},
		{"LD_LIBRARY_PATH", "/lib", false},
		{"PWD", "/home/u", false},
		{"GIT_AUTHOR_NAME", "swarm/backend", false},
		{"XAUTHORITY", "/home/u/.Xauthority", false},
		{"SWARM_AGENT", "backend", false},
		{"DATABASE_URL", "postgres://app@db.internal:5432/app", false}, // no password
		{"DATABASE_URL", "postgres://app:@db/app", false},              // empty password
		{"REMOTE", "ssh://git@github.com:22/org/repo.git", false},
		{"API_BASE", "http://[::1]:8080/v1?model=x", false},
		{"NOTE", "see https://example.com/a:b@c", false}, // '@' in the path
		{"EMAIL", "me@example.com", false},
		{"TIME", "12:30@home", false}, // no scheme
	} {
		if got := IsSecret(tc.name, tc.value); got != tc.secret {
			t.Errorf("IsSecret(%q, %q) = %v, want %v", tc.name, tc.value, got, tc.secret)
		}
	}
}

func TestIsSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"AWS_SECRET_ACCESS_KEY": true, "GITHUB_PAT": true, "OPENAI_KEY": true, "Auth": true,
		"SSH_AUTH_SOCK": false, "KEYBOARD": false, "DATABASE_URL": false, "": false, "_": false,
	} {
		if got := IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestScrub(t *testing.T) {
	env := []string{
		"PATH=/bin",
		"AWS_SECRET_ACCESS_KEY=a",
		"GITHUB_PAT=b",
		"OPENAI_KEY=c",
		"DATABASE_URL=postgres://app:hunter2@db/app",
		"SSH_AUTH_SOCK=/tmp/agent",
		"KEYBOARD=us",
		"AWS_ACCESS_KEY_ID=AKIA",
		"NOEQUALS",
	}
	for _, tc := range []struct {
		pass []string
		want []string
	}{
		{nil, []string{"PATH=/bin", "SSH_AUTH_SOCK=/tmp/agent", "KEYBOARD=us", "NOEQUALS"}},
		// The allow list passes a name through whatever marked it: its
		// name or its value. It matches exactly, as the environment does.
		{
			[]string{"AWS_ACCESS_KEY_ID", "DATABASE_URL", "github_pat"},
			[]string{"PATH=/bin", "DATABASE_URL=postgres://app:hunter2@db/app", "SSH_AUTH_SOCK=/tmp/agent", "KEYBOARD=us", "AWS_ACCESS_KEY_ID=AKIA", "NOEQUALS"},
		},
	} {
		in := slices.Clone(env)
		if got := Scrub(in, tc.pass); !slices.Equal(got, tc.want) {
			t.Errorf("Scrub(pass %v) =\n  %q\nwant\n  %q", tc.pass, got, tc.want)
		}
		if !slices.Equal(in, env) {
			t.Fatal("Scrub modified its input")
		}
	}
}

func BenchmarkScrub(b *testing.B) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "GEMINI_API_KEY=x", "LANG=C.UTF-8",
		"DATABASE_URL=postgres://app:pw@db/app", "TERM=xterm-256color", "SSH_AUTH_SOCK=/tmp/a", "GOPATH=/home/u/go"}
	for b.Loop() {
		Scrub(env, nil)
	}
}
