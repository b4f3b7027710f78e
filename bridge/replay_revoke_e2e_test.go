package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// End-to-end coverage the other engineers asked for (issue 11): a re-posted
// /v1/tool_calls message never moves twice, also across restarts and
// under an operator's grant; a revoked grant stops its motion; an e-stop
// withdraws the approval request that was waiting.

// grantBase lets move_base_to run without an operator inside a rectangle
// of the room for ten minutes, and returns the grant's id.
func grantBase(t *testing.T, h *harness) string {
	t.Helper()
	code, body := h.do("POST", "/v1/grants", h.operator, map[string]any{
		"scope": map[string]any{"tool": "move_base_to", "rect": map[string]any{"min_x": -4, "min_y": -4, "max_x": 4, "max_y": 4}},
		"ttl":   "10m",
	})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	return body["grant"].(map[string]any)["id"].(string)
}

// moveMessage is an assistant message with one move_base_to tool call.
func moveMessage(session, callID string, x float64) map[string]any {
	return map[string]any{
		"role":       "assistant",
		"session_id": session,
		"tool_calls": []any{map[string]any{
			"id": callID, "type": "function",
			"function": map[string]any{"name": "move_base_to", "arguments": fmt.Sprintf(`{"x": %g, "y": 0}`, x)},
		}},
	}
}

// postToolCalls posts an assistant message and returns the envelope of its
// only tool call. It never calls require, so goroutines may use it; err
// says what went wrong.
func postToolCalls(h *harness, msg map[string]any) (env map[string]any, err error) {
	code, body, err := h.tryDo("POST", "/v1/tool_calls", h.agent, msg)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("POST /v1/tool_calls: %d %v", code, body)
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 1 {
		return nil, fmt.Errorf("want one tool message, got %v", body)
	}
	content, _ := msgs[0].(map[string]any)["content"].(string)
	if err := json.Unmarshal([]byte(content), &env); err != nil {
		return nil, fmt.Errorf("tool message content %q: %w", content, err)
	}
	return env, nil
}

// toolCall posts msg and returns its envelope, failing the test on error.
func toolCall(t *testing.T, h *harness, msg map[string]any) map[string]any {
	t.Helper()
	env, err := postToolCalls(h, msg)
	require.NoError(t, err)
	return env
}

// envTaskID returns the task id of an envelope, "" when it has none.
func envTaskID(env map[string]any) string {
	task, _ := env["task"].(map[string]any)
	id, _ := task["id"].(string)
	return id
}

// approvalCount counts the approval requests ever filed, in any status.
func approvalCount(t *testing.T, h *harness) int {
	t.Helper()
	code, body := h.do("GET", "/v1/approvals", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	list, _ := body["approvals"].([]any)
	return len(list)
}

func TestE2E_RepostedToolCallsMessageMovesOnce(t *testing.T) {
	// Given an operator's grant for base motions, so that any second task
	// would be approved and would move without asking anyone
	h := startHarness(t, nil)
	grantBase(t, h)
	msg := moveMessage("conv-1", "call_move_1", 0.3)

	// When the model's message is posted
	first := toolCall(t, h, msg)
	require.Equal(t, true, first["ok"], "%v", first)
	id := envTaskID(first)
	require.NotEmpty(t, id, "%v", first)
	filed := approvalCount(t, h)

	// And re-posted, once and then by 20 hosts at once
	again := toolCall(t, h, msg)
	var wg sync.WaitGroup
	envs := make([]map[string]any, 20)
	errs := make([]error, 20)
	for i := range envs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			envs[i], errs[i] = postToolCalls(h, msg)
		}(i)
	}
	wg.Wait()

	// Then every answer is the first post's task, saying nothing was sent again
	require.Equal(t, id, envTaskID(again), "%v", again)
	require.Contains(t, again["text"], "nothing was sent to the robot again")
	for i := range envs {
		require.NoError(t, errs[i])
		require.Equal(t, id, envTaskID(envs[i]), "re-post %d: %v", i, envs[i])
	}
	// And the task ran once: exactly one motion command reached the robot
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 20*time.Second))["status"])
	require.Equal(t, 1, motionCommands(h.sim), "log: %v", h.sim.CommandLog())
	require.InDelta(t, 0.3, h.sim.Truth().Base.X, 0.06)
	require.Equal(t, filed, approvalCount(t, h), "no request was filed for a re-post")

	// When the same id comes with other arguments in the same session
	conflict := toolCall(t, h, moveMessage("conv-1", "call_move_1", -0.3))
	// Then it is CONFLICT naming the original task; nothing is filed or sent
	e := requireError(t, conflict, "CONFLICT", false)
	require.Contains(t, fmt.Sprint(e), id, "the conflict names the original call's task: %v", e)
	require.Equal(t, filed, approvalCount(t, h), "nothing was filed for the conflicting call")
	require.Equal(t, 1, motionCommands(h.sim))

	// When the same id comes in another session
	other := toolCall(t, h, moveMessage("conv-2", "call_move_1", 0.6))
	// Then it is a new call, with a task of its own, that moves
	otherID := envTaskID(other)
	require.NotEmpty(t, otherID, "%v", other)
	require.NotEqual(t, id, otherID)
	require.Equal(t, "succeeded", taskData(h.waitTask(otherID, 20*time.Second))["status"])
	require.Equal(t, 2, motionCommands(h.sim))
}

func TestE2E_RepostedToolCallsMessageMovesOnceAcrossRestarts(t *testing.T) {
	tests := []struct {
		name string
		// down stops the first bridge: cleanly, or leaving its store as a
		// crash leaves it.
		down func(t *testing.T, dir string, stop func())
		// crashed: the restart comes up with the crash fault latched.
		crashed bool
	}{
		{name: "clean restart", down: func(_ *testing.T, _ string, stop func()) { stop() }},
		{name: "crash without kill", crashed: true, down: func(t *testing.T, dir string, stop func()) {
			stop()
			markKilled(t, dir)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a message whose move ran under a grant, in a bridge that
			// then went down
			dir := t.TempDir()
			h1, stop1 := bootAt(t, dir, nil, nil)
			grantBase(t, h1)
			msg := moveMessage("conv-restart", "call_1", 0.3)
			id := envTaskID(toolCall(t, h1, msg))
			require.NotEmpty(t, id)
			require.Equal(t, "succeeded", taskData(h1.waitTask(id, 20*time.Second))["status"])
			tc.down(t, dir, stop1)

			// When a bridge starts again on the same data dir, an operator
			// clears what the crash latched and grants base motions again
			// (grants end with the run that made them), so a new task would
			// move at once
			h2, _ := bootAt(t, dir, nil, nil)
			require.Equal(t, tc.crashed, h2.b.Supervisor().Status().Fault.Latched)
			if tc.crashed {
				clearFault(t, h2)
			}
			grantBase(t, h2)
			// And the host re-posts the message
			again := toolCall(t, h2, msg)

			// Then it answers with the first run's task, as it ended, and the
			// robot received nothing
			require.Equal(t, id, envTaskID(again), "%v", again)
			require.Equal(t, "succeeded", again["task"].(map[string]any)["status"], "%v", again)
			require.Contains(t, again["text"], "nothing was sent to the robot again")
			require.Zero(t, motionCommands(h2.sim), "log: %v", h2.sim.CommandLog())
			require.InDelta(t, 0.0, h2.sim.Odometer().BaseDistance, 1e-9)
		})
	}
}

func TestE2E_RevokedGrantStopsItsMotion(t *testing.T) {
	scenarioRevokedGrantStopsItsMotion(t, startHarness)
}

func TestROS_RevokedGrantStopsItsMotion(t *testing.T) {
	scenarioRevokedGrantStopsItsMotion(t, startROSHarness)
}

// scenarioRevokedGrantStopsItsMotion: an operator revokes the grant a
// drive runs on, mid-motion, saying why; the robot is stopped and the
// task ends cancelled with APPROVAL_DENIED naming the operator and reason.
func scenarioRevokedGrantStopsItsMotion(t *testing.T, start harnessFactory) {
	// Given a long drive running on an operator's grant
	h := start(t, nil)
	grantID := grantBase(t, h)
	env := h.call("move_base_to", args(map[string]any{"x": 3.5, "y": 0}, "session_id", "revoke"))
	id := taskID(t, env)
	waitMoving(t, h)
	require.Equal(t, 1, motionCommands(h.sim))

	// When the operator revokes the grant, saying why
	code, body := h.do("DELETE", "/v1/grants/"+grantID, h.operator, map[string]any{"reason": "person near the table"})
	require.Equal(t, http.StatusOK, code, "%v", body)

	// Then a stop follows the drive's command in the simulator's log: in
	// process already when the revocation is answered (the supervisor
	// sends it before the approval service returns); over a network, once
	// it has crossed the wire
	if h.b.Sim() != nil {
		requireStopAfterLastCommand(t, h)
	} else {
		rostest.Eventually(t, 5*time.Second, func() bool {
			log := h.sim.CommandLog()
			i := lastCommandIndex(log)
			return i >= 0 && stopAfter(log, i)
		}, "no stop reached the robot after the revocation")
	}
	// And the task ends cancelled, with APPROVAL_DENIED naming the
	// operator and the reason
	done := h.waitTask(id, 20*time.Second)
	e := requireTaskError(t, done, "cancelled", "APPROVAL_DENIED", false)
	require.Contains(t, e["message"], "operator revoked the grant (person near the table)")
	require.Contains(t, e["message"], "robot stopped")
	d := e["details"].(map[string]any)
	require.Equal(t, "operator", d["revoked_by"])
	require.Equal(t, "person near the table", d["reason"])
	// And the robot stopped well short of the target, having sent nothing
	// more and latched nothing
	require.Less(t, h.sim.Odometer().BaseDistance, 2.0, "the base drove on after the revocation")
	require.Equal(t, 1, motionCommands(h.sim), "log: %v", h.sim.CommandLog())
	require.False(t, h.b.Supervisor().Status().Fault.Latched)
}

// lastCommandIndex returns where the last accepted motion command is in
// log, -1 when there is none.
func lastCommandIndex(log []sim.LogEntry) int {
	last := -1
	for i, e := range log {
		if e.Op == "command" && e.Accepted && !e.Duplicate {
			last = i
		}
	}
	return last
}

func TestE2E_EStopWithdrawsThePendingApproval(t *testing.T) {
	scenarioEStopWithdrawsThePendingApproval(t, startHarness)
}

func TestROS_EStopWithdrawsThePendingApproval(t *testing.T) {
	scenarioEStopWithdrawsThePendingApproval(t, startROSHarness)
}

// scenarioEStopWithdrawsThePendingApproval: an e-stop pressed while a
// motion waits for an operator withdraws its request; after the reset,
// approving the old request is refused and nothing moves.
func scenarioEStopWithdrawsThePendingApproval(t *testing.T, start harnessFactory) {
	// Given a motion waiting for an operator's approval
	h := start(t, nil)
	id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
	apr := h.pendingApproval(id)

	// When the agent presses the e-stop
	code, body := h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "child near the robot"})
	require.Equal(t, http.StatusOK, code, "%v", body)

	// Then the task ends e-stopped before it started, and its request is
	// withdrawn
	done := h.waitTask(id, 10*time.Second)
	e := requireTaskError(t, done, "estopped", "ESTOP_ACTIVE", false)
	require.Contains(t, e["message"], "child near the robot")
	require.Contains(t, e["message"], "nothing moved")
	require.Equal(t, "cancelled", approvalStatus(t, h, apr))
	require.Empty(t, pendingApprovals(t, h))

	// When an operator resets the e-stop and then approves the old request
	code, body = h.do("POST", "/v1/estop/reset", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	code, body = h.do("POST", "/v1/approvals/"+apr+"/approve", h.operator, map[string]any{})

	// Then the approval is refused, the task stays e-stopped, and nothing
	// ever reached the robot
	require.Equal(t, http.StatusConflict, code, "%v", body)
	require.Equal(t, "CONFLICT", body["error"].(map[string]any)["type"], "%v", body)
	require.Equal(t, "cancelled", approvalStatus(t, h, apr))
	require.Equal(t, "estopped", taskData(h.call("get_task", args(map[string]any{"task_id": id})))["status"])
	requireNothingMoved(t, h)
	require.True(t, strings.HasSuffix(fmt.Sprint(h.call("get_robot_state", nil)["robot"]), "no task running"))
}
