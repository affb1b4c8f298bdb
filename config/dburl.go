package config

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// CheckDatabaseURL accepts a PostgreSQL URL without a password: swarm.toml
// is committed and read by every agent, so the password comes from
// PGPASSWORD or ~/.pgpass. Its errors never repeat the password.
func CheckDatabaseURL(raw string) error {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return fmt.Errorf("database URL must be postgres://[user@]host[:port]/dbname[?sslmode=...] (leave it out to use .swarm/swarm.db)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("database URL does not parse: %v", strings.ReplaceAll(err.Error(), raw, "the URL"))
	}
	if _, ok := u.User.Password(); ok || u.Query().Has("password") {
		return fmt.Errorf("database URL carries a password: remove it, and put the password in PGPASSWORD or ~/.pgpass instead")
	}
	if strings.Trim(u.Path, "/") == "" && u.Query().Get("dbname") == "" {
		return fmt.Errorf("database URL %s names no database: add /dbname", raw)
	}
	return nil
}

// StarterWithURL returns the starter swarm.toml with [mailbox] url set:
// what `swarm init --db URL` writes. The URL must pass CheckDatabaseURL.
func StarterWithURL(dbURL string) []byte {
	const commented = "# [mailbox]\n"
	set := "[mailbox]\nurl = " + strconv.Quote(dbURL) + " # the password comes from PGPASSWORD or ~/.pgpass\n"
	return bytes.Replace(Starter(), []byte(commented), []byte(set), 1)
}
