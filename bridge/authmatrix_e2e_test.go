package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// The auth matrix (issue 5): every /v1/ route × {no token, agent,
// operator}, over real HTTP. The route list is not trusted to be complete:
// TestE2E_AuthMatrix first reads every route pattern registered anywhere in
// the module's source and fails when one is missing from the matrix (or
// the matrix lists one that no longer exists).

// routePatternRE matches a net/http pattern under /v1/, with or without a
// method.
var routePatternRE = regexp.MustCompile(`^(?:(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) )?/v1/\S*$`)

// registrars are the functions whose first argument is a route pattern.
var registrars = map[string]bool{"Mount": true, "mountOperator": true, "Handle": true, "HandleFunc": true}

// modulePath is this module's import path.
const modulePath = "github.com/robot-bridge/robot-bridge"

// bridgePackages returns the directories (relative to the module root) of
// the bridge package and every package of this module it imports,
// directly or not: the code whose routes a running bridge can serve. A
// package that registers routes but is not wired in yet is not among them;
// once it is, its routes must join the matrix.
func bridgePackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	queue := []string{"bridge"}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := os.ReadDir(filepath.Join(root, dir))
		require.NoError(t, err)
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, name), nil, parser.ImportsOnly)
			if err != nil {
				t.Logf("skip %s/%s: %v", dir, name, err)
				continue
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if rest, ok := strings.CutPrefix(p, modulePath+"/"); ok && !seen[rest] {
					queue = append(queue, rest)
				}
			}
		}
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// sourceRoutes returns every /v1/ route pattern registered in the
// non-test source of the bridge's packages (bridgePackages): string
// literals passed as the first argument of Mount, mountOperator, Handle or HandleFunc,
// and the elements (or keys) of a composite literal a for-range loop feeds
// to such a call. It maps each pattern to the files that register it.
func sourceRoutes(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	found := map[string][]string{}
	add := func(lit *ast.BasicLit, file string) {
		if lit == nil || lit.Kind != token.STRING {
			return
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !routePatternRE.MatchString(s) {
			return
		}
		if !slices.Contains(found[s], file) {
			found[s] = append(found[s], file)
		}
	}
	isRegistrar := func(n ast.Node) (*ast.CallExpr, bool) {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return nil, false
		}
		switch fn := call.Fun.(type) {
		case *ast.SelectorExpr:
			return call, registrars[fn.Sel.Name]
		case *ast.Ident:
			return call, registrars[fn.Name]
		}
		return nil, false
	}
	for _, dir := range bridgePackages(t, root) {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		require.NoError(t, err)
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			rel := filepath.Join(dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, rel), nil, parser.SkipObjectResolution)
			require.NoError(t, err, "parse %s", rel)
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := isRegistrar(n); ok {
					lit, _ := call.Args[0].(*ast.BasicLit)
					add(lit, rel)
				}
				rs, ok := n.(*ast.RangeStmt)
				if !ok {
					return true
				}
				cl, ok := rs.X.(*ast.CompositeLit)
				if !ok {
					return true
				}
				feeds := false
				ast.Inspect(rs.Body, func(m ast.Node) bool {
					if _, ok := isRegistrar(m); ok {
						feeds = true
					}
					return !feeds
				})
				if !feeds {
					return true
				}
				for _, el := range cl.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						el = kv.Key
					}
					lit, _ := el.(*ast.BasicLit)
					add(lit, rel)
				}
				return true
			})
		}
	}
	return found
}

// matrixFixture is the live state the matrix acts on: real requests, a
// real grant and the e-stop latch, so "the agent could not" is checked
// against something the agent would have changed.
type matrixFixture struct {
	task      string // a task awaiting approval
	approveID string // its approval request
	denyID    string // a second pending request
	grantID   string // an active scoped grant
}

// routeCase is one row of the matrix.
type routeCase struct {
	// pattern is the route as registered in source.
	pattern string
	method  string
	// path may hold {approve}, {deny}, {grant}, {task}, filled from the
	// fixture.
	path string
	body any
	// need is the least role that may use the route.
	need toolapi.Role
	// opWant is the operator's expected status (0: anything but 401/403).
	opWant int
	// agentCannot, for routes an agent must never use, checks afterwards
	// that the agent's refused attempt changed nothing.
	agentCannot func(t *testing.T, h *harness, fx *matrixFixture)
	// after runs once the operator's request succeeded.
	after func(t *testing.T, h *harness, fx *matrixFixture)
}

func approvalStatus(t *testing.T, h *harness, id string) string {
	t.Helper()
	a, err := h.b.Approvals().Get(id)
	require.NoError(t, err)
	return string(a.Status)
}

func stillPending(id func(*matrixFixture) string) func(*testing.T, *harness, *matrixFixture) {
	return func(t *testing.T, h *harness, fx *matrixFixture) {
		require.Equal(t, "pending", approvalStatus(t, h, id(fx)), "the agent's refused call changed the request")
	}
}

// matrix lists every /v1/ route. Order matters where routes act on the
// same state: requests are decided, the e-stop pressed then reset.
func matrix() []routeCase {
	grantBody := map[string]any{"scope": map[string]any{"tool": "move_arm_to", "poses": []string{"ready"}}, "ttl": "10m"}
	return []routeCase{
		// Tool API (agent).
		{pattern: "GET /v1/tools", method: "GET", path: "/v1/tools", need: toolapi.RoleAgent, opWant: 200},
		{pattern: "POST /v1/tools/{name}/call", method: "POST", path: "/v1/tools/get_robot_state/call", body: map[string]any{}, need: toolapi.RoleAgent, opWant: 200},
		{pattern: "POST /v1/tool_calls", method: "POST", path: "/v1/tool_calls", body: map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "get_robot_state", "arguments": "{}"}},
		}}, need: toolapi.RoleAgent, opWant: 200},
		{pattern: "GET /v1/tasks/{id}", method: "GET", path: "/v1/tasks/{task}", need: toolapi.RoleAgent, opWant: 200},
		{pattern: "POST /v1/tasks/{id}/cancel", method: "POST", path: "/v1/tasks/task-does-not-exist/cancel", need: toolapi.RoleAgent, opWant: 200},
		{pattern: "GET /v1/safety", method: "GET", path: "/v1/safety", need: toolapi.RoleAgent, opWant: 200},
		{pattern: "GET /v1/robots", method: "GET", path: "/v1/robots", need: toolapi.RoleAgent, opWant: 200},
		// The agent's own event stream (state and its own tasks).
		{pattern: "GET /v1/agent/events", method: "GET", path: "/v1/agent/events", need: toolapi.RoleAgent, opWant: 200},
		{pattern: "/v1/", method: "GET", path: "/v1/no-such-route", need: toolapi.RoleAgent, opWant: 404},

		// Approvals (operator only).
		{pattern: "GET /v1/approvals", method: "GET", path: "/v1/approvals?status=pending", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "GET /v1/approvals/{id}", method: "GET", path: "/v1/approvals/{approve}", need: toolapi.RoleOperator, opWant: 200},
		{
			pattern: "POST /v1/approvals/{id}/deny", method: "POST", path: "/v1/approvals/{deny}/deny", body: map[string]any{"reason": "matrix: denied"},
			need: toolapi.RoleOperator, opWant: 200,
			agentCannot: stillPending(func(fx *matrixFixture) string { return fx.denyID }),
			after: func(t *testing.T, h *harness, fx *matrixFixture) {
				require.Equal(t, "denied", approvalStatus(t, h, fx.denyID))
			},
		},
		{
			pattern: "POST /v1/approvals/{id}/approve", method: "POST", path: "/v1/approvals/{approve}/approve", body: map[string]any{},
			need: toolapi.RoleOperator, opWant: 200,
			agentCannot: stillPending(func(fx *matrixFixture) string { return fx.approveID }),
			after: func(t *testing.T, h *harness, fx *matrixFixture) {
				require.Equal(t, "approved", approvalStatus(t, h, fx.approveID))
				h.waitTask(fx.task, 20*time.Second)
			},
		},
		{pattern: "/v1/approvals", method: "PUT", path: "/v1/approvals", need: toolapi.RoleOperator, opWant: 405},
		{pattern: "/v1/approvals/", method: "GET", path: "/v1/approvals/a/b/c", need: toolapi.RoleOperator, opWant: 404},
		{pattern: "/v1/approvals/{id}", method: "PUT", path: "/v1/approvals/{approve}", need: toolapi.RoleOperator, opWant: 405},
		{pattern: "/v1/approvals/{id}/approve", method: "GET", path: "/v1/approvals/{approve}/approve", need: toolapi.RoleOperator, opWant: 405},
		{pattern: "/v1/approvals/{id}/deny", method: "GET", path: "/v1/approvals/{deny}/deny", need: toolapi.RoleOperator, opWant: 405},

		// Grants (operator only).
		{pattern: "GET /v1/grants", method: "GET", path: "/v1/grants", need: toolapi.RoleOperator, opWant: 200},
		{
			pattern: "POST /v1/grants", method: "POST", path: "/v1/grants", body: grantBody, need: toolapi.RoleOperator, opWant: 201,
			agentCannot: func(t *testing.T, h *harness, fx *matrixFixture) {
				require.Len(t, activeScoped(h), 1, "the agent's refused call made a grant")
			},
			after: func(t *testing.T, h *harness, fx *matrixFixture) { require.Len(t, activeScoped(h), 2) },
		},
		{
			pattern: "DELETE /v1/grants/{id}", method: "DELETE", path: "/v1/grants/{grant}", need: toolapi.RoleOperator, opWant: 200,
			agentCannot: func(t *testing.T, h *harness, fx *matrixFixture) {
				g, err := h.b.Approvals().Grant(fx.grantID)
				require.NoError(t, err)
				require.Equal(t, "active", string(g.Status), "the agent's refused call revoked the grant")
			},
			after: func(t *testing.T, h *harness, fx *matrixFixture) {
				g, err := h.b.Approvals().Grant(fx.grantID)
				require.NoError(t, err)
				require.Equal(t, "revoked", string(g.Status))
			},
		},
		{pattern: "/v1/grants", method: "PUT", path: "/v1/grants", need: toolapi.RoleOperator, opWant: 405},
		{pattern: "/v1/grants/", method: "GET", path: "/v1/grants/a/b", need: toolapi.RoleOperator, opWant: 404},
		{pattern: "/v1/grants/{id}", method: "GET", path: "/v1/grants/{grant}", need: toolapi.RoleOperator, opWant: 405},

		// E-stop: anyone authenticated presses it; only an operator resets
		// it or clears a fault.
		{
			pattern: "POST /v1/estop", method: "POST", path: "/v1/estop", body: map[string]any{"reason": "matrix"}, need: toolapi.RoleAgent, opWant: 200,
			after: func(t *testing.T, h *harness, fx *matrixFixture) {
				require.True(t, h.b.Supervisor().Status().EStop.Active)
			},
		},
		{
			pattern: "POST /v1/estop/reset", method: "POST", path: "/v1/estop/reset", need: toolapi.RoleOperator, opWant: 200,
			agentCannot: func(t *testing.T, h *harness, fx *matrixFixture) {
				require.True(t, h.b.Supervisor().Status().EStop.Active, "the agent's refused call reset the e-stop")
			},
			after: func(t *testing.T, h *harness, fx *matrixFixture) {
				require.False(t, h.b.Supervisor().Status().EStop.Active)
			},
		},
		// The cluster (operator only): a lone bridge says it is in none, and
		// has nothing to take over or release.
		{pattern: "GET /v1/cluster", method: "GET", path: "/v1/cluster", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "POST /v1/cluster/takeover", method: "POST", path: "/v1/cluster/takeover", body: map[string]any{"bridge": "a"}, need: toolapi.RoleOperator, opWant: 409},
		{pattern: "POST /v1/cluster/release", method: "POST", path: "/v1/cluster/release", body: map[string]any{"robot_id": "x"}, need: toolapi.RoleOperator, opWant: 409},
		// Escalations (operator only): the agent can neither read them nor
		// answer its own. No escalation has this id, so the operator's
		// answer is a 404 and changes nothing.
		{pattern: "GET /v1/escalations", method: "GET", path: "/v1/escalations", need: toolapi.RoleOperator, opWant: 200},
		{
			pattern: "POST /v1/escalations/{id}/answer", method: "POST", path: "/v1/escalations/esc_none/answer", body: map[string]any{"text": "matrix"},
			need: toolapi.RoleOperator, opWant: 404,
		},
		// No fault is latched here (clearing is then a no-op); the agent is
		// refused before the supervisor is asked.
		{pattern: "POST /v1/faults/clear", method: "POST", path: "/v1/faults/clear", need: toolapi.RoleOperator, opWant: 200},

		// Pause, resume and abort of a running task (operator only; issue
		// 14). The fixture's task awaits approval, so the operator's call
		// is refused as a conflict and changes nothing.
		{pattern: "POST /v1/tasks/{id}/pause", method: "POST", path: "/v1/tasks/{task}/pause", body: map[string]any{"reason": "matrix"}, need: toolapi.RoleOperator, opWant: 409},
		{pattern: "POST /v1/tasks/{id}/resume", method: "POST", path: "/v1/tasks/{task}/resume", need: toolapi.RoleOperator, opWant: 409},
		{pattern: "POST /v1/tasks/{id}/abort", method: "POST", path: "/v1/tasks/{task}/abort", need: toolapi.RoleOperator, opWant: 409},

		// Audit trail (operator only; issue 6).
		{pattern: "GET /v1/audit", method: "GET", path: "/v1/audit?limit=5", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "GET /v1/audit/export", method: "GET", path: "/v1/audit/export?type=task", need: toolapi.RoleOperator, opWant: 200},

		// Event stream (operator only).
		{pattern: "GET /v1/events", method: "GET", path: "/v1/events", need: toolapi.RoleOperator, opWant: 200},

		// Simulator fault injection (operator only).
		{pattern: "/v1/sim/", method: "GET", path: "/v1/sim/nope", need: toolapi.RoleOperator, opWant: 404},
		{pattern: "GET /v1/sim/faults", method: "GET", path: "/v1/sim/faults", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "POST /v1/sim/faults", method: "POST", path: "/v1/sim/faults", body: map[string]any{"kind": "no-such-fault"}, need: toolapi.RoleOperator, opWant: 400},
		{pattern: "DELETE /v1/sim/faults", method: "DELETE", path: "/v1/sim/faults", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "DELETE /v1/sim/faults/{id}", method: "DELETE", path: "/v1/sim/faults/nope", need: toolapi.RoleOperator, opWant: 404},
		{pattern: "GET /v1/sim/truth", method: "GET", path: "/v1/sim/truth", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "GET /v1/sim/log", method: "GET", path: "/v1/sim/log", need: toolapi.RoleOperator, opWant: 200},
		{pattern: "GET /v1/sim/trace", method: "GET", path: "/v1/sim/trace?since=0&limit=10", need: toolapi.RoleOperator, opWant: 200},
	}
}

func activeScoped(h *harness) []string {
	var ids []string
	for _, g := range h.b.Approvals().Grants() {
		if g.Kind == "scoped" && g.Status == "active" {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// send makes one request and returns its status and body; an event
// stream's body is not read (only its status matters here).
func send(t *testing.T, h *harness, method, path, token string, body any, hdr map[string]string, cookies ...*http.Cookie) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, "", resp.Header
	}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw), resp.Header
}

func TestE2E_AuthMatrix(t *testing.T) {
	h := startHarness(t, nil)

	// Every route registered in source is in the matrix, and nothing else.
	inSource := sourceRoutes(t)
	listed := map[string]bool{}
	for _, rc := range matrix() {
		require.False(t, listed[rc.pattern], "the matrix lists %q twice", rc.pattern)
		listed[rc.pattern] = true
	}
	var missing, stale []string
	for p, files := range inSource {
		if !listed[p] {
			missing = append(missing, fmt.Sprintf("%q (in %s)", p, strings.Join(files, ", ")))
		}
	}
	for p := range listed {
		if _, ok := inSource[p]; !ok {
			stale = append(stale, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	require.Empty(t, missing, "routes registered in source that the auth matrix does not cover; add them to matrix() with the role they need")
	require.Empty(t, stale, "the auth matrix lists routes no source registers any more")

	// Given live state to act on: a request to approve (its task), a
	// request to deny (the approval service takes requests directly; the
	// runner allows one live task), and a scoped grant.
	env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
	fx := &matrixFixture{task: taskID(t, env)}
	fx.approveID = h.pendingApproval(fx.task)
	denyReq, _, err := h.b.Approvals().Request(context.Background(), actionsApprovalRequest(h))
	require.NoError(t, err)
	fx.denyID = denyReq
	g, err := h.b.Approvals().CreateGrant(context.Background(), "operator", grantScope(), 10*time.Minute)
	require.NoError(t, err)
	fx.grantID = g.ID

	fill := func(p string) string {
		return strings.NewReplacer("{task}", fx.task, "{approve}", fx.approveID, "{deny}", fx.denyID, "{grant}", fx.grantID).Replace(p)
	}
	for _, rc := range matrix() {
		t.Run(rc.pattern, func(t *testing.T) {
			path := fill(rc.path)
			// No token: 401, and the response says nothing else.
			code, body, hdr := send(t, h, rc.method, path, "", rc.body, nil)
			require.Equal(t, http.StatusUnauthorized, code, "no token on %s %s: %s", rc.method, path, body)
			require.Contains(t, hdr.Get("WWW-Authenticate"), "Bearer")
			require.NotContains(t, body, "robot", "an unauthenticated caller learns nothing about the robot")

			// The agent.
			code, body, _ = send(t, h, rc.method, path, h.agent, rc.body, nil)
			if rc.need == toolapi.RoleOperator {
				require.Equal(t, http.StatusForbidden, code, "agent on %s %s: %s", rc.method, path, body)
				require.Contains(t, body, "PERMISSION_DENIED")
				if rc.agentCannot != nil {
					rc.agentCannot(t, h, fx)
				}
			} else {
				require.NotContains(t, []int{401, 403}, code, "agent on %s %s: %s", rc.method, path, body)
				require.Equal(t, rc.opWant, code, "agent on %s %s: %s", rc.method, path, body)
			}

			// The operator.
			code, body, _ = send(t, h, rc.method, path, h.operator, rc.body, nil)
			require.Equal(t, rc.opWant, code, "operator on %s %s: %s", rc.method, path, body)
			if rc.pattern != "/v1/" {
				require.NotContains(t, body, "see GET /v1/tools", "the route %q is not actually mounted", rc.pattern)
			}
			if rc.after != nil {
				rc.after(t, h, fx)
			}
		})
	}

	t.Run("public routes need no token", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			code, body, _ := send(t, h, "GET", p, "", nil, nil)
			require.Equal(t, http.StatusOK, code, "%s: %s", p, body)
		}
	})
	t.Run("MCP needs a token", func(t *testing.T) {
		code, _, _ := send(t, h, "POST", "/mcp", "", map[string]any{}, nil)
		require.Equal(t, http.StatusUnauthorized, code)
	})

	t.Run("console", func(t *testing.T) { consoleAuthMatrix(t, h) })
}

// consoleAuthMatrix: without a session every console API route is 401
// (bearer tokens, even the operator's, do not count); with a session but
// no CSRF token, or from another origin, every state-changing route is 403.
func consoleAuthMatrix(t *testing.T, h *harness) {
	routes := console.Routes()
	require.NotEmpty(t, routes)
	concrete := func(p string) (string, string) {
		method, path, _ := strings.Cut(p, " ")
		return method, strings.ReplaceAll(path, "{id}", "x")
	}

	// The page itself is public (it holds no data) and locked down.
	code, body, hdr := send(t, h, "GET", "/console/", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Emergency stop")
	require.Contains(t, hdr.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, "DENY", hdr.Get("X-Frame-Options"))

	for _, r := range routes {
		method, path := concrete(r)
		if path == "/console/" || (method == "POST" && path == "/console/api/session") {
			continue
		}
		for _, tok := range []string{"", h.agent, h.operator} {
			code, body, _ := send(t, h, method, path, tok, map[string]any{}, nil)
			require.Equal(t, http.StatusUnauthorized, code, "%s without a session (bearer %q): %s", r, tok, body)
		}
	}

	// Sign-in: the agent token is refused; cross-origin is refused.
	code, _, _ = send(t, h, "POST", "/console/api/session", "", map[string]any{"token": h.agent}, nil)
	require.Equal(t, http.StatusUnauthorized, code, "the agent token cannot open a console session")
	code, _, _ = send(t, h, "POST", "/console/api/session", "", map[string]any{"token": h.operator}, map[string]string{"Origin": "http://evil.example"})
	require.Equal(t, http.StatusForbidden, code)

	// A session.
	code, body, hdr = send(t, h, "POST", "/console/api/session", "", map[string]any{"token": h.operator}, map[string]string{"Origin": h.base})
	require.Equal(t, http.StatusOK, code, body)
	cookie := sessionCookieFrom(t, hdr)
	var sess struct {
		CSRF string `json:"csrf_token"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &sess))
	require.NotEmpty(t, sess.CSRF)

	for _, r := range routes {
		method, path := concrete(r)
		if method == "GET" || path == "/console/api/session" {
			continue
		}
		t.Run(r, func(t *testing.T) {
			code, body, _ := send(t, h, method, path, "", map[string]any{}, nil, cookie)
			require.Equal(t, http.StatusForbidden, code, "%s without CSRF: %s", r, body)
			code, body, _ = send(t, h, method, path, "", map[string]any{}, map[string]string{console.CSRFHeader: "wrong"}, cookie)
			require.Equal(t, http.StatusForbidden, code, "%s with a wrong CSRF token: %s", r, body)
			code, body, _ = send(t, h, method, path, "", map[string]any{},
				map[string]string{console.CSRFHeader: sess.CSRF, "Origin": "http://evil.example"}, cookie)
			require.Equal(t, http.StatusForbidden, code, "%s cross-origin: %s", r, body)
		})
	}
	// With the token, from this origin, the routes work: the console's
	// e-stop latches the supervisor and its reset clears it.
	guard := map[string]string{console.CSRFHeader: sess.CSRF, "Origin": h.base}
	code, body, _ = send(t, h, "POST", "/console/api/estop", "", map[string]any{"reason": "console matrix"}, guard, cookie)
	require.Equal(t, http.StatusOK, code, body)
	require.True(t, h.b.Supervisor().Status().EStop.Active)
	code, body, _ = send(t, h, "POST", "/console/api/estop/reset", "", nil, guard, cookie)
	require.Equal(t, http.StatusOK, code, body)
	require.False(t, h.b.Supervisor().Status().EStop.Active)
	code, body, _ = send(t, h, "GET", "/console/api/snapshot", "", nil, nil, cookie)
	require.Equal(t, http.StatusOK, code, body)
	// Sign-out ends the session.
	code, _, _ = send(t, h, "DELETE", "/console/api/session", "", nil, map[string]string{console.CSRFHeader: sess.CSRF}, cookie)
	require.Equal(t, http.StatusNoContent, code)
	code, _, _ = send(t, h, "GET", "/console/api/snapshot", "", nil, nil, cookie)
	require.Equal(t, http.StatusUnauthorized, code)
}

func sessionCookieFrom(t *testing.T, hdr http.Header) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == console.CookieName {
			require.True(t, c.HttpOnly, "HttpOnly")
			require.Equal(t, http.SameSiteStrictMode, c.SameSite, "SameSite=Strict")
			require.Equal(t, "/console/", c.Path)
			require.False(t, c.Secure, "plain HTTP here; Secure is set only over TLS")
			require.Positive(t, c.MaxAge)
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", console.CookieName, hdr)
	return nil
}

// actionsApprovalRequest is a request filed straight with the approval
// service: the runner allows one live task, and the matrix needs two
// pending requests.
func actionsApprovalRequest(h *harness) actions.ApprovalRequest {
	return actions.ApprovalRequest{
		TaskID: "task-matrix-deny", Tool: "move_arm_to", Arguments: map[string]any{"pose": "stowed"},
		RobotID: h.b.conf.Config.Robot.ID, Preview: "move the arm to stowed", RequestedBy: "agent",
	}
}

// grantScope is the scope of the fixture's grant: a pose no fixture
// request asks for, so it covers none of them.
func grantScope() approval.Scope {
	return approval.Scope{Tool: "move_arm_to", Poses: []string{"reach_table"}}
}
