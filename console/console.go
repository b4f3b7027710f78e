package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/events"
)

//go:embed static
var staticFS embed.FS

// Defaults of Conf.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultMaxSessions = 32
	DefaultHeartbeat   = 15 * time.Second
	DefaultAuditLimit  = 100
	// MaxAuditLimit caps ?limit= of GET /console/api/audit.
	MaxAuditLimit = 1000
	// maxSignInBody bounds the sign-in request body.
	maxSignInBody = 4 << 10
	// signInFailuresPerMinute bounds one client address's wrong-token
	// guesses; past it sign-in answers 429 to that address for the rest
	// of the minute.
	signInFailuresPerMinute = 10
)

// Conf configures the console.
type Conf struct {
	// OperatorToken is the credential the sign-in form must be given
	// (required). It is compared in constant time and never sent to the
	// page.
	OperatorToken string
	// Operator serves the bridge's /v1/ operator API (required). The
	// console forwards the page's calls to it as the operator, with the
	// path rewritten from /console/api/… to /v1/…; it must authorize such
	// a request as the operator (the bridge sets the operator credential
	// on it). Only the routes listed in forwardRoutes are ever forwarded.
	Operator http.Handler
	// Snapshot returns the current state for the page and for the hello
	// event that starts every stream (required). It must encode to JSON.
	Snapshot func(ctx context.Context) (any, error)
	// Bus is the event bus the streams read (required).
	Bus *events.Bus
	// Transform (optional) turns a bus event into the data clients see
	// (for example to add fields a payload hides from JSON). It defaults to
	// the event's Data unchanged.
	Transform func(events.Event) any
	// Audit (optional) returns the audit trail. It defaults to an
	// in-memory Ring attached to Bus.
	Audit AuditFunc
	// TrustedOrigins (optional) are extra origins (like
	// "https://robot.example.com") allowed to make state-changing console
	// requests, for a console served behind a reverse proxy whose Host
	// differs from the browser's. It defaults to none: same origin only.
	TrustedOrigins []string
	// SessionTTL (optional) is how long a sign-in lasts. It defaults to
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions (optional) bounds the live sessions; signing in past it
	// signs the oldest session out. It defaults to DefaultMaxSessions.
	MaxSessions int
	// Heartbeat (optional) is the interval of comment lines on an idle
	// event stream, which keep proxies from closing it. It defaults to
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// Clock (optional) defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) defaults to slog.Default(); the console adds
	// component=console.
	Logger *slog.Logger
}

// ConfError is a rejected Conf field.
type ConfError struct {
	Field  string
	Reason string
}

func (e *ConfError) Error() string { return "console: Conf." + e.Field + ": " + e.Reason }

// Console is the operator console's server side.
type Console struct {
	conf     Conf
	clock    clockwork.Clock
	log      *slog.Logger
	sessions *sessions
	static   http.Handler
	mux      *http.ServeMux
	streams  atomic.Int64

	srvMu   sync.Mutex
	srvDone map[*http.Server]chan struct{} // guarded by srvMu

	failMu sync.Mutex
	fails  map[string]*failWindow // guarded by failMu; by client address
}

// New validates conf, fills defaults and returns the console.
func New(conf Conf) (*Console, error) {
	switch {
	case len(conf.OperatorToken) < 16:
		return nil, &ConfError{"OperatorToken", "required, at least 16 characters"}
	case conf.Operator == nil:
		return nil, &ConfError{"Operator", "required: the /v1/ operator API handler the console forwards to"}
	case conf.Snapshot == nil:
		return nil, &ConfError{"Snapshot", "required"}
	case conf.Bus == nil:
		return nil, &ConfError{"Bus", "required"}
	case conf.SessionTTL < 0:
		return nil, &ConfError{"SessionTTL", fmt.Sprintf("must not be negative, got %s", conf.SessionTTL)}
	case conf.MaxSessions < 0:
		return nil, &ConfError{"MaxSessions", fmt.Sprintf("must not be negative, got %d", conf.MaxSessions)}
	case conf.Heartbeat < 0:
		return nil, &ConfError{"Heartbeat", fmt.Sprintf("must not be negative, got %s", conf.Heartbeat)}
	}
	if conf.SessionTTL == 0 {
		conf.SessionTTL = DefaultSessionTTL
	}
	if conf.MaxSessions == 0 {
		conf.MaxSessions = DefaultMaxSessions
	}
	if conf.Heartbeat == 0 {
		conf.Heartbeat = DefaultHeartbeat
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.Audit == nil {
		ring := NewRing(0)
		ring.Attach(conf.Bus)
		conf.Audit = ring.Recent
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: embedded files: %w", err)
	}
	c := &Console{
		conf:     conf,
		clock:    conf.Clock,
		log:      conf.Logger.With("component", "console"),
		sessions: newSessions(conf.Clock, conf.SessionTTL, conf.MaxSessions),
		static:   http.StripPrefix("/console/", http.FileServerFS(sub)),
		srvDone:  map[*http.Server]chan struct{}{},
		fails:    map[string]*failWindow{},
	}
	c.routes()
	return c, nil
}

// forwardRoutes are the console API routes that go to the /v1/ operator
// API unchanged but for the path prefix. Nothing else is forwarded.
var forwardRoutes = []string{
	"GET /console/api/approvals",
	"GET /console/api/approvals/{id}",
	"POST /console/api/approvals/{id}/approve",
	"POST /console/api/approvals/{id}/deny",
	"GET /console/api/grants",
	"POST /console/api/grants",
	"DELETE /console/api/grants/{id}",
	"POST /console/api/estop",
	"POST /console/api/estop/reset",
	"POST /console/api/faults/clear",
	"GET /console/api/safety",
	"POST /console/api/tasks/{id}/cancel",
	"POST /console/api/tasks/{id}/pause",
	"POST /console/api/tasks/{id}/resume",
	"POST /console/api/tasks/{id}/abort",
	"GET /console/api/escalations",
	"POST /console/api/escalations/{id}/answer",
	// Several bridges in front of one fleet: who holds which robot, and
	// the operator's takeover of a dead bridge's robots.
	"GET /console/api/cluster",
	"POST /console/api/cluster/takeover",
	"POST /console/api/cluster/release",
}

// Routes lists every console route with its method ("GET /console/", …),
// for route inventories such as the bridge's auth matrix test.
func Routes() []string {
	own := []string{
		"GET /console/",
		"GET /console/api/session",
		"POST /console/api/session",
		"DELETE /console/api/session",
		"GET /console/api/snapshot",
		"GET /console/api/events",
		"GET /console/api/audit",
	}
	return append(own, forwardRoutes...)
}

func (c *Console) routes() {
	c.mux = http.NewServeMux()
	c.mux.HandleFunc("GET /console/api/session", c.authed(c.getSession))
	c.mux.HandleFunc("POST /console/api/session", c.signIn)
	c.mux.HandleFunc("DELETE /console/api/session", c.authed(c.signOut))
	c.mux.HandleFunc("GET /console/api/snapshot", c.authed(c.snapshot))
	c.mux.HandleFunc("GET /console/api/events", c.authed(c.serveEvents))
	c.mux.HandleFunc("GET /console/api/audit", c.authed(c.audit))
	for _, p := range forwardRoutes {
		c.mux.HandleFunc(p, c.authed(c.forward))
	}
	notFound := c.authed(func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no console route %s %s", r.Method, r.URL.Path))
	})
	// One catch-all for the rest: "/console/api/" and "GET /console/" as
	// separate patterns would conflict in net/http's precedence rules.
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/console/api/"):
			notFound(w, r)
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			c.serveStatic(w, r)
		default:
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// Handler serves /console/ (the page) and /console/api/ (its data calls).
// Mount it without bearer-token authentication: the console authenticates
// by its session cookie.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		c.mux.ServeHTTP(w, r)
	})
}

// EventStream serves the event stream without a session check, for
// GET /v1/events behind the bridge's operator-token authentication.
func (c *Console) EventStream() http.Handler { return http.HandlerFunc(c.serveEvents) }

// Streams returns how many event streams are open.
func (c *Console) Streams() int { return int(c.streams.Load()) }

// Sessions returns how many console sessions are live.
func (c *Console) Sessions() int { return c.sessions.count() }

func (c *Console) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	c.static.ServeHTTP(w, r)
}

type sessionKey struct{}

// authed wraps h: the request must carry a live session (else 401), and a
// state-changing one must come from this origin and carry the session's
// CSRF token (else 403).
func (c *Console) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ss, ok := c.sessions.lookup(sessionID(r))
		if !ok {
			if sessionID(r) != "" {
				http.SetCookie(w, clearedCookie(r))
			}
			writeAPIError(w, http.StatusUnauthorized, "PERMISSION_DENIED", "sign in to the console first (POST /console/api/session with the operator token)")
			return
		}
		if stateChanging(r.Method) {
			if why := crossOrigin(r, c.conf.TrustedOrigins); why != "" {
				c.log.Warn("cross-origin console request refused", "method", r.Method, "path", r.URL.Path, "why", why)
				writeAPIError(w, http.StatusForbidden, "PERMISSION_DENIED", "cross-origin request refused: "+why)
				return
			}
			if !equalSecret(r.Header.Get(CSRFHeader), ss.csrf) {
				c.log.Warn("console request without a valid CSRF token refused", "method", r.Method, "path", r.URL.Path)
				writeAPIError(w, http.StatusForbidden, "PERMISSION_DENIED", "missing or wrong "+CSRFHeader+" header; reload the console")
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
	}
}

// sessionView is the body of the session routes.
type sessionView struct {
	Operator  string    `json:"operator"`
	CSRFToken string    `json:"csrf_token"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (c *Console) getSession(w http.ResponseWriter, r *http.Request) {
	ss := r.Context().Value(sessionKey{}).(*session)
	writeJSON(w, http.StatusOK, sessionView{Operator: "operator", CSRFToken: ss.csrf, ExpiresAt: ss.expires})
}

// signInBody is the body of POST /console/api/session.
type signInBody struct {
	Token string `json:"token"`
}

// ParseSignIn decodes a sign-in body strictly: one JSON object with a
// non-empty "token" string and nothing else.
func ParseSignIn(b []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var body signInBody
	if err := dec.Decode(&body); err != nil {
		return "", fmt.Errorf("the body must be {\"token\": \"<operator token>\"}: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("the body must be one JSON object with nothing after it")
	}
	if strings.TrimSpace(body.Token) == "" {
		return "", errors.New("token: required, the operator token")
	}
	return strings.TrimSpace(body.Token), nil
}

// signIn exchanges the operator token for a session. It is the one
// state-changing route without a session, so it carries no CSRF token;
// it must be same-origin JSON instead, which a cross-site form cannot
// send.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if why := crossOrigin(r, c.conf.TrustedOrigins); why != "" {
		writeAPIError(w, http.StatusForbidden, "PERMISSION_DENIED", "cross-origin sign-in refused: "+why)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeAPIError(w, http.StatusUnsupportedMediaType, "INVALID_PARAMS", "send the sign-in body as application/json")
		return
	}
	if c.signInLocked(r) {
		w.Header().Set("Retry-After", "60")
		writeAPIError(w, http.StatusTooManyRequests, "RATE_LIMITED", "too many wrong tokens in the last minute; wait a minute and try again")
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSignInBody))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "INVALID_PARAMS", fmt.Sprintf("the body could not be read (at most %d bytes)", maxSignInBody))
		return
	}
	tok, err := ParseSignIn(b)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "INVALID_PARAMS", err.Error())
		return
	}
	if !equalSecret(tok, c.conf.OperatorToken) {
		c.signInFailed(r)
		c.log.Warn("console sign-in with a wrong token", "remote", r.RemoteAddr)
		writeAPIError(w, http.StatusUnauthorized, "PERMISSION_DENIED", "that is not the operator token")
		return
	}
	if old := sessionID(r); old != "" {
		c.sessions.remove(old)
	}
	id, ss := c.sessions.create()
	http.SetCookie(w, sessionCookie(r, id, ss.expires, c.clock.Now()))
	c.log.Info("operator signed in to the console", "remote", r.RemoteAddr, "expires", ss.expires)
	writeJSON(w, http.StatusOK, sessionView{Operator: "operator", CSRFToken: ss.csrf, ExpiresAt: ss.expires})
}

// failWindow counts one client's wrong tokens in the current minute.
type failWindow struct {
	start time.Time
	n     int
}

// maxFailClients bounds the wrong-token table; past it, the oldest
// windows are forgotten first.
const maxFailClients = 1024

// clientKey is the client's address without the port: the unit sign-in
// failures are counted by, so one client guessing cannot lock another
// (the operator who needs the e-stop) out.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (c *Console) signInLocked(r *http.Request) bool {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	w, ok := c.fails[clientKey(r)]
	if !ok || c.clock.Since(w.start) >= time.Minute {
		return false
	}
	return w.n >= signInFailuresPerMinute
}

func (c *Console) signInFailed(r *http.Request) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	now := c.clock.Now()
	key := clientKey(r)
	w, ok := c.fails[key]
	if !ok || now.Sub(w.start) >= time.Minute {
		if len(c.fails) >= maxFailClients {
			for k, v := range c.fails {
				if now.Sub(v.start) >= time.Minute {
					delete(c.fails, k)
				}
			}
			for k := range c.fails {
				if len(c.fails) < maxFailClients {
					break
				}
				delete(c.fails, k)
			}
		}
		w = &failWindow{start: now}
		c.fails[key] = w
	}
	w.n++
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	c.sessions.remove(sessionID(r))
	http.SetCookie(w, clearedCookie(r))
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) snapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := c.conf.Snapshot(r.Context())
	if err != nil {
		writeAPIError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the current state could not be read: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	limit := DefaultAuditLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxAuditLimit {
			writeAPIError(w, http.StatusBadRequest, "INVALID_PARAMS", fmt.Sprintf("limit: %q is not an integer in [1, %d]", v, MaxAuditLimit))
			return
		}
		limit = n
	}
	entries, err := c.conf.Audit(r.Context(), limit)
	if err != nil {
		c.log.Error("audit trail unavailable", "err", err)
		writeAPIError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the audit trail could not be read")
		return
	}
	if entries == nil {
		entries = []AuditEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// forward hands the request to the /v1/ operator API with the path
// rewritten; the operator API decides, the console only relays.
func (c *Console) forward(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	rest := strings.TrimPrefix(r.URL.Path, "/console/api/")
	r2.URL.Path = "/v1/" + rest
	r2.URL.RawPath = ""
	r2.RequestURI = r2.URL.RequestURI()
	// The cookie and CSRF token are the console's; the operator API never
	// sees them.
	r2.Header.Del("Cookie")
	r2.Header.Del(CSRFHeader)
	r2.Header.Del("Authorization")
	if r.Method == http.MethodPost && r.Header.Get("Content-Type") == "" {
		r2.Header.Set("Content-Type", "application/json")
	}
	c.conf.Operator.ServeHTTP(w, r2)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"error":{"type":"INTERNAL","message":"could not encode the response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeAPIError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"ok": false, "error": map[string]any{"type": typ, "message": msg}})
}
