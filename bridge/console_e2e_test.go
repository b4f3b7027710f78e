package bridge

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// These are issue 5's "done when" lines: the operator console driven in
// Debian's headless Chromium against a bridge on the simulator, with the
// agent's side over the real HTTP tool API.

// q quotes a string for a CSS attribute selector or a JavaScript literal.
func q(s string) string { return strconv.Quote(s) }

// signInConsole opens the console and signs in with the operator token,
// until the live stream is open and the robot is on the map.
func signInConsole(br *browser, h *harness) {
	br.t.Helper()
	br.run("sign in", 20*time.Second,
		chromedp.Navigate(h.base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), h.operator),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("estop")),
	)
	br.poll("live stream open", `document.getElementById('app').dataset.live === 'open' && !!document.getElementById('robot-marker')`, 10*time.Second)
}

func TestE2E_ConsoleInBrowser(t *testing.T) {
	h := startHarness(t, nil)
	br := startBrowser(t)

	// --- Sign in ---
	signInConsole(br, h)
	br.shot("signed-in")
	// The simulator has an e-stop of its own, and the header names it.
	br.poll("the e-stop note", `document.getElementById('app').dataset.hardwareEstop === 'yes'`, 10*time.Second)
	require.Equal(t, "Hardware e-stop: the simulator's e-stop.", evalJS[string](br, `document.getElementById('estop-source').textContent`))
	// The token is not kept anywhere script can read, and the session
	// cookie is HttpOnly.
	require.False(t, evalJS[bool](br, `document.documentElement.outerHTML.includes(`+q(h.operator)+`)`), "the page must not hold the operator token")
	require.NotContains(t, evalJS[string](br, `document.cookie`), "rb_console_session", "the session cookie must be HttpOnly")
	startX := evalJS[float64](br, `parseFloat(document.getElementById('robot-marker').dataset.x)`)
	startY := evalJS[float64](br, `parseFloat(document.getElementById('robot-marker').dataset.y)`)

	// --- An agent's action call appears live ---
	env := h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 0.5}, "session_id", "console-e2e"))
	moveID := taskID(t, env)
	require.Equal(t, "awaiting_approval", env["task"].(map[string]any)["status"], "%v", env)
	item := `#queue li[data-task-id=` + q(moveID) + `]`
	br.run("request appears", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(item)))
	br.poll("target on the map", `!!document.querySelector('#layer-targets .target-marker')`, 5*time.Second)
	br.shot("request-pending")
	target := evalJS[[]float64](br, `(() => { const m = document.querySelector('#layer-targets .target-marker'); return [parseFloat(m.dataset.x), parseFloat(m.dataset.y)]; })()`)
	require.InDelta(t, 1.0, target[0], 1e-6, "the map marks the pending motion's target")
	require.InDelta(t, 0.5, target[1], 1e-6)

	// --- Enter opens a confirmation that starts on Cancel: a second Enter
	// cancels, so a double press never approves ---
	br.run("enter opens the confirmation", 5*time.Second,
		chromedp.Focus(chromedp.CSS(item)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
	)
	require.Equal(t, "confirm-cancel", evalJS[string](br, `document.activeElement.id`), "the confirmation starts on Cancel")
	br.run("second enter cancels", 5*time.Second,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitNotPresent(chromedp.CSS(`#confirm-dialog[open]`)),
	)
	code, body := h.do("GET", "/v1/approvals?status=pending", h.operator, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, fmt.Sprint(body["approvals"]), moveID, "Enter twice must not approve")
	require.Equal(t, "awaiting_approval", taskData(h.call("get_task", args(map[string]any{"task_id": moveID})))["status"])

	// Record every status the task row shows, to see the progress live.
	evalJS[bool](br, `(() => {
		window.__statuses = new Set();
		const seen = () => document.querySelectorAll('#tasks li[data-task-id=`+q(moveID)+`]').forEach(li => window.__statuses.add(li.dataset.status));
		new MutationObserver(seen).observe(document.getElementById('tasks'), {subtree: true, childList: true, attributes: true});
		seen();
		return true;
	})()`)

	// --- Approve: Enter, then the explicit confirm button ---
	br.run("approve with confirmation", 10*time.Second,
		chromedp.Focus(chromedp.CSS(item)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
	)
	br.shot("confirm-approve")
	br.run("confirm", 10*time.Second,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(item)),
	)
	task := `#tasks li[data-task-id=` + q(moveID) + `]`
	br.run("task succeeds", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(task+`[data-status="succeeded"]`)))
	statuses := evalJS[[]string](br, `Array.from(window.__statuses)`)
	require.Contains(t, statuses, "executing", "the task's progress showed live: %v", statuses)
	require.Equal(t, "succeeded", taskData(h.waitTask(moveID, 10*time.Second))["status"])
	// The robot marker moved to where the simulator says the robot is.
	br.poll("robot marker moved", `(() => { const m = document.getElementById('robot-marker');
		return Math.abs(parseFloat(m.dataset.x) - 1.0) < 0.1 && Math.abs(parseFloat(m.dataset.y) - 0.5) < 0.1; })()`, 5*time.Second)
	br.shot("moved")
	truth := h.sim.Truth().Base
	markerX := evalJS[float64](br, `parseFloat(document.getElementById('robot-marker').dataset.x)`)
	markerY := evalJS[float64](br, `parseFloat(document.getElementById('robot-marker').dataset.y)`)
	require.Greater(t, math.Hypot(markerX-startX, markerY-startY), 0.9, "the marker moved on the map")
	require.InDelta(t, truth.X, markerX, 0.1)
	require.InDelta(t, truth.Y, markerY, 0.1)

	// --- Deny with a reason; the agent's envelope carries it verbatim ---
	const reason = `Someone is standing next to the arm; wait for "all clear"`
	env = h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "session_id", "console-e2e"))
	denyID := taskID(t, env)
	denyItem := `#queue li[data-task-id=` + q(denyID) + `]`
	br.run("deny dialog", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(denyItem)),
		chromedp.Click(chromedp.CSS(denyItem+` button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`#deny-dialog[open]`)),
	)
	require.True(t, evalJS[bool](br, `document.getElementById('deny-ok').disabled`), "no denial without a reason")
	br.run("deny", 10*time.Second,
		chromedp.SendKeys(chromedp.ID("deny-reason"), reason),
		chromedp.Click(chromedp.ID("deny-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(denyItem)),
	)
	br.shot("denied")
	done := taskData(h.waitTask(denyID, 10*time.Second))
	require.Equal(t, "denied", done["status"])
	e := done["error"].(map[string]any)
	require.Equal(t, "APPROVAL_DENIED", e["type"])
	require.Equal(t, reason, e["details"].(map[string]any)["reason"], "the reason reaches the agent verbatim")
	require.Contains(t, e["message"], `Someone is standing next to the arm`)
	// The audit trail shows the decision and its reason.
	br.poll("audit shows the denial", `document.getElementById('audit').textContent.includes(`+q(reason)+`)`, 5*time.Second)

	// --- Grant for minutes from a request, then revoke from the console ---
	env = h.call("move_arm_to", args(map[string]any{"pose": "stowed"}, "session_id", "console-e2e"))
	grantTask := taskID(t, env)
	grantItem := `#queue li[data-task-id=` + q(grantTask) + `]`
	br.run("grant dialog", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(grantItem)),
		chromedp.Click(chromedp.CSS(grantItem+` button[aria-label^="Approve and grant"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#grant-dialog[open]`)),
	)
	require.Equal(t, "stowed", evalJS[string](br, `document.getElementById('grant-list').value`), "the grant's bounds start from the request")
	br.shot("grant-dialog")
	br.run("grant", 10*time.Second,
		chromedp.Click(chromedp.ID("grant-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(grantItem)),
		chromedp.WaitVisible(chromedp.CSS(`#grants li[data-kind="scoped"]`)),
	)
	require.Equal(t, "succeeded", taskData(h.waitTask(grantTask, 20*time.Second))["status"])
	// Inside the grant the next call needs no operator.
	env = h.call("move_arm_to", args(map[string]any{"pose": "stowed"}, "session_id", "console-e2e"))
	covered := taskID(t, env)
	require.Equal(t, "succeeded", taskData(h.waitTask(covered, 20*time.Second))["status"], "covered by the grant, nobody approved it")
	a := approvalOfTask(t, h, covered)
	require.Equal(t, "approved", a["status"])
	require.Contains(t, a["reason"], "covered by scoped grant")
	// Revoked from the console, the very next call waits for an operator.
	br.run("revoke", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#grants li[data-kind="scoped"] button`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#grants li[data-kind="scoped"]`)),
	)
	env = h.call("move_arm_to", args(map[string]any{"pose": "stowed"}, "session_id", "console-e2e"))
	afterRevoke := taskID(t, env)
	h.pendingApproval(afterRevoke) // a revoked grant authorizes nothing

	// --- Cancel a task from the console ---
	cancelBtn := `#tasks li[data-task-id=` + q(afterRevoke) + `] button`
	br.run("cancel task", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(cancelBtn)),
		chromedp.Click(chromedp.CSS(cancelBtn)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks li[data-task-id=`+q(afterRevoke)+`][data-status="cancelled"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#queue li[data-task-id=`+q(afterRevoke)+`]`)),
	)

	// --- E-stop: motion refused until reset from the console ---
	br.run("press e-stop", 10*time.Second, chromedp.Click(chromedp.ID("estop")))
	br.poll("e-stop latched", `document.getElementById('app').dataset.estop === 'latched' && !document.getElementById('safety-banner').hidden`, 5*time.Second)
	br.shot("estop")
	require.True(t, h.b.Supervisor().Status().EStop.Active)
	requireError(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "session_id", "console-e2e")), "ESTOP_ACTIVE", false)
	br.run("reset e-stop", 10*time.Second,
		chromedp.Click(chromedp.ID("estop-reset")),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
		chromedp.Click(chromedp.ID("confirm-ok")),
	)
	br.poll("e-stop clear", `document.getElementById('app').dataset.estop === 'clear' && document.getElementById('safety-banner').hidden`, 5*time.Second)
	br.shot("reset")
	require.False(t, h.b.Supervisor().Status().EStop.Active)
	env = h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "session_id", "console-e2e"))
	require.Empty(t, errType(env), "motion is accepted again after the reset: %v", env)
	h.call("cancel_task", args(map[string]any{"task_id": taskID(t, env)}))

	// --- Tablet width: e-stop still in view, nothing wider than the screen ---
	br.run("tablet width", 10*time.Second, chromedp.EmulateViewport(768, 1024))
	br.poll("tablet layout", `(() => { const r = document.getElementById('estop').getBoundingClientRect();
		return r.width >= 80 && r.right <= innerWidth && r.bottom <= innerHeight && document.documentElement.scrollWidth <= innerWidth; })()`, 5*time.Second)
	br.shot("tablet")
}

// TestE2E_ConsoleStaleCloseDoesNotAnswerNextConfirmation is the
// regression test of a bug the browser test caught under load: the
// confirmation took its answer from the dialog's close event, which the
// browser queues; a cancelled confirmation's close, delivered after Enter
// had opened the next one, answered that one "no", so the operator's
// confirm press then did nothing. The answer now comes from the button.
func TestE2E_ConsoleStaleCloseDoesNotAnswerNextConfirmation(t *testing.T) {
	h := startHarness(t, nil)
	br := startBrowser(t)
	signInConsole(br, h)
	id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
	item := `#queue li[data-task-id=` + q(id) + `]`
	// Given an open confirmation
	br.run("open confirmation", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(item)),
		chromedp.Focus(chromedp.CSS(item)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
	)
	// When a stale close event arrives while it is open
	evalJS[bool](br, `document.getElementById('confirm-dialog').dispatchEvent(new Event('close')) || true`)
	// Then it is still open, and confirming approves
	require.True(t, evalJS[bool](br, `document.getElementById('confirm-dialog').open`))
	br.run("confirm", 10*time.Second,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(item)),
	)
	require.Equal(t, "approved", approvalOfTask(t, h, id)["status"])
	h.waitTask(id, 20*time.Second)
}

// approvalOfTask returns the approval request of a task, in any status.
func approvalOfTask(t *testing.T, h *harness, task string) map[string]any {
	t.Helper()
	code, body := h.do("GET", "/v1/approvals", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	for _, a := range body["approvals"].([]any) {
		if m := a.(map[string]any); m["task_id"] == task {
			return m
		}
	}
	t.Fatalf("no approval request for task %s", task)
	return nil
}

// TestE2E_EventStream checks GET /v1/events: headers, the hello snapshot
// first, then every bus event as event/data/id, the operator role only.
func TestE2E_EventStream(t *testing.T) {
	h := startHarness(t, nil)
	// Given an operator's stream
	s := openSSE(t, h.base, "/v1/events", h.operator)
	defer s.Close()
	require.Equal(t, http.StatusOK, s.Resp.StatusCode)
	require.Equal(t, "text/event-stream; charset=utf-8", s.Resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", s.Resp.Header.Get("Cache-Control"))
	require.Equal(t, "no", s.Resp.Header.Get("X-Accel-Buffering"))
	hello := s.next(t, "hello", 5*time.Second, nil)
	var snap map[string]any
	require.NoError(t, json.Unmarshal([]byte(hello.Data), &snap))
	for _, k := range []string{"robot", "state", "safety", "approvals", "grants", "tasks", "objects", "map"} {
		require.Contains(t, snap, k, "hello snapshot")
	}
	// When the agent calls an action
	env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
	id := taskID(t, env)
	// Then the request shows up as an approval event with the bus seq as id
	ev := s.next(t, "approval", 5*time.Second, func(e sseEvent) bool { return strings.Contains(e.Data, id) })
	var wire struct {
		Seq  uint64 `json:"seq"`
		Type string `json:"type"`
		Data struct {
			Type     string         `json:"type"`
			Approval map[string]any `json:"approval"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &wire))
	require.Equal(t, "approval.created", wire.Data.Type)
	require.Equal(t, id, wire.Data.Approval["task_id"])
	require.Equal(t, strconv.FormatUint(wire.Seq, 10), ev.ID)
	require.NotEmpty(t, wire.Data.Approval["preview"])
	// And the task events carry the task (with its error once it fails)
	h.call("cancel_task", args(map[string]any{"task_id": id}))
	s.next(t, "task", 5*time.Second, func(e sseEvent) bool {
		return strings.Contains(e.Data, id) && strings.Contains(e.Data, `"status":"cancelled"`) && strings.Contains(e.Data, `"error"`)
	})
	// And state events flow
	s.next(t, "state", 5*time.Second, nil)

	// The agent and callers without a token get no stream.
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{{"no token", "", http.StatusUnauthorized}, {"agent", h.agent, http.StatusForbidden}} {
		t.Run(tc.name, func(t *testing.T) {
			code, _ := h.do("GET", "/v1/events", tc.token, nil)
			require.Equal(t, tc.want, code)
		})
	}
}

// TestE2E_ApprovalLifecycleOverHTTP covers the approval "done when" lines
// that need no browser, over the real HTTP API, checking the simulator's
// command log for motion.
func TestE2E_ApprovalLifecycleOverHTTP(t *testing.T) { scenarioApprovalLifecycle(t, startHarness) }

func scenarioApprovalLifecycle(t *testing.T, start harnessFactory) {
	h := start(t, func(c *hwconfig.Config) {
		c.Safety.ApprovalTTL = hwconfig.Duration(time.Second)
	})

	t.Run("APPROVAL_PENDING after wait_ms, with the task id and a get_task suggestion", func(t *testing.T) {
		env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "wait_ms", 150))
		e := requireError(t, env, "APPROVAL_PENDING", true)
		require.Contains(t, e["suggestion"], "get_task")
		id := taskID(t, env)
		h.call("cancel_task", args(map[string]any{"task_id": id}))
		h.waitTask(id, 5*time.Second)
	})

	t.Run("a request that expires while pending moves nothing and says APPROVAL_EXPIRED", func(t *testing.T) {
		// Given a request nobody decides
		before := len(h.sim.CommandLog())
		env := h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 1.0}))
		id := taskID(t, env)
		// When its TTL passes
		data := taskData(h.waitTask(id, 10*time.Second))
		// Then the agent hears APPROVAL_EXPIRED
		require.Equal(t, "expired", data["status"])
		require.Equal(t, "APPROVAL_EXPIRED", data["error"].(map[string]any)["type"])
		// And the operator can no longer approve it
		code, body := h.do("GET", "/v1/approvals?status=expired", h.operator, nil)
		require.Equal(t, http.StatusOK, code)
		apr := ""
		for _, a := range body["approvals"].([]any) {
			if m := a.(map[string]any); m["task_id"] == id {
				apr = m["id"].(string)
			}
		}
		require.NotEmpty(t, apr, "the expired request is listed as expired: %v", body)
		code, body = h.do("POST", "/v1/approvals/"+apr+"/approve", h.operator, map[string]any{})
		require.Equal(t, http.StatusConflict, code, "%v", body)
		// And the simulator received no motion command at all
		for _, c := range h.sim.CommandLog()[before:] {
			require.NotEqual(t, "command", c.Op, "an expired request sent a command: %+v", c)
		}
	})

	t.Run("a grant authorizes inside its bounds only", func(t *testing.T) {
		// Given a scoped grant for base targets in a rectangle
		code, body := h.do("POST", "/v1/grants", h.operator, map[string]any{
			"scope": map[string]any{"tool": "move_base_to", "rect": map[string]any{"min_x": 0.0, "min_y": -0.5, "max_x": 1.0, "max_y": 0.5}},
			"ttl":   "5m",
		})
		require.Equal(t, http.StatusCreated, code, "%v", body)
		grantID := body["grant"].(map[string]any)["id"].(string)
		// When the agent moves inside it, no operator is asked
		before := motionCommands(h.sim)
		env := h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0.0}))
		id := taskID(t, env)
		require.Equal(t, "succeeded", taskData(h.waitTask(id, 20*time.Second))["status"])
		require.Contains(t, approvalOfTask(t, h, id)["reason"], grantID, "the grant approved it")
		require.Equal(t, before+1, motionCommands(h.sim))
		// When the agent moves outside it, the call waits for an operator
		before = motionCommands(h.sim)
		env = h.call("move_base_to", args(map[string]any{"x": 2.0, "y": -2.0}))
		out := taskID(t, env)
		h.pendingApproval(out) // outside the bounds needs an operator
		h.call("cancel_task", args(map[string]any{"task_id": out}))
		h.waitTask(out, 5*time.Second)
		require.Equal(t, before, motionCommands(h.sim), "nothing moved outside the grant")

		// Revocation takes effect for the very next call.
		code, body = h.do("DELETE", "/v1/grants/"+grantID, h.operator, nil)
		require.Equal(t, http.StatusOK, code, "%v", body)
		env = h.call("move_base_to", args(map[string]any{"x": 0.0, "y": 0.0}))
		next := taskID(t, env)
		h.pendingApproval(next) // a revoked grant authorizes nothing
		h.call("cancel_task", args(map[string]any{"task_id": next}))
		h.waitTask(next, 5*time.Second)
		require.Equal(t, before, motionCommands(h.sim))
	})

	t.Run("a grant past its TTL authorizes nothing", func(t *testing.T) {
		s := openSSE(t, h.base, "/v1/events", h.operator)
		defer s.Close()
		s.next(t, "hello", 5*time.Second, nil)
		// Given a short grant
		code, body := h.do("POST", "/v1/grants", h.operator, map[string]any{
			"scope": map[string]any{"tool": "move_arm_to", "poses": []string{"ready", "stowed"}}, "ttl": "300ms",
		})
		require.Equal(t, http.StatusCreated, code, "%v", body)
		grantID := body["grant"].(map[string]any)["id"].(string)
		// When it expires (the service says so on the event stream)
		s.next(t, "approval", 10*time.Second, func(e sseEvent) bool {
			return strings.Contains(e.Data, `"grant.expired"`) && strings.Contains(e.Data, grantID)
		})
		// Then a call inside its bounds waits for an operator again
		before := motionCommands(h.sim)
		env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
		id := taskID(t, env)
		h.pendingApproval(id) // an expired grant authorizes nothing
		h.call("cancel_task", args(map[string]any{"task_id": id}))
		h.waitTask(id, 5*time.Second)
		require.Equal(t, before, motionCommands(h.sim))
	})
}
