package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/events"
)

const testToken = "operator-token-for-tests-0123456789"

// fakeOperator records the requests the console forwards and answers
// with a fixed body.
type fakeOperator struct {
	mu   sync.Mutex
	reqs []*http.Request
	// code and body answer every request (200, {"ok":true} by default).
	code int
	body string
}

func (f *fakeOperator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	code, body := f.code, f.body
	f.mu.Unlock()
	if code == 0 {
		code, body = http.StatusOK, `{"ok":true}`
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func (f *fakeOperator) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

var _ http.Handler = (*fakeOperator)(nil)

type fixture struct {
	t     *testing.T
	c     *Console
	op    *fakeOperator
	bus   *events.Bus
	clock *clockwork.FakeClock
}

func newFixture(t *testing.T, edit func(*Conf)) *fixture {
	t.Helper()
	f := &fixture{t: t, op: &fakeOperator{}, bus: events.New(16), clock: clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	conf := Conf{
		OperatorToken: testToken,
		Operator:      f.op,
		Snapshot: func(context.Context) (any, error) {
			return map[string]any{"robot": map[string]any{"id": "sim-1"}, "approvals": []any{}}, nil
		},
		Bus:    f.bus,
		Clock:  f.clock,
		Logger: slog.New(slog.DiscardHandler),
	}
	if edit != nil {
		edit(&conf)
	}
	c, err := New(conf)
	require.NoError(t, err)
	f.c = c
	return f
}

// serve runs one request through the console's handler.
func (f *fixture) serve(method, target string, body string, hdr map[string]string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
			continue
		}
		r.Header.Set(k, v)
	}
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	f.c.Handler().ServeHTTP(w, r)
	return w
}

// signIn opens a session and returns its cookie and CSRF token.
func (f *fixture) signIn() (*http.Cookie, string) {
	f.t.Helper()
	w := f.serve("POST", "/console/api/session", `{"token":"`+testToken+`"}`, nil)
	require.Equal(f.t, http.StatusOK, w.Code, w.Body.String())
	var v sessionView
	require.NoError(f.t, json.Unmarshal(w.Body.Bytes(), &v))
	for _, c := range w.Result().Cookies() {
		if c.Name == CookieName {
			return c, v.CSRFToken
		}
	}
	f.t.Fatal("no session cookie")
	return nil, ""
}

func errType(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return body.Error.Type
}
