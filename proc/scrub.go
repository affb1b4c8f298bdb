package proc

import (
	"slices"
	"strings"
)

// Credentials are recognised by whole words, not by suffix: the old rule
// (names ending in _API_KEY, _TOKEN, _SECRET, _PASSWORD) let
// AWS_SECRET_ACCESS_KEY, GITHUB_PAT, OPENAI_KEY and a DATABASE_URL with a
// password through to in-process bash and to the git hooks swarm runs.
//
// A name is split on '_' and compared word by word, case-insensitively, so
// KEYBOARD, TOKENIZERS_PARALLELISM, GIT_ASKPASS, GOPATH (PATH is not PAT)
// and GIT_AUTHOR_NAME (AUTHOR is not AUTH) stay, while SECRET_KEY_BASE,
// NPM_CONFIG__AUTH and GOOGLE_APPLICATION_CREDENTIALS go.
//
// Decisions, each a trade between a leaked key and a broken tool:
//   - The plurals and common spellings (SECRETS, TOKENS, KEYS, PASSWORDS,
//     PASSWD, PASSPHRASE, APIKEY, CREDS) count too: they name the same
//     things.
//   - PWD does not count, though DB_PWD is sometimes a password: PWD and
//     OLDPWD are the shell's working directory, which every tool reads.
//   - A few names carry a word but no secret and are needed by the tools
//     agents run; they are kept (notCredentials). SSH_AUTH_SOCK is a socket
//     path: without it git over ssh stops working, and the agent behind it
//     never hands out the key itself.
//   - Some harmless names go too, such as PASSWORD_STORE_DIR (a path) or
//     AWS_ACCESS_KEY_ID (useless without its secret). The allow list
//     ([env] pass) lets such a name through.
//   - A value is a credential when it holds a URL with a password
//     (scheme://user:pass@host) or a query parameter named like a
//     credential (?access_token=..., &key=...). A token used as the user
//     name alone (https://ghp_x@github.com) is not recognised: it cannot be
//     told from ssh://git@host; nor is a DSN without a scheme
//     (user:pass@tcp(host)/db). Name such variables in a credential word,
//     or keep them out of swarm's environment.
var secretWords = map[string]bool{
	"SECRET": true, "SECRETS": true,
	"KEY": true, "KEYS": true, "APIKEY": true,
	"TOKEN": true, "TOKENS": true,
	"PASS": true, "PASSWORD": true, "PASSWORDS": true, "PASSWD": true, "PASSPHRASE": true,
	"PAT":        true,
	"CREDENTIAL": true, "CREDENTIALS": true, "CREDS": true,
	"AUTH": true,
}

// notCredentials are names that hold a credential word but no credential.
var notCredentials = map[string]bool{
	"SSH_AUTH_SOCK": true,
}

// Scrub returns env without the variables that hold credentials (see
// IsSecret), except those whose names are in pass: the user's allow list,
// matched exactly (environment names are case-sensitive). env is not
// modified.
//
// Everything swarm runs itself (git and its hooks, bd, uname) and the
// commands a model chooses (the bash tool) get a scrubbed environment: none
// of them needs the swarm's keys, and an agent can influence what they run.
func Scrub(env, pass []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if IsSecret(k, v) && !slices.Contains(pass, k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// IsSecret reports whether the environment variable name=value holds a
// credential, by its name (IsSecretName) or by its value (a URL carrying a
// password or a credential parameter).
func IsSecret(name, value string) bool {
	if notCredentials[name] {
		return false
	}
	return IsSecretName(name) || hasURLCredential(value)
}

// IsSecretName reports whether an environment variable's name marks a
// credential: one of its '_'-separated words, in any case, is SECRET, KEY,
// TOKEN, PASS, PASSWORD, PAT, CREDENTIAL(S) or AUTH (or a plural or common
// spelling of one). SSH_AUTH_SOCK is not a credential.
func IsSecretName(name string) bool {
	if notCredentials[name] {
		return false
	}
	return hasSecretWord(name, '_')
}

func hasSecretWord(name string, sep byte) bool {
	for name != "" {
		word := name
		if i := strings.IndexByte(name, sep); i >= 0 {
			word, name = name[:i], name[i+1:]
		} else {
			name = ""
		}
		// Longest word in the list is 11 bytes: skip the upper-casing
		// allocation for anything longer.
		if word != "" && len(word) <= 11 && secretWords[strings.ToUpper(word)] {
			return true
		}
	}
	return false
}

// hasURLCredential reports whether v holds a URL with a password in its
// user info (scheme://user:pass@host) or a query parameter named like a
// credential (?token=..., &api_key=...). Every URL in v counts, so lists
// (redis://a,redis://u:p@b) are covered.
func hasURLCredential(v string) bool {
	for {
		i := strings.Index(v, "://")
		if i < 0 {
			return false
		}
		scheme := schemeBefore(v[:i])
		v = v[i+3:]
		if scheme == "" {
			continue
		}
		// The authority runs to the path, query or fragment. A password
		// may hold a raw '@' (p@ss), so the host starts after the last one.
		end := strings.IndexAny(v, "/?# \t\n\"'")
		authority := v
		if end >= 0 {
			authority = v[:end]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			if _, pass, ok := strings.Cut(authority[:at], ":"); ok && pass != "" {
				return true
			}
		}
		if queryHasCredential(v) {
			return true
		}
	}
}

// schemeBefore returns the URL scheme that ends s (ALPHA *( ALPHA / DIGIT /
// "+" / "-" / "." ), RFC 3986), or "" when s does not end in one.
func schemeBefore(s string) string {
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.' {
			i--
			continue
		}
		break
	}
	// The first character must be a letter.
	for i < len(s) && !('a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z') {
		i++
	}
	return s[i:]
}

// queryHasCredential looks at the query of the URL that starts v (after
// "://"), up to the fragment, whitespace or the next URL.
func queryHasCredential(v string) bool {
	end := strings.IndexAny(v, "# \t\n\"'")
	if end >= 0 {
		v = v[:end]
	}
	if next := strings.Index(v, "://"); next >= 0 {
		v = v[:next]
	}
	_, query, ok := strings.Cut(v, "?")
	if !ok {
		return false
	}
	for _, param := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(param, "=")
		if hasSecretWord(name, '_') || hasSecretWord(name, '-') {
			return true
		}
	}
	return false
}
