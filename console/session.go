package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// CookieName is the console session cookie. Its value is a random session
// id; everything the session holds stays on the server.
const CookieName = "rb_console_session"

// CSRFHeader carries the session's CSRF token on every state-changing
// console request. A cross-site form or image request cannot set a custom
// header, and a cross-origin fetch that sets one needs a CORS preflight the
// console never grants.
const CSRFHeader = "X-CSRF-Token"

// cookiePath scopes the cookie to the console, so /v1/ requests (which
// authenticate with bearer tokens only) never carry it.
const cookiePath = "/console/"

// session is one signed-in operator tab. Values are immutable once made.
type session struct {
	key     [32]byte // sha256 of the id: the map key
	csrf    string
	created time.Time
	expires time.Time
}

// sessions is the server-side session table. The map is keyed by a hash
// of the id, so looking a session up does not compare the secret itself
// byte by byte.
type sessions struct {
	clock clockwork.Clock
	ttl   time.Duration
	max   int

	mu sync.Mutex
	m  map[[32]byte]*session // guarded by mu
}

func newSessions(clock clockwork.Clock, ttl time.Duration, maxSessions int) *sessions {
	return &sessions{clock: clock, ttl: ttl, max: maxSessions, m: map[[32]byte]*session{}}
}

// randomToken returns 32 random bytes, URL-safe base64 encoded.
func randomToken() string {
	b := make([]byte, 32)
	// crypto/rand.Read never returns an error (Go 1.24+).
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create makes a new session and returns its id (for the cookie) and the
// session. When the table is full the oldest session is signed out: a
// bounded table cannot be filled by repeated sign-ins.
func (s *sessions) create() (string, *session) {
	id := randomToken()
	now := s.clock.Now()
	ss := &session{key: sha256.Sum256([]byte(id)), csrf: randomToken(), created: now, expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	for len(s.m) >= s.max {
		var oldest *session
		for _, v := range s.m {
			if oldest == nil || v.created.Before(oldest.created) {
				oldest = v
			}
		}
		delete(s.m, oldest.key)
	}
	s.m[ss.key] = ss
	return id, ss
}

// lookup returns the live session with this id; an expired one is removed.
func (s *sessions) lookup(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	key := sha256.Sum256([]byte(id))
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[key]
	if !ok {
		return nil, false
	}
	if !now.Before(ss.expires) {
		delete(s.m, key)
		return nil, false
	}
	return ss, true
}

// remove signs a session out.
func (s *sessions) remove(id string) {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// count returns how many sessions are live.
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(s.clock.Now())
	return len(s.m)
}

func (s *sessions) pruneLocked(now time.Time) {
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
}

// sessionCookie is the cookie that carries a session id: HttpOnly so
// script never reads it, SameSite=Strict so no other site's page sends it,
// Path=/console/ so only the console sees it, Secure when the request came
// over TLS.
func sessionCookie(r *http.Request, id string, expires time.Time, now time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     CookieName,
		Value:    id,
		Path:     cookiePath,
		Expires:  expires.UTC(),
		MaxAge:   max(int(expires.Sub(now).Seconds()), 1),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	}
}

// clearedCookie deletes the session cookie in the browser.
func clearedCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: "", Path: cookiePath, MaxAge: -1,
		Expires: time.Unix(1, 0).UTC(), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// sessionID returns the session id the request's cookie carries.
func sessionID(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// equalSecret compares two secrets in constant time. Both are hashed first
// so that neither their contents nor their lengths show in the timing.
func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1 && a != "" && b != ""
}

// stateChanging reports whether a method can change something: every
// method other than the safe ones must carry the CSRF token.
func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// crossOrigin reports why a request comes from another origin, "" when it
// does not. A browser sends Origin on every cross-origin request and on
// same-origin POSTs; Sec-Fetch-Site is set by every current browser. A
// request with neither (curl, a test client) is judged by the CSRF token
// alone.
func crossOrigin(r *http.Request, trusted []string) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return "Sec-Fetch-Site is " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	if origin == "null" {
		return "Origin is null (a sandboxed or file page)"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return "Origin " + origin + " is not a valid origin"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host) {
		return ""
	}
	for _, t := range trusted {
		if strings.EqualFold(strings.TrimSuffix(t, "/"), origin) {
			return ""
		}
	}
	return "Origin " + origin + " is not this console's origin"
}
