package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
)

// cookieName is the session cookie: HttpOnly, SameSite=Strict, this
// origin's only.
const cookieName = "swarm_desk"

// csrfField is the form field every POST carries.
const csrfField = "csrf"

// maxSessions bounds the logged-in browsers remembered; the oldest is
// forgotten first (it logs in again with the token).
const maxSessions = 64

// auth holds the login token and the browsers logged in with it, each with
// its CSRF token. Sessions live as long as the process: a restart asks for
// the token again.
type auth struct {
	token string
	mu    sync.Mutex
	csrf  map[string]string // session id -> its CSRF token
	order []string          // session ids, oldest first
}

func newAuth(token string) *auth { return &auth{token: token, csrf: map[string]string{}} }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("web: no randomness: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// tokenOK compares in constant time.
func (a *auth) tokenOK(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.token)) == 1
}

// login starts a session and returns its cookie.
func (a *auth) login() *http.Cookie {
	id := randomHex(24)
	a.mu.Lock()
	a.csrf[id] = randomHex(24)
	a.order = append(a.order, id)
	if len(a.order) > maxSessions {
		delete(a.csrf, a.order[0])
		a.order = a.order[1:]
	}
	a.mu.Unlock()
	return &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// who is the request's access: the session's CSRF token (sess), or bearer
// for the token in an Authorization header, which a browser never sends on
// its own and so needs no CSRF token.
type access struct {
	csrf   string
	bearer bool
}

func (a access) ok() bool { return a.bearer || a.csrf != "" }

func (a *auth) who(r *http.Request) access {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		if a.tokenOK(strings.TrimPrefix(h, "Bearer ")) {
			return access{bearer: true}
		}
		return access{}
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return access{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return access{csrf: a.csrf[c.Value]}
}

// csrfOK checks a POST's CSRF token against its session's.
func (acc access) csrfOK(r *http.Request) bool {
	if acc.bearer {
		return true
	}
	got := r.PostFormValue(csrfField)
	return acc.csrf != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(acc.csrf)) == 1
}

// sameOrigin refuses a POST a browser says came from elsewhere: a second
// wall behind SameSite=Strict and the CSRF token.
func sameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	o := r.Header.Get("Origin")
	return o == "" || o == "http://"+r.Host || o == "https://"+r.Host
}
