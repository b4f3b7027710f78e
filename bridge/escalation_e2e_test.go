package bridge

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
)

// escalationsOf returns GET /v1/escalations as the operator reads it.
func escalationsOf(t *testing.T, h *harness) []map[string]any {
	t.Helper()
	code, body := h.do("GET", "/v1/escalations", h.operator, nil)
	require.Equal(t, http.StatusOK, code, body)
	raw, _ := body["escalations"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		out = append(out, e.(map[string]any))
	}
	return out
}

func TestE2E_FaultDuringAgentTaskRaisesAnEscalation(t *testing.T) {
	h := startHarness(t, func(c *hwconfig.Config) {
		c.SafePose.Timeout = hwconfig.Duration(3 * time.Second)
		c.Safety.StallTimeout = hwconfig.Duration(500 * time.Millisecond)
	})
	t.Cleanup(func() { clearFaultIfLatched(t, h) })
	// Given an agent's arm motion whose shoulder jams half-way
	id := taskID(t, h.call("move_arm_to", map[string]any{"arguments": map[string]any{"pose": "reach_table"}, "session_id": "s-fault"}))
	h.approve(id)
	time.Sleep(700 * time.Millisecond)
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultJointStuck, Joint: "shoulder_pitch"})
	require.NoError(t, err)
	t.Cleanup(func() { h.sim.ClearFaults() })

	// When recovery cannot move the joint and a fault latches
	env := h.waitTask(id, 30*time.Second)
	require.Equal(t, "fault", taskData(env)["status"], env)
	require.True(t, h.b.Supervisor().Status().Fault.Latched)

	// Then the bridge raised one escalation for the agent's session and task
	var es []map[string]any
	require.Eventually(t, func() bool { es = escalationsOf(t, h); return len(es) == 1 }, 5*time.Second, 20*time.Millisecond)
	e := es[0]
	require.Equal(t, "fault", e["source"])
	require.Equal(t, "open", e["status"])
	require.Equal(t, "agent", e["agent"])
	require.Equal(t, "s-fault", e["session_id"])
	require.Equal(t, id, e["task_id"])
	require.Equal(t, h.b.RobotIDs()[0], e["robot_id"], "the escalation names the robot whose fault it is")
	require.Contains(t, e["summary"], "A fault latched during task "+id)
	require.Contains(t, e["summary"], "Every motion is refused until an operator clears the fault.")
	require.NotContains(t, e["summary"], "..")
	recent := e["recent_calls"].([]any)
	require.Equal(t, "move_arm_to", recent[0].(map[string]any)["tool"], "the session's calls are attached")
	// And it is audited
	code, body := h.do("GET", "/v1/audit?type=escalation", h.operator, nil)
	require.Equal(t, http.StatusOK, code)
	recs := body["records"].([]any)
	require.Len(t, recs, 1)
	require.Equal(t, "escalation.opened", recs[0].(map[string]any)["type"])
}

func TestE2E_LoopDetectedRaisesOneEscalation(t *testing.T) {
	h := startHarness(t, nil)
	body := map[string]any{"arguments": map[string]any{"x": 99.0, "y": 0.0}, "session_id": "s-loop"}
	// Given a session that repeats a refused call well past the loop guard
	for i := range 5 {
		env := h.call("move_base_to", body)
		if i >= 2 {
			require.Equal(t, "LOOP_DETECTED", errType(env))
		}
	}
	// Then exactly one escalation was raised for that session
	es := escalationsOf(t, h)
	require.Len(t, es, 1)
	require.Equal(t, "loop_detected", es[0]["source"])
	require.Equal(t, "s-loop", es[0]["session_id"])
	// And the metric counts it by its source
	code, text, _ := send(t, h, "GET", "/metrics", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, text, `robot_bridge_escalations_total{source="loop_detected"} 1`)
	require.Contains(t, text, "robot_bridge_escalations_open 1")
}

func TestE2E_EscalationAnswerIsTheOperatorsAndChecked(t *testing.T) {
	h := startHarness(t, nil)
	env := h.call("request_operator_help", map[string]any{"arguments": map[string]any{"summary": "which cup?"}, "session_id": "s-a"})
	require.Equal(t, true, env["ok"], env)
	id := env["data"].(map[string]any)["escalation"].(map[string]any)["id"].(string)
	// The agent cannot answer its own escalation
	code, _ := h.do("POST", "/v1/escalations/"+id+"/answer", h.agent, map[string]any{"text": "the red one"})
	require.Equal(t, http.StatusForbidden, code)
	// A bad answer is refused and changes nothing
	for _, bad := range []any{map[string]any{"text": " \x00 "}, map[string]any{"text": "ok", "extra": 1}, map[string]any{}} {
		code, body := h.do("POST", "/v1/escalations/"+id+"/answer", h.operator, bad)
		require.Equal(t, http.StatusBadRequest, code, body)
	}
	require.Equal(t, "open", escalationsOf(t, h)[0]["status"])
	// The operator's answer is recorded once
	code, body := h.do("POST", "/v1/escalations/"+id+"/answer", h.operator, map[string]any{"text": "the red one"})
	require.Equal(t, http.StatusOK, code, body)
	code, _ = h.do("POST", "/v1/escalations/"+id+"/answer", h.operator, map[string]any{"text": "no, the blue one"})
	require.Equal(t, http.StatusConflict, code)
	e := escalationsOf(t, h)[0]
	require.Equal(t, "answered", e["status"])
	require.Equal(t, "the red one", e["answer"].(map[string]any)["text"])
	require.Equal(t, "operator", e["answer"].(map[string]any)["by"])
}
