package console

import (
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/events"
)

func TestNew_RejectsBadConf(t *testing.T) {
	ok := func() Conf {
		return Conf{
			OperatorToken: testToken, Operator: &fakeOperator{}, Bus: events.New(1),
			Snapshot: func(context.Context) (any, error) { return nil, nil },
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Conf)
		field string
	}{
		{"short token", func(c *Conf) { c.OperatorToken = "short" }, "OperatorToken"},
		{"no operator API", func(c *Conf) { c.Operator = nil }, "Operator"},
		{"no snapshot", func(c *Conf) { c.Snapshot = nil }, "Snapshot"},
		{"no bus", func(c *Conf) { c.Bus = nil }, "Bus"},
		{"negative TTL", func(c *Conf) { c.SessionTTL = -time.Second }, "SessionTTL"},
		{"negative max sessions", func(c *Conf) { c.MaxSessions = -1 }, "MaxSessions"},
		{"negative heartbeat", func(c *Conf) { c.Heartbeat = -time.Second }, "Heartbeat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			_, err := New(c)
			var ce *ConfError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
			require.Contains(t, err.Error(), "Conf."+tc.field)
		})
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := New(ok())
		require.NoError(t, err)
		require.Equal(t, DefaultSessionTTL, c.conf.SessionTTL)
		require.Equal(t, DefaultMaxSessions, c.conf.MaxSessions)
		require.Equal(t, DefaultHeartbeat, c.conf.Heartbeat)
		require.NotNil(t, c.conf.Audit, "an in-memory ring stands in for the durable audit")
	})
}

func TestSignIn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		hdr      map[string]string
		wantCode int
		wantType string
	}{
		{"wrong token", `{"token":"not-the-operator-token"}`, nil, 401, "PERMISSION_DENIED"},
		{"empty token", `{"token":"  "}`, nil, 400, "INVALID_PARAMS"},
		{"unknown field", `{"token":"` + testToken + `","role":"operator"}`, nil, 400, "INVALID_PARAMS"},
		{"not JSON", `token=` + testToken, nil, 400, "INVALID_PARAMS"},
		{"form post", `token=x`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "INVALID_PARAMS"},
		{"cross-origin", `{"token":"` + testToken + `"}`, map[string]string{"Origin": "http://evil.example"}, 403, "PERMISSION_DENIED"},
		{"cross-site fetch", `{"token":"` + testToken + `"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "PERMISSION_DENIED"},
		{"null origin", `{"token":"` + testToken + `"}`, map[string]string{"Origin": "null"}, 403, "PERMISSION_DENIED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			w := f.serve("POST", "/console/api/session", tc.body, tc.hdr)
			require.Equal(t, tc.wantCode, w.Code, w.Body.String())
			require.Equal(t, tc.wantType, errType(t, w))
			require.Empty(t, w.Result().Cookies(), "no session on a failed sign-in")
			require.Zero(t, f.c.Sessions())
		})
	}

	t.Run("the operator token opens a session in a locked-down cookie", func(t *testing.T) {
		f := newFixture(t, nil)
		w := f.serve("POST", "/console/api/session", `{"token":"`+testToken+`"}`, map[string]string{"Origin": "http://example.com"})
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		c := w.Result().Cookies()[0]
		require.Equal(t, CookieName, c.Name)
		require.True(t, c.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, c.SameSite)
		require.Equal(t, "/console/", c.Path)
		require.False(t, c.Secure, "plain HTTP")
		require.Equal(t, int(DefaultSessionTTL.Seconds()), c.MaxAge)
		require.GreaterOrEqual(t, len(c.Value), 40, "a random id of 32 bytes")
		require.NotContains(t, w.Body.String(), testToken, "the token is never echoed")
		require.NotContains(t, c.Value, testToken)
		require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	})
	t.Run("over TLS the cookie is Secure", func(t *testing.T) {
		f := newFixture(t, nil)
		r := httptest.NewRequest("POST", "https://example.com/console/api/session", strings.NewReader(`{"token":"`+testToken+`"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Origin", "https://example.com")
		r.TLS = &tls.ConnectionState{}
		w := httptest.NewRecorder()
		f.c.Handler().ServeHTTP(w, r)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		require.True(t, w.Result().Cookies()[0].Secure)
	})
	t.Run("wrong tokens are rate limited per minute", func(t *testing.T) {
		f := newFixture(t, nil)
		for range signInFailuresPerMinute {
			require.Equal(t, 401, f.serve("POST", "/console/api/session", `{"token":"wrong-token-wrong-token"}`, nil).Code)
		}
		// Given the limit is reached, even the right token waits
		w := f.serve("POST", "/console/api/session", `{"token":"`+testToken+`"}`, nil)
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		// When the minute passes
		f.clock.Advance(time.Minute)
		// Then sign-in works again
		require.Equal(t, http.StatusOK, f.serve("POST", "/console/api/session", `{"token":"`+testToken+`"}`, nil).Code)
	})
	t.Run("one client guessing does not lock another out", func(t *testing.T) {
		f := newFixture(t, nil)
		for range signInFailuresPerMinute + 1 {
			r := httptest.NewRequest("POST", "/console/api/session", strings.NewReader(`{"token":"wrong-token-wrong-token"}`))
			r.Header.Set("Content-Type", "application/json")
			r.RemoteAddr = "10.0.0.66:4242"
			f.c.Handler().ServeHTTP(httptest.NewRecorder(), r)
		}
		// httptest requests come from 192.0.2.1.
		require.Equal(t, http.StatusOK, f.serve("POST", "/console/api/session", `{"token":"`+testToken+`"}`, nil).Code)
	})
}

func TestSession_ExpiresAndSignsOut(t *testing.T) {
	f := newFixture(t, func(c *Conf) { c.SessionTTL = time.Hour })
	cookie, _ := f.signIn()
	require.Equal(t, http.StatusOK, f.serve("GET", "/console/api/session", "", nil, cookie).Code)

	// When the TTL passes, the session is gone
	f.clock.Advance(time.Hour)
	w := f.serve("GET", "/console/api/snapshot", "", nil, cookie)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Equal(t, -1, w.Result().Cookies()[0].MaxAge, "the stale cookie is cleared")

	// And signing out ends a fresh one at once
	cookie, csrf := f.signIn()
	require.Equal(t, http.StatusNoContent, f.serve("DELETE", "/console/api/session", "", map[string]string{CSRFHeader: csrf}, cookie).Code)
	require.Equal(t, http.StatusUnauthorized, f.serve("GET", "/console/api/session", "", nil, cookie).Code)
}

func TestSession_TableIsBounded(t *testing.T) {
	f := newFixture(t, func(c *Conf) { c.MaxSessions = 3 })
	first, _ := f.signIn()
	for range 5 {
		f.clock.Advance(time.Second)
		f.signIn()
	}
	require.Equal(t, 3, f.c.Sessions())
	require.Equal(t, http.StatusUnauthorized, f.serve("GET", "/console/api/session", "", nil, first).Code, "the oldest session made room")
}

func TestAPI_NeedsSessionAndCSRF(t *testing.T) {
	f := newFixture(t, nil)
	cookie, csrf := f.signIn()
	for _, r := range Routes() {
		method, path, _ := strings.Cut(r, " ")
		path = strings.ReplaceAll(path, "{id}", "apr_1")
		if path == "/console/" || (method == "POST" && path == "/console/api/session") {
			continue
		}
		t.Run(r, func(t *testing.T) {
			// Without a session: 401, even with the operator's bearer token.
			w := f.serve(method, path, "{}", map[string]string{"Authorization": "Bearer " + testToken})
			require.Equal(t, http.StatusUnauthorized, w.Code, w.Body.String())
			if !stateChanging(method) {
				return
			}
			for _, tc := range []struct {
				name string
				hdr  map[string]string
			}{
				{"no CSRF token", nil},
				{"wrong CSRF token", map[string]string{CSRFHeader: "x" + csrf}},
				{"cross-origin", map[string]string{CSRFHeader: csrf, "Origin": "http://evil.example"}},
				{"same-site but another origin", map[string]string{CSRFHeader: csrf, "Sec-Fetch-Site": "same-site"}},
			} {
				w := f.serve(method, path, "{}", tc.hdr, cookie)
				require.Equal(t, http.StatusForbidden, w.Code, "%s: %s", tc.name, w.Body.String())
			}
		})
	}
	require.Empty(t, f.op.requests(), "nothing refused reached the operator API")
}

func TestForward_RewritesToV1AndStripsConsoleCredentials(t *testing.T) {
	f := newFixture(t, nil)
	cookie, csrf := f.signIn()
	for _, tc := range []struct {
		method, path, want string
	}{
		{"POST", "/console/api/approvals/apr_1/approve", "/v1/approvals/apr_1/approve"},
		{"POST", "/console/api/approvals/apr_1/deny", "/v1/approvals/apr_1/deny"},
		{"GET", "/console/api/approvals?status=pending", "/v1/approvals?status=pending"},
		{"DELETE", "/console/api/grants/grt_9", "/v1/grants/grt_9"},
		{"POST", "/console/api/estop", "/v1/estop"},
		{"POST", "/console/api/estop/reset", "/v1/estop/reset"},
		{"POST", "/console/api/faults/clear", "/v1/faults/clear"},
		{"POST", "/console/api/tasks/task-1/cancel", "/v1/tasks/task-1/cancel"},
		{"GET", "/console/api/safety", "/v1/safety"},
		{"GET", "/console/api/escalations", "/v1/escalations"},
		{"POST", "/console/api/escalations/esc_1/answer", "/v1/escalations/esc_1/answer"},
		{"GET", "/console/api/cluster", "/v1/cluster"},
		{"POST", "/console/api/cluster/takeover", "/v1/cluster/takeover"},
		{"POST", "/console/api/cluster/release", "/v1/cluster/release"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			n := len(f.op.requests())
			w := f.serve(tc.method, tc.path, `{"reason":"r"}`, map[string]string{CSRFHeader: csrf, "Origin": "http://example.com"}, cookie)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			reqs := f.op.requests()
			require.Len(t, reqs, n+1)
			r := reqs[n]
			require.Equal(t, tc.method, r.Method)
			require.Equal(t, tc.want, r.URL.RequestURI())
			require.Empty(t, r.Header.Get("Cookie"), "the session cookie stays in the console")
			require.Empty(t, r.Header.Get(CSRFHeader))
			require.Empty(t, r.Header.Get("Authorization"), "the bridge sets the credential, not the browser")
		})
	}
	t.Run("anything else is not forwarded", func(t *testing.T) {
		n := len(f.op.requests())
		for _, p := range []string{"/console/api/sim/faults", "/console/api/tools/move_base_to/call", "/console/api/approvals/a/b/c"} {
			w := f.serve("POST", p, "{}", map[string]string{CSRFHeader: csrf}, cookie)
			require.Equal(t, http.StatusNotFound, w.Code, p)
		}
		require.Len(t, f.op.requests(), n)
	})
}

func TestStatic_EmbeddedAndSelfContained(t *testing.T) {
	f := newFixture(t, nil)
	w := f.serve("GET", "/console/", "", nil)
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Header().Get("Content-Type"), "text/html")
	csp := w.Header().Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		require.Contains(t, csp, d)
	}
	require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	for _, want := range []string{`aria-label="E-STOP: Emergency stop"`, `aria-label="Pending approvals"`, `aria-label="Audit trail"`, `id="map"`} {
		require.Contains(t, w.Body.String(), want)
	}
	require.Equal(t, http.StatusOK, f.serve("GET", "/console/console.js", "", nil).Code)
	require.Equal(t, http.StatusOK, f.serve("GET", "/console/console.css", "", nil).Code)
	require.Equal(t, http.StatusNotFound, f.serve("GET", "/console/nope.js", "", nil).Code)
	require.Equal(t, http.StatusMethodNotAllowed, f.serve("POST", "/console/", "", nil).Code)

	// Nothing is fetched from elsewhere at run time: no absolute URLs but
	// the SVG namespace, no inline script or style (the CSP forbids them).
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(staticFS, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(path)
		if err != nil {
			return err
		}
		s := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
		if m := external.FindString(s); m != "" {
			return errors.New(path + " refers to " + m)
		}
		if strings.HasSuffix(path, ".html") {
			require.NotRegexp(t, `<script>|<script [^>]*>[^<]|<style|\sstyle="|\son[a-z]+="`, s, "%s: inline script or style", path)
		}
		return nil
	})
	require.NoError(t, err)
}

func TestAudit_Route(t *testing.T) {
	f := newFixture(t, nil)
	cookie, _ := f.signIn()
	f.bus.Publish(events.TypeSafety, f.clock.Now(), map[string]any{"kind": "estop_pressed", "by": "operator", "text": "e-stop pressed"})
	f.bus.Publish(events.TypeState, f.clock.Now(), "ignored")
	w := f.serve("GET", "/console/api/audit?limit=10", "", nil, cookie)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "e-stop pressed")
	require.NotContains(t, w.Body.String(), "ignored", "state snapshots are not audit entries")
	for _, bad := range []string{"0", "-1", "x", "100000"} {
		require.Equal(t, http.StatusBadRequest, f.serve("GET", "/console/api/audit?limit="+bad, "", nil, cookie).Code, bad)
	}
}
