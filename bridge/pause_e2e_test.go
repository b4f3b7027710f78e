package bridge

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/store"
)

// The operator's pause, resume and abort of a running task over HTTP, on
// the bundled simulator (issue 14): what the API answers, and what the
// simulator did — its command log, pose and velocity.

// startMove calls move_base_to (x, 0) as the agent, approves it, and
// returns its task id once the base is on its way.
func (h *harness) startMove(x float64) string {
	h.t.Helper()
	env := h.call("move_base_to", args(map[string]any{"x": x, "y": 0.0}))
	id := taskID(h.t, env)
	h.approve(id)
	start := h.sim.Truth().Base
	require.Eventually(h.t, func() bool {
		b := h.sim.Truth().Base
		return math.Hypot(b.X-start.X, b.Y-start.Y) > 0.2
	}, 15*time.Second, 10*time.Millisecond, "the base never started to move")
	return id
}

// commandsOf returns the motion commands of task in the simulator's log
// from entry i on, and the log's length.
func commandsOf(s *sim.Sim, task string, i int) ([]sim.LogEntry, int) {
	log := s.CommandLog()
	var out []sim.LogEntry
	for _, e := range log[min(i, len(log)):] {
		if e.Op == "command" && (strings.HasPrefix(e.ID, task+"-") || strings.HasPrefix(e.ID, "recover-"+task+"-")) {
			out = append(out, e)
		}
	}
	return out, len(log)
}

func (h *harness) pauseTask(id, reason string) (int, map[string]any) {
	h.t.Helper()
	return h.do("POST", "/v1/tasks/"+id+"/pause", h.operator, map[string]any{"reason": reason})
}

func pauseView(body map[string]any) map[string]any {
	v, _ := body["task"].(map[string]any)
	return v
}

func TestE2E_PauseHoldsTheRobotThenResumeSucceeds(t *testing.T) {
	h := startHarness(t, nil)
	id := h.startMove(3.0)

	// When the operator pauses the task
	code, body := h.pauseTask(id, "a person walked into the aisle")

	// Then the answer comes once the robot is at rest, with the task paused
	require.Equal(t, http.StatusOK, code, "%v", body)
	v := pauseView(body)
	require.Equal(t, "paused", v["status"])
	p, _ := v["paused"].(map[string]any)
	require.Equal(t, "operator", p["by"])
	require.Equal(t, "a person walked into the aisle", p["reason"])
	since, err := time.Parse(time.RFC3339Nano, fmt.Sprint(p["since"]))
	require.NoError(t, err)
	ends, err := time.Parse(time.RFC3339Nano, fmt.Sprint(p["ends_at"]))
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, ends.Sub(since))
	require.Contains(t, body["text"], "Paused by the operator: a person walked into the aisle.")
	_, at := commandsOf(h.sim, id, 0)

	// And the simulator shows no motion at all while it is paused: the
	// last of the braking (below the bridge's rest thresholds when it
	// answered) dies out within a centimetre, then, sampled for 1.5 s, no
	// command of the task, the pose unchanged, the base and joints at rest
	answered := h.sim.Truth().Base
	require.Eventually(t, func() bool {
		tr := h.sim.Truth()
		return tr.Velocity.V == 0 && tr.Velocity.W == 0
	}, 2*time.Second, 5*time.Millisecond, "the base never came to a full stop")
	held := h.sim.Truth()
	require.Less(t, math.Hypot(held.Base.X-answered.X, held.Base.Y-answered.Y), 0.01, "the base rolled on after the pause answered")
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		tr := h.sim.Truth()
		require.Equal(t, held.Base, tr.Base, "the base moved while paused")
		require.Zero(t, tr.Velocity.V)
		require.Zero(t, tr.Velocity.W)
		for i, j := range tr.Joints {
			require.InDelta(t, held.Joints[i].Position, j.Position, 1e-9, "joint %s moved while paused", j.Name)
		}
	}
	cmds, _ := commandsOf(h.sim, id, at)
	require.Empty(t, cmds, "a command of the paused task reached the robot")

	// And the agent learns it is paused, and a new motion is busy naming it
	env := h.call("get_task", args(map[string]any{"task_id": id}))
	require.Equal(t, "paused", taskData(env)["status"])
	require.Contains(t, env["text"], "Paused by the operator: a person walked into the aisle.")
	env = h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
	require.Equal(t, "ROBOT_BUSY", errType(env), "%v", env)
	require.Contains(t, fmt.Sprint(env["error"]), id)
	// And an agent may not pause, resume or abort
	for _, verb := range []string{"pause", "resume", "abort"} {
		code, _ := h.do("POST", "/v1/tasks/"+id+"/"+verb, h.agent, map[string]any{"reason": "x"})
		require.Equal(t, http.StatusForbidden, code, verb)
	}

	// When the operator resumes it
	code, body = h.do("POST", "/v1/tasks/"+id+"/resume", h.operator, map[string]any{})

	// Then the same task goes on to its target
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "executing", pauseView(body)["status"])
	require.Nil(t, pauseView(body)["paused"])
	env = h.waitTask(id, 60*time.Second)
	require.Equal(t, "succeeded", taskData(env)["status"], "%v", env)
	b := h.sim.Truth().Base
	require.InDelta(t, 3.0, b.X, 0.06)
	require.InDelta(t, 0.0, b.Y, 0.06)
	// And the audit trail has the pause and the resume, by the operator,
	// with the reason
	audit, err := h.b.ConsoleAudit(context.Background(), 200)
	require.NoError(t, err)
	var paused, resumed bool
	for _, a := range audit {
		if a.By == "operator" && a.Kind == "task.paused" && strings.Contains(a.Text+fmt.Sprint(a), "a person walked into the aisle") {
			paused = true
		}
		if a.By == "operator" && a.Kind == "task.executing" && strings.Contains(fmt.Sprint(a), "resume") {
			resumed = true
		}
	}
	require.True(t, paused, "no audited pause: %+v", audit)
	require.True(t, resumed, "no audited resume: %+v", audit)
}

func TestE2E_PauseThenAbortRecovers(t *testing.T) {
	h := startHarness(t, nil)
	// Given the arm out of its safe pose and the base on its way
	env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
	arm := taskID(t, env)
	h.approve(arm)
	require.Equal(t, "succeeded", taskData(h.waitTask(arm, 60*time.Second))["status"])
	id := h.startMove(3.0)
	code, body := h.pauseTask(id, "check the load")
	require.Equal(t, http.StatusOK, code, "%v", body)
	_, at := commandsOf(h.sim, id, 0)

	// When the operator aborts it
	code, body = h.do("POST", "/v1/tasks/"+id+"/abort", h.operator, map[string]any{"reason": "load is loose"})

	// Then it ends through the recovery path: the arm back in its safe
	// pose, nothing but the supervisor's recovery sent after the pause
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.NotEqual(t, "paused", pauseView(body)["status"])
	env = h.waitTask(id, 60*time.Second)
	require.Equal(t, "recovered", taskData(env)["status"], "%v", env)
	require.Contains(t, env["text"], "move_base_to was aborted by the operator (load is loose); robot stopped")
	cmds, _ := commandsOf(h.sim, id, at)
	require.NotEmpty(t, cmds, "no recovery motion")
	for _, c := range cmds {
		require.True(t, strings.HasPrefix(c.ID, "recover-"), "command %s after the pause is not the recovery", c.ID)
	}
	require.False(t, h.b.Supervisor().Status().Fault.Latched)
}

func TestE2E_PauseLimitEndsThroughRecovery(t *testing.T) {
	h := startHarness(t, func(c *hwconfig.Config) { c.Safety.MaxPause = hwconfig.Duration(time.Second) })
	id := h.startMove(3.0)
	code, body := h.pauseTask(id, "waiting for the lift")
	require.Equal(t, http.StatusOK, code, "%v", body)

	// When nobody resumes or aborts it within safety.max_pause
	env := h.waitTask(id, 30*time.Second)

	// Then it ends through recovery, saying why
	require.Equal(t, "recovered", taskData(env)["status"], "%v", env)
	require.Contains(t, env["text"], "move_base_to ended: it was paused for longer than 1.0 s; robot stopped")
}

func TestE2E_PauseRoutesRefuseBadRequests(t *testing.T) {
	h := startHarness(t, nil)
	env := h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 0.0}))
	id := taskID(t, env)
	h.approve(id)
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 60*time.Second))["status"])

	tests := []struct {
		name, path string
		body       any
		code       int
		typ, says  string
	}{
		{"pause without a reason", "/v1/tasks/" + id + "/pause", map[string]any{}, 400, "INVALID_PARAMS", "reason is missing"},
		{"pause with an empty body", "/v1/tasks/" + id + "/pause", nil, 400, "INVALID_PARAMS", "reason is missing"},
		{"pause with a long reason", "/v1/tasks/" + id + "/pause", map[string]any{"reason": strings.Repeat("x", 1001)}, 400, "INVALID_PARAMS", "1001 characters"},
		{"pause with an unknown field", "/v1/tasks/" + id + "/pause", map[string]any{"reason": "x", "why": "y"}, 400, "INVALID_PARAMS", "unknown field"},
		{"pause of an unknown task", "/v1/tasks/task-nope/pause", map[string]any{"reason": "x"}, 404, "NOT_FOUND", "task-nope"},
		{"pause of a task that succeeded", "/v1/tasks/" + id + "/pause", map[string]any{"reason": "x"}, 409, "CONFLICT", "it succeeded"},
		{"resume of a task that succeeded", "/v1/tasks/" + id + "/resume", nil, 409, "CONFLICT", "it succeeded"},
		{"abort of a task that succeeded", "/v1/tasks/" + id + "/abort", nil, 409, "CONFLICT", "it succeeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := h.do("POST", tc.path, h.operator, tc.body)
			require.Equal(t, tc.code, code, "%v", body)
			e, _ := body["error"].(map[string]any)
			require.Equal(t, tc.typ, e["type"], "%v", body)
			require.Contains(t, e["message"], tc.says)
		})
	}
	// And nothing changed
	require.Equal(t, "succeeded", taskData(h.call("get_task", args(map[string]any{"task_id": id})))["status"])
}

func TestRestart_APausedTaskIsInterruptedAndTheRobotStaysStopped(t *testing.T) {
	// Given a bridge holding a paused task when it dies: its disk as it is
	// at that moment (a consistent snapshot of the live store)
	dir := t.TempDir()
	h1, _ := bootAt(t, dir, nil, nil)
	id := h1.startMove(3.0)
	code, body := h1.pauseTask(id, "inspect before the crash")
	require.Equal(t, http.StatusOK, code, "%v", body)
	crashed := t.TempDir()
	db := openStoreDB(t, dir)
	_, err := db.Exec(`VACUUM INTO ?`, filepath.Join(crashed, store.DefaultFile))
	require.NoError(t, err)

	// When a bridge starts on that disk
	h2, _ := bootAt(t, crashed, nil, nil)

	// Then the paused task is interrupted (paused is live), a fault is
	// latched for the crash, and nothing is sent to the robot
	env := h2.call("get_task", args(map[string]any{"task_id": id}))
	require.Equal(t, "interrupted", taskData(env)["status"], "%v", env)
	require.Contains(t, env["text"], "was paused")
	require.Empty(t, motionCommands(h2.sim))
	require.Equal(t, true, safetyStatus(h2)["fault"].(map[string]any)["latched"])
}

func TestE2E_OperatorServicePausesResumesAndAborts(t *testing.T) {
	h := startHarness(t, nil)
	ops := operatorClients(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, proto := range []string{"grpc", "connect"} {
		t.Run(proto, func(t *testing.T) {
			c := ops[proto]
			// Given a base motion under way
			id := h.startMove(map[string]float64{"grpc": 2.5, "connect": 0.5}[proto])
			// When the operator pauses it over RPC
			p, err := c.PauseTask(ctx, rpc(&robotbridgev1.PauseTaskRequest{TaskId: id, Reason: "over " + proto}, h.operator))
			// Then it is paused, as over HTTP
			require.NoError(t, err)
			require.Equal(t, "paused", p.Msg.GetTask().GetStatus())
			require.Contains(t, p.Msg.GetText(), "Paused by the operator: over "+proto+".")
			// And a second pause is FAILED_PRECONDITION with the task
			_, err = c.PauseTask(ctx, rpc(&robotbridgev1.PauseTaskRequest{TaskId: id, Reason: "again"}, h.operator))
			require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
			// And a pause without a reason is INVALID_ARGUMENT
			_, err = c.PauseTask(ctx, rpc(&robotbridgev1.PauseTaskRequest{TaskId: id}, h.operator))
			require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
			if proto == "grpc" {
				// When it is resumed, Then the same task reaches its target
				r, err := c.ResumeTask(ctx, rpc(&robotbridgev1.ResumeTaskRequest{TaskId: id}, h.operator))
				require.NoError(t, err)
				require.Equal(t, "executing", r.Msg.GetTask().GetStatus())
				require.Equal(t, "succeeded", taskData(h.waitTask(id, 60*time.Second))["status"])
				return
			}
			// When it is aborted, Then it ends through recovery
			a, err := c.AbortTask(ctx, rpc(&robotbridgev1.AbortTaskRequest{TaskId: id, Reason: "done"}, h.operator))
			require.NoError(t, err)
			require.NotEqual(t, "paused", a.Msg.GetTask().GetStatus())
			require.Equal(t, "recovered", taskData(h.waitTask(id, 60*time.Second))["status"])
		})
	}
}
