package bridge

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
)

// These tests are the tool API's "done when" lines (issue 3), over real
// HTTP against the bridge on the in-process simulator, checking what the
// simulator actually did where motion is involved.

func requireError(t *testing.T, env map[string]any, want string, retryable bool) map[string]any {
	t.Helper()
	require.Equal(t, false, env["ok"], "envelope: %v", env)
	e := env["error"].(map[string]any)
	require.Equal(t, want, e["type"], "envelope: %v", env)
	require.Equal(t, retryable, e["retryable"], "retryable of %s", want)
	require.NotEmpty(t, e["suggestion"], "suggestion of %s", want)
	require.NotEmpty(t, e["message"])
	require.NotEmpty(t, env["robot"], "every failure says where the robot is")
	return e
}

func motionCommands(s *sim.Sim) int {
	n := 0
	for _, e := range s.CommandLog() {
		if e.Op == "command" && e.Accepted && !e.Duplicate {
			n++
		}
	}
	return n
}

func TestE2E_ErrorTypes(t *testing.T) { scenarioErrorTypes(t, startHarness) }

func scenarioErrorTypes(t *testing.T, start harnessFactory) {
	h := start(t, func(c *hwconfig.Config) {
		c.Safety.StallTimeout = hwconfig.Duration(800 * time.Millisecond)
		c.Safety.ApprovalTTL = hwconfig.Duration(time.Second)
	})

	t.Run("INVALID_PARAMS names the field and the allowed range", func(t *testing.T) {
		env := h.call("move_base_to", args(map[string]any{"x": 99, "y": 0}, "session_id", "invalid"))
		e := requireError(t, env, "INVALID_PARAMS", false)
		require.Contains(t, e["message"], "x")
		require.Contains(t, fmt.Sprint(e["details"]), "99")
		require.Contains(t, fmt.Sprint(e["details"]), "-5")
	})
	t.Run("UNKNOWN_TOOL suggests the closest name", func(t *testing.T) {
		env := h.call("mvoe_base_to", args(map[string]any{"x": 1, "y": 0}))
		e := requireError(t, env, "UNKNOWN_TOOL", false)
		require.Contains(t, fmt.Sprint(e["details"]), "move_base_to")
	})
	t.Run("NOT_FOUND for an unknown task and an unknown object", func(t *testing.T) {
		requireError(t, h.call("get_task", args(map[string]any{"task_id": "task-nope"})), "NOT_FOUND", false)
		e := requireError(t, h.call("grasp", args(map[string]any{"object_id": "unicorn-9"})), "NOT_FOUND", false)
		require.Contains(t, e["suggestion"], "describe_scene")
	})
	t.Run("SAFETY_VIOLATION before any operator is asked", func(t *testing.T) {
		// The stairs are a keep-out region inside the room's schema range.
		env := h.call("move_base_to", args(map[string]any{"x": 4.0, "y": -4.0}, "session_id", "safety"))
		e := requireError(t, env, "SAFETY_VIOLATION", false)
		require.Contains(t, strings.ToLower(e["message"].(string)), "keep")
		code, body := h.do("GET", "/v1/approvals?status=pending", h.operator, nil)
		require.Equal(t, http.StatusOK, code)
		require.Empty(t, body["approvals"], "no operator is asked about an unsafe target")
	})
	t.Run("PERMISSION_DENIED for the agent on an operator route", func(t *testing.T) {
		code, body := h.do("POST", "/v1/estop/reset", h.agent, nil)
		require.Equal(t, http.StatusForbidden, code)
		requireErrorBody(t, body, "PERMISSION_DENIED")
	})
	t.Run("CONFLICT when a key is reused with other arguments", func(t *testing.T) {
		first := h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "idempotency_key", "conflict-1"))
		id := taskID(t, first)
		env := h.call("move_arm_to", args(map[string]any{"pose": "reach_table"}, "idempotency_key", "conflict-1"))
		requireError(t, env, "CONFLICT", false)
		h.call("cancel_task", args(map[string]any{"task_id": id}))
	})
	t.Run("APPROVAL_PENDING after wait_ms without a decision, then APPROVAL_EXPIRED", func(t *testing.T) {
		before := motionCommands(h.sim)
		env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "wait_ms", 100))
		requireError(t, env, "APPROVAL_PENDING", true)
		id := taskID(t, env)
		done := h.waitTask(id, 10*time.Second)
		data := taskData(done)
		require.Equal(t, "expired", data["status"])
		require.Equal(t, "APPROVAL_EXPIRED", data["error"].(map[string]any)["type"])
		require.Equal(t, before, motionCommands(h.sim), "an expired request moves nothing")
	})
	t.Run("APPROVAL_DENIED carries the operator's reason verbatim", func(t *testing.T) {
		env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
		id := taskID(t, env)
		apr := h.pendingApproval(id)
		code, body := h.do("POST", "/v1/approvals/"+apr+"/deny", h.operator, map[string]any{"reason": "someone is standing next to the arm"})
		require.Equal(t, http.StatusOK, code, "%v", body)
		data := taskData(h.waitTask(id, 5*time.Second))
		e := data["error"].(map[string]any)
		require.Equal(t, "APPROVAL_DENIED", e["type"])
		require.Contains(t, e["message"], "someone is standing next to the arm")
	})
	t.Run("ROBOT_BUSY names the running task", func(t *testing.T) {
		first := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
		id := taskID(t, first)
		env := h.call("move_base_to", args(map[string]any{"location": "table"}))
		e := requireError(t, env, "ROBOT_BUSY", true)
		require.Contains(t, e["message"], id)
		h.call("cancel_task", args(map[string]any{"task_id": id}))
	})
	t.Run("ACTION_FAILED when a joint sticks, with recovery", func(t *testing.T) {
		_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultJointStuck, Joint: "shoulder_pitch", Duration: 2 * time.Second})
		require.NoError(t, err)
		env := h.call("move_arm_to", args(map[string]any{"pose": "reach_table"}))
		id := taskID(t, env)
		h.approve(id)
		done := h.waitTask(id, 20*time.Second)
		data := taskData(done)
		e := data["error"].(map[string]any)
		require.Contains(t, []any{"ACTION_FAILED", "TIMEOUT"}, e["type"], "task: %v", data)
		require.Contains(t, []any{"recovered", "fault"}, data["status"])
		clearFaultIfLatched(t, h)
	})
	t.Run("TIMEOUT when the robot cannot finish in time", func(t *testing.T) {
		// A slow drag: the base only moves 5 % of the time, so progress
		// never stalls completely but the deadline passes.
		_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultMotorStall, Probability: 0.9, Duration: 30 * time.Second})
		require.NoError(t, err)
		env := h.call("move_base_to", args(map[string]any{"x": 0.6, "y": 0}))
		id := taskID(t, env)
		h.approve(id)
		data := taskData(h.waitTask(id, 30*time.Second))
		e := data["error"].(map[string]any)
		require.Contains(t, []any{"TIMEOUT", "ACTION_FAILED"}, e["type"], "task: %v", data)
		require.Contains(t, e["message"], "stop")
		h.sim.ClearFaults()
		clearFaultIfLatched(t, h)
	})
	t.Run("ESTOP_ACTIVE while latched", func(t *testing.T) {
		code, _ := h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "test"})
		require.Equal(t, http.StatusOK, code)
		requireError(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})), "ESTOP_ACTIVE", false)
		code, body := h.do("POST", "/v1/estop/reset", h.operator, nil)
		require.Equal(t, http.StatusOK, code, "%v", body)
	})
	t.Run("UNAVAILABLE when the robot link is down", func(t *testing.T) {
		fid, err := h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
		require.NoError(t, err)
		// Over a network transport the bridge notices silence only after
		// its link timeout; wait for that, as an agent would see it.
		require.Eventually(t, func() bool { return !h.b.Supervisor().Status().LinkUp }, 5*time.Second, 10*time.Millisecond)
		requireError(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})), "UNAVAILABLE", true)
		require.NoError(t, h.sim.ClearFault(fid))
		h.waitReady()
	})
	t.Run("LOOP_DETECTED on the third identical failure", func(t *testing.T) {
		body := args(map[string]any{"x": 4.0, "y": -4.0}, "session_id", "looper")
		requireError(t, h.call("move_base_to", body), "SAFETY_VIOLATION", false)
		requireError(t, h.call("move_base_to", body), "SAFETY_VIOLATION", false)
		requireError(t, h.call("move_base_to", body), "LOOP_DETECTED", false)
	})
	t.Run("RATE_LIMITED past the session's burst", func(t *testing.T) {
		var last map[string]any
		for i := 0; i < 200; i++ {
			last = h.call("list_named_poses", args(map[string]any{}, "session_id", "chatty"))
			if errType(last) == "RATE_LIMITED" {
				break
			}
		}
		e := requireError(t, last, "RATE_LIMITED", true)
		require.Greater(t, e["retry_after_ms"], float64(0))
	})
}

func requireErrorBody(t *testing.T, body map[string]any, want string) {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "body: %v", body)
	require.Equal(t, want, e["type"])
	require.NotEmpty(t, e["suggestion"])
}

// clearFaultIfLatched clears a fault the previous scenario latched, as an
// operator would, so the next scenario starts clean.
func clearFaultIfLatched(t *testing.T, h *harness) {
	t.Helper()
	if h.b.Supervisor().Status().Fault.Latched {
		code, body := h.do("POST", "/v1/faults/clear", h.operator, nil)
		require.Equal(t, http.StatusOK, code, "%v", body)
	}
}

func TestE2E_IdempotencyKeyMovesOnce(t *testing.T) { scenarioIdempotencyKeyMovesOnce(t, startHarness) }

func scenarioIdempotencyKeyMovesOnce(t *testing.T, start harnessFactory) {
	h := start(t, nil)
	s := h.sim
	before := motionCommands(s)
	body := args(map[string]any{"x": 0.5, "y": 0}, "idempotency_key", "once-only", "session_id", "idem")

	// When 20 goroutines send the same keyed call at once
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			env := h.call("move_base_to", body)
			ids[i] = taskID(t, env)
		}(i)
	}
	wg.Wait()
	// Then they all get the same task
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	h.approve(ids[0])
	done := h.waitTask(ids[0], 20*time.Second)
	require.Equal(t, "succeeded", taskData(done)["status"], "%v", done)
	// And a retry afterwards returns the same finished task
	again := h.call("move_base_to", body)
	require.Equal(t, ids[0], taskID(t, again))
	// And the simulator saw exactly one motion command
	require.Equal(t, before+1, motionCommands(s), "log: %v", s.CommandLog())
	require.InDelta(t, 0.5, s.Truth().Base.X, 0.06)
}

func TestE2E_ToolCallsRepairsModelOutput(t *testing.T) { scenarioToolCalls(t, startHarness) }

func scenarioToolCalls(t *testing.T, start harnessFactory) {
	h := start(t, nil)
	msg := map[string]any{
		"role": "assistant",
		"tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{
				"name": "get_robot_state", "arguments": "{}",
			}},
			map[string]any{"id": "call_2", "type": "function", "function": map[string]any{
				"name": "move_arm_to", "arguments": "Sure! Here are the arguments:\n```json\n{\"pose\": \"ready\",}\n```",
			}},
			map[string]any{"id": "call_3", "type": "function", "function": map[string]any{
				"name": "list_named_poses", "arguments": "{'kind': 'arm',}",
			}},
			map[string]any{"id": "call_4", "type": "function", "function": map[string]any{
				"name": "move_base_to", "arguments": "{\"x\": ",
			}},
		},
	}
	code, body := h.do("POST", "/v1/tool_calls", h.agent, msg)
	require.Equal(t, http.StatusOK, code, "%v", body)
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 4)
	for i, m := range msgs {
		mm := m.(map[string]any)
		require.Equal(t, "tool", mm["role"])
		require.Equal(t, fmt.Sprintf("call_%d", i+1), mm["tool_call_id"])
	}
	content := func(i int) string { return msgs[i].(map[string]any)["content"].(string) }
	require.Contains(t, content(0), `"ok":true`)
	// The fenced, trailing-comma arguments were repaired and the action ran:
	// it created a task awaiting approval.
	require.Contains(t, content(1), `"awaiting_approval"`, content(1))
	require.Contains(t, content(3), "INVALID_PARAMS")
	require.NotEmpty(t, body["summary"])
}

func TestE2E_AuthMatrixBasics(t *testing.T) {
	h := startHarness(t, nil)
	code, _ := h.do("POST", "/v1/tools/get_robot_state/call", "", map[string]any{})
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = h.do("POST", "/v1/tools/get_robot_state/call", "wrong-token", map[string]any{})
	require.Equal(t, http.StatusUnauthorized, code)
	for _, route := range [][2]string{
		{"GET", "/v1/approvals?status=pending"},
		{"GET", "/v1/grants"},
		{"POST", "/v1/estop/reset"},
		{"POST", "/v1/faults/clear"},
		{"GET", "/v1/sim/faults"},
	} {
		code, _ := h.do(route[0], route[1], h.agent, nil)
		require.Equal(t, http.StatusForbidden, code, "%s %s", route[0], route[1])
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		code, _ := h.do("GET", p, "", nil)
		require.Equal(t, http.StatusOK, code, p)
	}
}

// TestE2E_PickAndPlace drives the whole tool chain an agent would use to
// pick up the red cup: drive to the table, look, grasp by the perceived id,
// release — and checks the simulator really holds, then really let go of,
// the cup.
func TestE2E_PickAndPlace(t *testing.T) { scenarioPickAndPlace(t, startHarness) }

func scenarioPickAndPlace(t *testing.T, start harnessFactory) {
	h := start(t, func(c *hwconfig.Config) {
		// Pre-authorized by config so the scenario is about the motion
		// chain; the approval path has its own scenarios.
		for _, tool := range []string{"move_base_to", "move_arm_to", "grasp", "release"} {
			c.Actions[tool] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
		}
	})
	run := func(tool string, a map[string]any) map[string]any {
		t.Helper()
		env := h.call(tool, args(a, "session_id", "pick", "wait_ms", 30000))
		require.Equal(t, true, env["ok"], "%s: %v", tool, env)
		data := taskData(h.waitTask(taskID(t, env), 40*time.Second))
		require.Equal(t, "succeeded", data["status"], "%s: %v", tool, data)
		return data
	}
	run("move_base_to", map[string]any{"location": "table"})

	// The agent looks for a cup and takes the id perception gives it.
	var cupID string
	require.Eventually(t, func() bool {
		env := h.call("describe_scene", args(map[string]any{"label": "cup", "min_confidence": 0.5}, "session_id", "pick"))
		objs, _ := taskData(env)["objects"].([]any)
		for _, o := range objs {
			m := o.(map[string]any)
			if m["reachable"] == true {
				cupID = m["id"].(string)
				return true
			}
		}
		return false
	}, 10*time.Second, 200*time.Millisecond, "no reachable cup described")

	run("grasp", map[string]any{"object_id": cupID})
	truth := h.sim.Truth()
	require.NotNil(t, truth.Gripper)
	require.Equal(t, "red_cup", truth.Gripper.Holding, "the simulator holds the cup")

	run("release", map[string]any{})
	truth = h.sim.Truth()
	require.Empty(t, truth.Gripper.Holding)
	for _, o := range truth.Objects {
		if o.ID == "red_cup" {
			require.Greater(t, o.Position.Z, 0.7, "the cup was put back on the table, not dropped on the floor: %+v", o)
		}
	}
}
