package approval

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/safety"
)

type httpFixture struct {
	*fixture
	h http.Handler
}

func newHTTPFixture(t *testing.T, mods ...func(*HTTPConf)) *httpFixture {
	t.Helper()
	return newHTTPFixtureOn(newFixture(t), mods...)
}

// newHTTPFixtureOn serves the operator API of an existing fixture.
func newHTTPFixtureOn(f *fixture, mods ...func(*HTTPConf)) *httpFixture {
	conf := HTTPConf{
		Principal: func(r *http.Request) string { return r.Header.Get("X-Test-Operator") },
		Logger:    slog.New(slog.DiscardHandler),
	}
	for _, m := range mods {
		m(&conf)
	}
	return &httpFixture{fixture: f, h: NewHTTPHandler(f.svc, conf)}
}

type response struct {
	code int
	hdr  http.Header
	body map[string]any
}

// do sends a request as operator alice with a JSON body (none if "").
func (f *httpFixture) do(t *testing.T, method, path, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("X-Test-Operator", "alice")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	return response{code: rec.Code, hdr: rec.Header(), body: m}
}

func (r response) errType() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

func (r response) errMsg() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

func (r response) obj(key string) map[string]any {
	m, _ := r.body[key].(map[string]any)
	return m
}

func TestHTTP_ListApprovals(t *testing.T) {
	// Given one pending and one denied request
	f := newHTTPFixture(t)
	pending, _ := f.request(t, "task-1", ToolMoveBase, moveBase(1, 2))
	denied, _ := f.request(t, "task-2", ToolRelease, nil)
	require.Equal(t, http.StatusOK, f.do(t, "POST", "/v1/approvals/"+denied+"/deny", `{"reason":"no"}`).code)

	// When the console lists the pending ones
	r := f.do(t, "GET", "/v1/approvals?status=pending", "")

	// Then it gets exactly the pending one, with the contract's fields
	require.Equal(t, http.StatusOK, r.code)
	list := r.body["approvals"].([]any)
	require.Len(t, list, 1)
	a := list[0].(map[string]any)
	for _, k := range []string{"id", "task_id", "tool", "arguments", "preview", "status", "requested_by", "created_at", "expires_at"} {
		require.Contains(t, a, k)
	}
	require.Equal(t, pending, a["id"])
	require.Equal(t, "task-1", a["task_id"])
	require.Equal(t, map[string]any{"x": 1.0, "y": 2.0}, a["arguments"])
	require.Equal(t, "pending", a["status"])
	require.Equal(t, "agent", a["requested_by"])
	require.Equal(t, "2026-03-01T12:00:00Z", a["created_at"])
	require.Equal(t, "2026-03-01T12:01:00Z", a["expires_at"])

	for _, tc := range []struct {
		name, query string
		want        int
	}{
		{"all", "", 2},
		{"denied", "?status=denied", 1},
		{"expired", "?status=expired", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, "GET", "/v1/approvals"+tc.query, "")
			require.Equal(t, http.StatusOK, r.code)
			require.Len(t, r.body["approvals"].([]any), tc.want)
		})
	}
	t.Run("unknown status", func(t *testing.T) {
		r := f.do(t, "GET", "/v1/approvals?status=maybe", "")
		require.Equal(t, http.StatusBadRequest, r.code)
		require.Equal(t, "INVALID_PARAMS", r.errType())
		require.Contains(t, r.errMsg(), `unknown status "maybe" (allowed: pending`)
	})
}

func TestHTTP_GetApproval(t *testing.T) {
	f := newHTTPFixture(t)
	id, _ := f.request(t, "task-1", ToolRelease, nil)

	r := f.do(t, "GET", "/v1/approvals/"+id, "")
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, id, r.obj("approval")["id"])

	r = f.do(t, "GET", "/v1/approvals/apr_nope", "")
	require.Equal(t, http.StatusNotFound, r.code)
	require.Equal(t, "NOT_FOUND", r.errType())
	require.Equal(t, `no approval with id "apr_nope".`, r.errMsg())
}

func TestHTTP_Approve(t *testing.T) {
	t.Run("empty body approves once", func(t *testing.T) {
		// Given a pending request
		f := newHTTPFixture(t)
		id, ch := f.request(t, "task-1", ToolRelease, nil)

		// When alice approves it with no body
		r := f.do(t, "POST", "/v1/approvals/"+id+"/approve", "")

		// Then it is approved by alice and the runner hears so
		require.Equal(t, http.StatusOK, r.code)
		a := r.obj("approval")
		require.Equal(t, "approved", a["status"])
		require.Equal(t, "alice", a["decided_by"])
		require.NotContains(t, r.body, "grant")
		d := decision(t, ch)
		require.True(t, d.Approved)
		require.Equal(t, "alice", d.By)

		// And approving again conflicts
		r = f.do(t, "POST", "/v1/approvals/"+id+"/approve", "")
		require.Equal(t, http.StatusConflict, r.code)
		require.Equal(t, "CONFLICT", r.errType())
		require.Contains(t, r.errMsg(), "is already approved by alice")
	})
	t.Run("with a scoped grant", func(t *testing.T) {
		f := newHTTPFixture(t)
		id, ch := f.request(t, "task-1", ToolMoveBase, moveBase(1, 1))

		r := f.do(t, "POST", "/v1/approvals/"+id+"/approve",
			`{"reason":"table area is clear","grant":{"scope":{"rect":{"min_x":0,"min_y":0,"max_x":2,"max_y":2}},"ttl":"10m"}}`)

		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Equal(t, "table area is clear", r.obj("approval")["reason"])
		g := r.obj("grant")
		require.Equal(t, "scoped", g["kind"])
		require.Equal(t, ToolMoveBase, g["tool"])
		require.Equal(t, "2026-03-01T12:10:00Z", g["expires_at"])
		require.True(t, decision(t, ch).Approved)
		require.Len(t, f.svc.Grants(), 2)
	})
	t.Run("unknown id", func(t *testing.T) {
		f := newHTTPFixture(t)
		r := f.do(t, "POST", "/v1/approvals/apr_nope/approve", "")
		require.Equal(t, http.StatusNotFound, r.code)
	})
	t.Run("expired", func(t *testing.T) {
		f := newHTTPFixture(t)
		id, _ := f.request(t, "task-1", ToolRelease, nil)
		f.clock.Advance(time.Minute)
		r := f.do(t, "POST", "/v1/approvals/"+id+"/approve", "")
		require.Equal(t, http.StatusConflict, r.code)
		require.Contains(t, r.errMsg(), "is already expired")
	})
}

func TestHTTP_ApproveBadBodies(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		hdr        []string
		code       int
		msg        string
	}{
		{"not json", `{"reason":`, nil, 400, "not valid JSON"},
		{"garbage", `approve!`, nil, 400, "not valid JSON"},
		{"array", `[]`, nil, 400, "must be a JSON object"},
		{"unknown field", `{"reason":"ok","force":true}`, nil, 400, `unknown field "force"`},
		{"unknown scope field", `{"grant":{"scope":{"tool":"release","speed":1},"ttl":"1m"}}`, nil, 400, `unknown field "speed"`},
		{"trailing data", `{"reason":"ok"} {}`, nil, 400, "nothing after it"},
		{"reason not a string", `{"reason":5}`, nil, 400, "reason: expected a string, got a JSON number"},
		{"ttl as number", `{"grant":{"ttl":600}}`, nil, 400, "grant.ttl: expected a string"},
		{"ttl missing", `{"grant":{}}`, nil, 400, "grant.ttl: required"},
		{"ttl not a duration", `{"grant":{"ttl":"ten minutes"}}`, nil, 400, `grant.ttl: "ten minutes" is not a duration`},
		{"ttl negative", `{"grant":{"ttl":"-1m"}}`, nil, 400, "grant.ttl: must be positive"},
		{"ttl too long", `{"grant":{"ttl":"2h"}}`, nil, 400, "grant.ttl: 2h is longer than this robot's max_grant_ttl"},
		{"unknown pose", `{"grant":{"scope":{"tool":"move_arm_to","poses":["wave"]},"ttl":"1m"}}`, nil, 400, `grant.scope.poses[0]: unknown pose "wave"`},
		{"region of pairs of three", `{"grant":{"scope":{"tool":"move_base_to","region":[[0,0,0],[1,0],[0,1]]},"ttl":"1m"}}`, nil, 400, "grant.scope.region[0]: a vertex is [x, y], got 3 numbers"},
		{"form post", `reason=ok`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "send the body as application/json"},
		{"text plain", `{}`, []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"too large", `{"reason":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}`, nil, 413, "larger than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a pending request
			f := newHTTPFixture(t)
			id, _ := f.request(t, "task-1", ToolRelease, nil)

			// When the approve body is bad
			r := f.do(t, "POST", "/v1/approvals/"+id+"/approve", tc.body, tc.hdr...)

			// Then it is refused, says why, and the request stays pending
			require.Equal(t, tc.code, r.code, r.body)
			require.Equal(t, "INVALID_PARAMS", r.errType())
			require.Contains(t, r.errMsg(), tc.msg)
			a, _ := f.svc.Get(id)
			require.Equal(t, StatusPending, a.Status)
		})
	}
}

func TestHTTP_Deny(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		code       int
		msg        string
	}{
		{"no body", ``, 400, "reason: required"},
		{"empty object", `{}`, 400, "reason: required"},
		{"null reason", `{"reason":null}`, 400, "reason: required"},
		{"blank reason", `{"reason":"   "}`, 400, "reason: required"},
		{"reason not a string", `{"reason":["no"]}`, 400, "reason: expected a string, got a JSON array"},
		{"unknown field", `{"reason":"no","why":"x"}`, 400, `unknown field "why"`},
		{"reason too long", `{"reason":"` + strings.Repeat("x", MaxReasonLen+1) + `"}`, 400, "reason: at most 2000 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHTTPFixture(t)
			id, _ := f.request(t, "task-1", ToolRelease, nil)
			r := f.do(t, "POST", "/v1/approvals/"+id+"/deny", tc.body)
			require.Equal(t, tc.code, r.code, r.body)
			require.Equal(t, "INVALID_PARAMS", r.errType())
			require.Contains(t, r.errMsg(), tc.msg)
		})
	}
	t.Run("reason reaches the agent verbatim", func(t *testing.T) {
		// Given a pending request
		f := newHTTPFixture(t)
		id, ch := f.request(t, "task-1", ToolRelease, nil)

		// When alice denies it with a reason
		r := f.do(t, "POST", "/v1/approvals/"+id+"/deny", `{"reason":" The cup is full — don't \"release\" it.\n"}`)

		// Then the decision carries it byte for byte
		require.Equal(t, http.StatusOK, r.code)
		want := " The cup is full — don't \"release\" it.\n"
		require.Equal(t, want, r.obj("approval")["reason"])
		require.Equal(t, "denied", r.obj("approval")["status"])
		d := decision(t, ch)
		require.Equal(t, want, d.Reason)
		require.Equal(t, "alice", d.By)

		// And denying again conflicts
		r = f.do(t, "POST", "/v1/approvals/"+id+"/deny", `{"reason":"again"}`)
		require.Equal(t, http.StatusConflict, r.code)
	})
	t.Run("unknown id", func(t *testing.T) {
		f := newHTTPFixture(t)
		require.Equal(t, http.StatusNotFound, f.do(t, "POST", "/v1/approvals/apr_nope/deny", `{"reason":"no"}`).code)
	})
}

func TestHTTP_Grants(t *testing.T) {
	// Given no grants
	f := newHTTPFixture(t)
	r := f.do(t, "GET", "/v1/grants", "")
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, []any{}, r.body["grants"])

	// When alice creates one
	r = f.do(t, "POST", "/v1/grants", `{"scope":{"tool":"move_arm_to","poses":["ready","stowed"]},"ttl":"15m"}`)

	// Then it is created, listed, and revocable once
	require.Equal(t, http.StatusCreated, r.code, r.body)
	g := r.obj("grant")
	id := g["id"].(string)
	require.Equal(t, "alice", g["created_by"])
	require.Equal(t, "active", g["status"])
	require.Equal(t, []any{"ready", "stowed"}, g["scope"].(map[string]any)["poses"])
	r = f.do(t, "GET", "/v1/grants", "")
	require.Len(t, r.body["grants"].([]any), 1)

	r = f.do(t, "DELETE", "/v1/grants/"+id, "", "X-Test-Operator", "bob")
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, "revoked", r.obj("grant")["status"])
	require.Equal(t, "bob", r.obj("grant")["revoked_by"])
	require.Equal(t, []any{}, f.do(t, "GET", "/v1/grants", "").body["grants"])

	r = f.do(t, "DELETE", "/v1/grants/"+id, "")
	require.Equal(t, http.StatusConflict, r.code)
	require.Contains(t, r.errMsg(), "already revoked by bob")
	require.Equal(t, http.StatusNotFound, f.do(t, "DELETE", "/v1/grants/grt_nope", "").code)
}

func TestHTTP_CreateGrantBadBodies(t *testing.T) {
	for _, tc := range []struct {
		name, body, msg string
	}{
		{"no body", ``, "a body is required"},
		{"no scope", `{"ttl":"1m"}`, "scope: required"},
		{"no ttl", `{"scope":{"tool":"release"}}`, "ttl: required"},
		{"no tool", `{"scope":{},"ttl":"1m"}`, "scope.tool: required"},
		{"unknown tool", `{"scope":{"tool":"fly"},"ttl":"1m"}`, `scope.tool: unknown tool "fly"`},
		{"base without region", `{"scope":{"tool":"move_base_to"},"ttl":"1m"}`, "scope.region: required for move_base_to"},
		{"rect field wrong type", `{"scope":{"tool":"move_base_to","rect":{"min_x":"0"}},"ttl":"1m"}`, "scope.rect.min_x: expected a number, got a JSON string"},
		{"ttl over max", `{"scope":{"tool":"release"},"ttl":"31m"}`, "ttl: 31m is longer"},
		{"unknown field", `{"scope":{"tool":"release"},"ttl":"1m","for":"ever"}`, `unknown field "for"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHTTPFixture(t)
			r := f.do(t, "POST", "/v1/grants", tc.body)
			require.Equal(t, http.StatusBadRequest, r.code, r.body)
			require.Equal(t, "INVALID_PARAMS", r.errType())
			require.Contains(t, r.errMsg(), tc.msg)
			require.Empty(t, f.svc.Grants())
		})
	}
}

func TestHTTP_UnknownRoutesAndMethods(t *testing.T) {
	f := newHTTPFixture(t)
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"PUT", "/v1/grants", 405, "GET, POST"},
		{"POST", "/v1/approvals", 405, "GET"},
		{"DELETE", "/v1/approvals/apr_1", 405, "GET"},
		{"GET", "/v1/approvals/apr_1/approve", 405, "POST"},
		{"GET", "/v1/approvals/apr_1/deny", 405, "POST"},
		{"GET", "/v1/grants/grt_1", 405, "DELETE"},
		{"GET", "/v1/estop", 404, ""},
		{"GET", "/v1/approvals/apr_1/expire", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := f.do(t, tc.method, tc.path, "")
			require.Equal(t, tc.code, r.code)
			require.NotEmpty(t, r.errMsg())
			require.Equal(t, tc.allow, r.hdr.Get("Allow"))
		})
	}
}

func TestHTTP_DecisionWithoutOperatorIdentityIsRefused(t *testing.T) {
	// Given a router that failed to identify the operator
	f := newHTTPFixture(t, func(c *HTTPConf) { c.Principal = func(*http.Request) string { return "" } })
	id, _ := f.request(t, "task-1", ToolRelease, nil)

	// When a decision arrives
	r := f.do(t, "POST", "/v1/approvals/"+id+"/approve", "")

	// Then nothing is decided without someone to hold to it
	require.Equal(t, http.StatusInternalServerError, r.code)
	require.Contains(t, r.errMsg(), "no operator identity")
	a, _ := f.svc.Get(id)
	require.Equal(t, StatusPending, a.Status)
}

// TestHTTP_DeleteGrantRevokesWithReasonAndEndsIt is the regression test
// for DELETE /v1/grants/{id} taking no reason and not reaching the
// supervisor: deleting a grant is revoking it, through the same path.
func TestHTTP_DeleteGrantRevokesWithReasonAndEndsIt(t *testing.T) {
	// Given a task moving on a scoped grant
	fx, ends := newEndFixture(t)
	f := newHTTPFixtureOn(fx)
	g, err := f.svc.CreateGrant(t.Context(), "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.NoError(t, err)
	u := f.use(g.ID, "task-1", ToolRelease, nil)
	require.NoError(t, f.svc.Authorize(u))

	// When bob deletes it, saying why
	r := f.do(t, "DELETE", "/v1/grants/"+g.ID, `{"reason":"the gripper is slipping"}`, "X-Test-Operator", "bob")

	// Then it is revoked with the reason, the supervisor's hook was told,
	// the task's next command is refused naming bob and the reason, and
	// the grant stays readable for the audit but is no longer listed
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, "revoked", r.obj("grant")["status"])
	require.Equal(t, "the gripper is slipping", r.obj("grant")["revoke_reason"])
	require.Equal(t, []GrantEnd{{GrantID: g.ID, RobotID: f.cfg.Robot.ID, By: "bob", Reason: "the gripper is slipping"}}, ends.all(t))
	err = f.svc.Authorize(u)
	require.ErrorIs(t, err, safety.ErrGrantRevoked)
	require.ErrorContains(t, err, "operator bob revoked the grant")
	require.ErrorContains(t, err, "their reason: the gripper is slipping")
	require.Equal(t, []any{}, f.do(t, "GET", "/v1/grants", "").body["grants"])
	kept, err := f.svc.Grant(g.ID)
	require.NoError(t, err)
	require.Equal(t, GrantRevoked, kept.Status)
}

func TestHTTP_DeleteGrantBadBodies(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		hdr        []string
		code       int
		msg        string
	}{
		{"reason not a string", `{"reason":5}`, nil, http.StatusBadRequest, "reason: expected a string"},
		{"unknown field", `{"why":"x"}`, nil, http.StatusBadRequest, `unknown field "why"`},
		{"reason too long", `{"reason":"` + strings.Repeat("x", MaxReasonLen+1) + `"}`, nil, http.StatusBadRequest, "reason: at most"},
		{"not JSON", `{"reason":"x"}`, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given an active grant
			fx, ends := newEndFixture(t)
			f := newHTTPFixtureOn(fx)
			g, err := f.svc.CreateGrant(t.Context(), "alice", Scope{Tool: ToolRelease}, time.Minute)
			require.NoError(t, err)

			// When it is deleted with a bad body
			r := f.do(t, "DELETE", "/v1/grants/"+g.ID, tc.body, tc.hdr...)

			// Then nothing changes
			require.Equal(t, tc.code, r.code, r.body)
			require.Contains(t, r.errMsg(), tc.msg)
			require.Len(t, f.svc.Grants(), 1)
			require.Empty(t, ends.all(t))
		})
	}
}
