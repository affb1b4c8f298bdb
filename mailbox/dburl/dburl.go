// Package dburl names the database a swarm uses, without opening it or
// linking a driver: the environment's PostgreSQL URL, else swarm.toml's,
// else the SQLite file. The swarm front (internal/front) tells the
// supervisor which database a command would have written with it, so it
// must not link what mailbox/open does.
package dburl

import "net/url"

// EnvURL names the environment variable that chooses a PostgreSQL
// database over the configured one and over SQLite.
const EnvURL = "SWARM_DB_URL"

// Choose is the PostgreSQL URL in use: the environment's, else the
// configured one; empty means SQLite.
func Choose(getenv func(string) string, configURL string) string {
	if u := getenv(EnvURL); u != "" {
		return u
	}
	return configURL
}

// Name names the database: the redacted URL, or the SQLite file when
// rawURL is empty.
func Name(rawURL, path string) string {
	if rawURL != "" {
		return Redact(rawURL)
	}
	return path
}

// Redact is rawURL with any password replaced by xxxxx, for messages and
// logs.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
