package bridge

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
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

// errorTypeCase is one error type of the taxonomy, produced by its own
// cause in its own bridge.
type errorTypeCase struct {
	typ  string
	name string
	// edit adjusts the config of the case's own bridge (optional).
	edit func(*hwconfig.Config)
	// run produces the error from a fresh bridge on a robot at rest and
	// checks the envelope and what the simulator did.
	run func(t *testing.T, h *harness)
}

// scenarioErrorTypes produces every error type of the closed taxonomy
// end to end, each from its own cause in a bridge of its own (so no case
// inherits another's injected fault, latch, loop count or rate budget),
// and asserts the exact type, the retry rule, and what the envelope says
// about the robot — checked against the simulator's ground truth.
func scenarioErrorTypes(t *testing.T, start harnessFactory) {
	cases := errorTypeCases()
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.typ)
	}
	var all []string
	for _, typ := range toolerr.Types() {
		all = append(all, string(typ))
	}
	require.ElementsMatch(t, all, covered, "every error type of the taxonomy has exactly one case")

	for _, tc := range cases {
		t.Run(tc.typ+" "+tc.name, func(t *testing.T) {
			// Given a bridge of its own on a robot at rest, with no fault
			// injected, nothing latched and nothing ever commanded
			h := start(t, tc.edit)
			requireCleanAtRest(t, h)
			tc.run(t, h)
		})
	}
}

func errorTypeCases() []errorTypeCase {
	return []errorTypeCase{
		{typ: "INVALID_PARAMS", name: "names the field, the value and the allowed range", run: func(t *testing.T, h *harness) {
			// When the agent asks for a target outside the schema's range
			env := h.call("move_base_to", args(map[string]any{"x": 99, "y": 0}, "session_id", "invalid"))
			// Then
			e := requireError(t, env, "INVALID_PARAMS", false)
			d := e["details"].(map[string]any)
			require.Equal(t, "x", d["field"])
			require.EqualValues(t, 99, d["received"])
			require.Contains(t, d["allowed"], "[-5, 5]")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "UNKNOWN_TOOL", name: "offers the closest name", run: func(t *testing.T, h *harness) {
			env := h.call("mvoe_base_to", args(map[string]any{"x": 1, "y": 0}))
			e := requireError(t, env, "UNKNOWN_TOOL", false)
			require.Contains(t, e["details"].(map[string]any)["closest"], "move_base_to")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "NOT_FOUND", name: "for an unknown task and an unknown object", run: func(t *testing.T, h *harness) {
			env := h.call("get_task", args(map[string]any{"task_id": "task-nope"}))
			requireError(t, env, "NOT_FOUND", false)
			requireRestingWords(t, env["robot"], "no task running")
			env = h.call("grasp", args(map[string]any{"object_id": "unicorn-9"}))
			e := requireError(t, env, "NOT_FOUND", false)
			require.Contains(t, e["suggestion"], "describe_scene")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "PERMISSION_DENIED", name: "for the agent approving its own request", run: func(t *testing.T, h *harness) {
			// Given a motion waiting for an operator
			id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
			apr := h.pendingApproval(id)
			// When the agent approves it with its own credential
			code, body := h.do("POST", "/v1/approvals/"+apr+"/approve", h.agent, map[string]any{})
			// Then it is refused; an HTTP-layer refusal carries no robot
			// state (DESIGN §3.2), so the robot's words come from get_task
			require.Equal(t, http.StatusForbidden, code, "%v", body)
			e := requireErrorBody(t, body, "PERMISSION_DENIED")
			require.Equal(t, false, e["retryable"])
			require.Equal(t, "operator", e["details"].(map[string]any)["required_role"])
			// And the request is still pending and nothing moved
			require.Equal(t, apr, h.pendingApproval(id))
			env := h.call("get_task", args(map[string]any{"task_id": id}))
			require.Equal(t, "awaiting_approval", taskData(env)["status"])
			requireRestingWords(t, env["robot"], "task "+id+" (move_arm_to) "+toolapi.StatusPhrase(fsm.AwaitingApproval))
			requireNothingMoved(t, h)
		}},
		{typ: "APPROVAL_PENDING", name: "after wait_ms without a decision, with the task id", run: func(t *testing.T, h *harness) {
			env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "wait_ms", 100))
			e := requireError(t, env, "APPROVAL_PENDING", true)
			require.Contains(t, e["suggestion"], "get_task")
			id := taskID(t, env)
			requireRestingWords(t, env["robot"], "task "+id+" (move_arm_to) "+toolapi.StatusPhrase(fsm.AwaitingApproval))
			h.pendingApproval(id)
			requireNothingMoved(t, h)
		}},
		{typ: "APPROVAL_DENIED", name: "carries the operator's reason verbatim", run: func(t *testing.T, h *harness) {
			id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
			// When the operator denies it with a reason
			code, body := h.do("POST", "/v1/approvals/"+h.pendingApproval(id)+"/deny", h.operator, map[string]any{"reason": "someone is standing next to the arm"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			// Then
			env := h.waitTask(id, 10*time.Second)
			e := requireTaskError(t, env, "denied", "APPROVAL_DENIED", false)
			require.Contains(t, e["message"], `"someone is standing next to the arm"`)
			require.Contains(t, e["message"], "nothing moved")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingMoved(t, h)
		}},
		{
			typ: "APPROVAL_EXPIRED", name: "when no operator decides in time",
			edit: func(c *hwconfig.Config) { c.Safety.ApprovalTTL = hwconfig.Duration(300 * time.Millisecond) },
			run: func(t *testing.T, h *harness) {
				id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
				apr := h.pendingApproval(id)
				// When the request's TTL passes with no decision
				env := h.waitTask(id, 10*time.Second)
				// Then
				requireTaskError(t, env, "expired", "APPROVAL_EXPIRED", false)
				requireRestingWords(t, env["robot"], "no task running")
				// And the operator can no longer approve it
				code, body := h.do("POST", "/v1/approvals/"+apr+"/approve", h.operator, map[string]any{})
				require.Equal(t, http.StatusConflict, code, "%v", body)
				requireNothingMoved(t, h)
			},
		},
		{typ: "SAFETY_VIOLATION", name: "before any operator is asked", run: func(t *testing.T, h *harness) {
			// The stairs are a keep-out region inside the room's schema range.
			env := h.call("move_base_to", args(map[string]any{"x": 4.0, "y": -4.0}, "session_id", "safety"))
			e := requireError(t, env, "SAFETY_VIOLATION", false)
			require.Contains(t, strings.ToLower(e["message"].(string)), "keep")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "ESTOP_ACTIVE", name: "while the e-stop is latched", run: func(t *testing.T, h *harness) {
			code, body := h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "person in the aisle"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
			e := requireError(t, env, "ESTOP_ACTIVE", false)
			require.Contains(t, e["message"], "person in the aisle")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "ROBOT_BUSY", name: "names the task holding the robot", run: func(t *testing.T, h *harness) {
			id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
			h.pendingApproval(id)
			env := h.call("move_base_to", args(map[string]any{"location": "table"}))
			e := requireError(t, env, "ROBOT_BUSY", true)
			require.Contains(t, e["message"], id)
			require.Equal(t, id, e["details"].(map[string]any)["task_id"])
			requireRestingWords(t, env["robot"], "task "+id+" (move_arm_to) "+toolapi.StatusPhrase(fsm.AwaitingApproval))
			require.Len(t, pendingApprovals(t, h), 1, "no request was filed for the refused call")
			requireNothingMoved(t, h)
		}},
		{
			typ: "TIMEOUT", name: "from a real deadline, stopped short, with what recovery did",
			// A one-second bound on a drive that needs about five.
			edit: func(c *hwconfig.Config) {
				c.Actions["move_base_to"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalRequired, Timeout: hwconfig.Duration(time.Second)}
			},
			run: func(t *testing.T, h *harness) {
				id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 3.0, "y": 0})))
				h.approve(id)
				env := h.waitTask(id, 20*time.Second)
				e := requireTaskError(t, env, "recovered", "TIMEOUT", false)
				require.Equal(t, "deadline", e["details"].(map[string]any)["monitor"])
				msg := e["message"].(string)
				require.Contains(t, msg, "move_base_to timed out")
				require.Contains(t, msg, "robot stopped")
				require.Contains(t, msg, "arm already in stowed, base stopped", "what recovery did")
				require.Regexp(t, `base stopped \d+\.\d\d m short of \(3\.00, 0\.00\)`, msg)
				requireRestingWords(t, env["robot"], "no task running")
				// And the simulator drove part of the way, and got a stop after
				// the task's last command
				odo := h.sim.Odometer()
				require.Greater(t, odo.BaseDistance, 0.05, "the base drove")
				require.Less(t, odo.BaseDistance, 2.5, "the base was stopped well short of 3 m")
				require.Equal(t, 1, motionCommands(h.sim))
				requireStopAfterLastCommand(t, h)
				require.False(t, h.b.Supervisor().Status().Fault.Latched)
			},
		},
		{
			typ: "ACTION_FAILED", name: "when the base motor stalls, with recovery",
			edit: func(c *hwconfig.Config) { c.Safety.StallTimeout = hwconfig.Duration(500 * time.Millisecond) },
			run: func(t *testing.T, h *harness) {
				_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultMotorStall})
				require.NoError(t, err)
				id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 0})))
				h.approve(id)
				env := h.waitTask(id, 20*time.Second)
				e := requireTaskError(t, env, "recovered", "ACTION_FAILED", false)
				msg := e["message"].(string)
				require.Contains(t, msg, "move_base_to failed")
				require.Contains(t, msg, "robot stopped")
				require.Contains(t, msg, "arm already in stowed, base stopped", "what recovery did")
				requireRestingWords(t, env["robot"], "no task running")
				require.Less(t, h.sim.Odometer().BaseDistance, 0.01, "the stalled base did not move")
				requireStopAfterLastCommand(t, h)
			},
		},
		{typ: "UNAVAILABLE", name: "when the robot link is down", run: func(t *testing.T, h *harness) {
			_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
			require.NoError(t, err)
			// (The link comes back before the bridge's final stop.)
			t.Cleanup(func() { h.sim.ClearFaults() })
			// Over a network transport the bridge notices silence only after
			// its link timeout; wait for that, as an agent would see it.
			require.Eventually(t, func() bool { return !h.b.Supervisor().Status().LinkUp }, 5*time.Second, 10*time.Millisecond)
			env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
			e := requireError(t, env, "UNAVAILABLE", true)
			require.Greater(t, e["retry_after_ms"], float64(0))
			require.Contains(t, env["robot"], "robot link down")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "RATE_LIMITED", name: "past the session's burst, for that session only", run: func(t *testing.T, h *harness) {
			// toolapi.Conf's defaults: a burst of 40 at 20 calls/s per session.
			const burst, rate = 40, 20
			n := 0
			var last map[string]any
			for n < 10*burst {
				n++
				last = h.call("list_named_poses", args(map[string]any{}, "session_id", "chatty"))
				if last["ok"] != true {
					break
				}
			}
			e := requireError(t, last, "RATE_LIMITED", true)
			require.Greater(t, n, burst, "the first %d calls of a session are never limited", burst)
			require.Greater(t, e["retry_after_ms"], float64(0))
			require.LessOrEqual(t, e["retry_after_ms"], float64(1000/rate), "one token comes back within 1/rate")
			requireRestingWords(t, last["robot"], "no task running")
			// And another session of the same agent is not limited
			other := h.call("list_named_poses", args(map[string]any{}, "session_id", "quiet"))
			require.Equal(t, true, other["ok"], "%v", other)
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "CONFLICT", name: "when a key is reused with other arguments", run: func(t *testing.T, h *harness) {
			first := h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "idempotency_key", "conflict-1"))
			id := taskID(t, first)
			env := h.call("move_arm_to", args(map[string]any{"pose": "reach_table"}, "idempotency_key", "conflict-1"))
			e := requireError(t, env, "CONFLICT", false)
			d := e["details"].(map[string]any)
			require.Equal(t, "conflict-1", d["idempotency_key"])
			require.Equal(t, id, d["original_task_id"], "names the original call's task")
			requireRestingWords(t, env["robot"], "task "+id+" (move_arm_to) "+toolapi.StatusPhrase(fsm.AwaitingApproval))
			require.Len(t, pendingApprovals(t, h), 1, "nothing was filed for the conflicting call")
			requireNothingMoved(t, h)
		}},
		{typ: "LOOP_DETECTED", name: "on the third identical failure", run: func(t *testing.T, h *harness) {
			body := args(map[string]any{"x": 4.0, "y": -4.0}, "session_id", "looper")
			requireError(t, h.call("move_base_to", body), "SAFETY_VIOLATION", false)
			requireError(t, h.call("move_base_to", body), "SAFETY_VIOLATION", false)
			env := h.call("move_base_to", body)
			e := requireError(t, env, "LOOP_DETECTED", false)
			require.Contains(t, e["suggestion"], "tell the user")
			requireRestingWords(t, env["robot"], "no task running")
			requireNothingFiledNothingMoved(t, h)
		}},
		{typ: "INTERNAL", name: "when the store cannot record the start, and nothing moves", run: func(t *testing.T, h *harness) {
			// Given a store whose disk refuses every transition (a SQLite
			// trigger in the bridge's own database, behind its back)
			db := openStoreDB(t, h.b.conf.DataDir)
			_, err := db.Exec(`CREATE TRIGGER refuse_transitions BEFORE INSERT ON transitions
				BEGIN SELECT RAISE(ABORT, 'disk refuses the transition'); END`)
			require.NoError(t, err)
			// When the agent asks for a motion and an operator approves it
			id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0})))
			h.approve(id)
			// Then the start, which must be recorded before its command, is
			// refused: the task fails INTERNAL and says nothing was sent
			env := h.waitTask(id, 10*time.Second)
			e := requireTaskError(t, env, "failed", "INTERNAL", true)
			require.Contains(t, e["message"], "could not be recorded, so the command was not sent")
			require.Regexp(t, `base at \(0\.00, 0\.00\) facing 0°`, e["message"])
			requireRestingWords(t, env["robot"], "no task running")
			// And the simulator received no command at all
			requireNothingMoved(t, h)
		}},
	}
}

// requireTaskError checks a finished task's get_task envelope: its status,
// and its error's exact type and retry rule.
func requireTaskError(t *testing.T, env map[string]any, status, typ string, retryable bool) map[string]any {
	t.Helper()
	data := taskData(env)
	require.Equal(t, status, data["status"], "task: %v", data)
	e, ok := data["error"].(map[string]any)
	require.True(t, ok, "task has no error: %v", data)
	require.Equal(t, typ, e["type"], "task: %v", data)
	require.Equal(t, retryable, e["retryable"], "retryable of %s", typ)
	require.NotEmpty(t, e["suggestion"], "suggestion of %s", typ)
	require.NotEmpty(t, e["message"])
	return e
}

// restingWords is how the envelope's robot field starts for a robot the
// bridge currently knows to be at rest.
var restingWords = regexp.MustCompile(`^stopped at \(-?\d+\.\d\d, -?\d+\.\d\d\) facing -?\d+°, `)

// requireRestingWords checks that an envelope's robot field says the robot
// is stopped, where, and what task holds it.
func requireRestingWords(t *testing.T, robotField any, task string) {
	t.Helper()
	s, _ := robotField.(string)
	require.Regexp(t, restingWords, s)
	require.True(t, strings.HasSuffix(s, ", "+task), "robot field %q does not end with %q", s, task)
}

// requireCleanAtRest checks that a bridge starts a case clean: no fault
// injected into the simulator, no latch, the link up, no task, and a robot
// that has never been commanded and never moved.
func requireCleanAtRest(t *testing.T, h *harness) {
	t.Helper()
	require.Empty(t, h.sim.Faults(), "no fault is injected")
	st := h.b.Supervisor().Status()
	require.False(t, st.EStop.Active, "no e-stop latched")
	require.False(t, st.Fault.Latched, "no fault latched")
	require.True(t, st.LinkUp, "the robot link is up")
	_, busy := h.b.Runner().Active()
	require.False(t, busy, "no task holds the robot")
	require.Zero(t, motionCommands(h.sim), "no motion command was ever sent")
	require.Equal(t, sim.Odometry{}, h.sim.Odometer(), "the robot never moved")
}

// requireNothingMoved checks the simulator's ground truth: no motion
// command reached it and nothing of it moved since the bridge started.
func requireNothingMoved(t *testing.T, h *harness) {
	t.Helper()
	require.Zero(t, motionCommands(h.sim), "log: %v", h.sim.CommandLog())
	require.Equal(t, sim.Odometry{}, h.sim.Odometer(), "the robot moved")
}

// requireNothingFiledNothingMoved checks that no operator was asked and
// nothing moved.
func requireNothingFiledNothingMoved(t *testing.T, h *harness) {
	t.Helper()
	require.Empty(t, pendingApprovals(t, h), "no operator is asked")
	requireNothingMoved(t, h)
}

// pendingApprovals lists the pending approval requests as the operator
// sees them.
func pendingApprovals(t *testing.T, h *harness) []any {
	t.Helper()
	code, body := h.do("GET", "/v1/approvals?status=pending", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	list, _ := body["approvals"].([]any)
	return list
}

// requireStopAfterLastCommand checks in the simulator's command log that
// the last motion command it accepted was followed by a stop.
func requireStopAfterLastCommand(t *testing.T, h *harness) {
	t.Helper()
	log := h.sim.CommandLog()
	lastCmd, lastStop := -1, -1
	for i, e := range log {
		switch {
		case e.Op == "command" && e.Accepted && !e.Duplicate:
			lastCmd = i
		case e.Op == "stop":
			lastStop = i
		}
	}
	require.GreaterOrEqual(t, lastCmd, 0, "no command was accepted: %v", log)
	require.Greater(t, lastStop, lastCmd, "no stop after the last command: %v", log)
}

// requireErrorBody checks the error of an HTTP-layer refusal (no envelope,
// no robot state) and returns it.
func requireErrorBody(t *testing.T, body map[string]any, want string) map[string]any {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "body: %v", body)
	require.Equal(t, want, e["type"], "body: %v", body)
	require.NotEmpty(t, e["suggestion"])
	return e
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
	envs := make([]map[string]any, 20)
	for i := range envs {
		wg.Go(func() { envs[i] = h.call("move_base_to", body) })
	}
	wg.Wait()
	ids := make([]string, len(envs))
	for i, env := range envs {
		ids[i] = taskID(t, env)
	}
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
