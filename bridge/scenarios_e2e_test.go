package bridge

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
)

// One scenario table, four protocols (issue 12 item 8): every scenario an
// agent can meet — a state tool's answer, an action approved by the
// operator, each error type, approval pending, denied and expired, a call
// an operator's grant covers, an idempotent replay, the e-stop, a busy
// robot, the loop guard, a real timeout — is played through HTTP, gRPC,
// Connect and MCP, each run on a bridge of its own (its own data dir,
// simulator and guard: no fault, latch, loop count or task leaks from one
// run to another). Each run asserts the one outcome its row names; then
// every protocol's envelopes are compared with HTTP's field by field,
// normalising only what must differ between two runs (ids, timestamps,
// durations, positions the simulator reaches a millimetre apart).

// protocolScenario is one row of the table.
type protocolScenario struct {
	name string
	// edit adjusts the config of each run's bridge (optional).
	edit func(*hwconfig.Config)
	// run plays the row on a fresh bridge through a, asserts its outcome
	// (and what the simulator did), and returns the envelopes the agent
	// got, in order, for the comparison across protocols.
	run func(t *testing.T, h *harness, a *protoAgent) []map[string]any
}

func TestE2E_ScenarioTableOnEveryProtocol(t *testing.T) {
	for _, sc := range protocolScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got = map[agentProtocol][]map[string]any{}
			)
			t.Run("runs", func(t *testing.T) {
				for _, p := range agentProtocols {
					t.Run(string(p), func(t *testing.T) {
						t.Parallel()
						// Given a bridge of its own on a robot at rest
						h := startHarness(t, sc.edit)
						// whose supervisor has the robot's state: /readyz
						// judges by the driver's newest state, which the
						// supervisor (the gate of every motion) receives a
						// moment later, and a motion requested in between is
						// refused UNAVAILABLE.
						require.Eventually(t, func() bool { return h.b.Supervisor().Status().HaveState }, 5*time.Second, 5*time.Millisecond)
						requireCleanAtRest(t, h)
						a := newProtoAgent(t, h.base, h.agent, p)
						// When the row is played over p (and Then its outcome)
						envs := sc.run(t, h, a)
						mu.Lock()
						got[p] = envs
						mu.Unlock()
					})
				}
			})
			// Then every protocol answered what HTTP answered
			requireSameEnvelopes(t, got)
		})
	}
}

func protocolScenarios() []protocolScenario {
	return []protocolScenario{
		{name: "get_robot_state answers with the robot's state", run: func(t *testing.T, _ *harness, a *protoAgent) []map[string]any {
			env := a.mustCall(t, toolCallSpec{Tool: "get_robot_state", Session: "state"})
			require.Equal(t, true, env["ok"], "%v", env)
			require.Nil(t, env["error"])
			data := taskData(env)
			require.Equal(t, true, data["link_up"], "%v", data)
			require.Equal(t, "stopped", data["condition"], "%v", data)
			require.Contains(t, data["base"], "x")
			require.True(t, strings.HasPrefix(env["text"].(string), "The robot is stopped at "), "%v", env["text"])
			requireRobotAtRest(t, env, "")
			return []map[string]any{env}
		}},

		{name: "an action awaits the operator, is approved, and runs to its end", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			call := a.mustCall(t, toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 0.3, "y": 0.0}, Session: "approved"})
			require.Equal(t, true, call["ok"], "%v", call)
			id := requireTaskStatus(t, call, "awaiting_approval")
			requireRobotAtRest(t, call, id+" (move_base_to)")
			require.Zero(t, simLogMotions(h), "nothing moves before the operator approves")
			// When the operator approves it over the operator HTTP API
			h.approve(id)
			done := a.waitTask(t, id, "approved")
			// Then the task succeeded, and the robot moved once, to x=0.3
			require.Equal(t, "succeeded", taskData(done)["status"], "%v", done)
			requireTaskStatus(t, done, "succeeded")
			require.Nil(t, taskData(done)["error"])
			requireRobotAtRest(t, done, "")
			require.Equal(t, 1, simLogMotions(h))
			require.InDelta(t, 0.3, h.sim.Truth().Base.X, 0.06)
			return []map[string]any{call, done}
		}},

		{name: "INVALID_PARAMS names the field, the value and the allowed range", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			env := a.mustCall(t, toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 99, "y": 0}, Session: "invalid"})
			e := requireEnvelopeError(t, env, "INVALID_PARAMS", false)
			d := e["details"].(map[string]any)
			require.Equal(t, "x", d["field"])
			require.EqualValues(t, 99, d["received"])
			require.Contains(t, d["allowed"], "[-5, 5]")
			require.Nil(t, env["task"], "no task for an invalid call")
			requireRobotAtRest(t, env, "")
			requireNothingFiledNothingMoved(t, h)
			return []map[string]any{env}
		}},

		{name: "UNKNOWN_TOOL offers the closest name", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			env := a.mustCall(t, toolCallSpec{Tool: "mvoe_base_to", Args: map[string]any{"x": 1, "y": 0}, Session: "unknown"})
			e := requireEnvelopeError(t, env, "UNKNOWN_TOOL", false)
			require.Contains(t, e["details"].(map[string]any)["closest"], "move_base_to")
			requireRobotAtRest(t, env, "")
			requireNothingFiledNothingMoved(t, h)
			return []map[string]any{env}
		}},

		{name: "NOT_FOUND for an unknown task", run: func(t *testing.T, _ *harness, a *protoAgent) []map[string]any {
			env := a.mustCall(t, toolCallSpec{Tool: "get_task", Args: map[string]any{"task_id": "task-nope"}, Session: "notfound"})
			e := requireEnvelopeError(t, env, "NOT_FOUND", false)
			require.Equal(t, "task-nope", e["details"].(map[string]any)["task_id"])
			requireRobotAtRest(t, env, "")
			return []map[string]any{env}
		}},

		{name: "SAFETY_VIOLATION for a keep-out target, before any operator is asked", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			// The stairs are a keep-out region inside the room's schema range.
			env := a.mustCall(t, toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 4.0, "y": -4.0}, Session: "safety"})
			e := requireEnvelopeError(t, env, "SAFETY_VIOLATION", false)
			require.Contains(t, strings.ToLower(e["message"].(string)), "keep")
			require.Nil(t, env["task"])
			requireRobotAtRest(t, env, "")
			requireNothingFiledNothingMoved(t, h)
			return []map[string]any{env}
		}},

		{name: "APPROVAL_PENDING after wait_ms without a decision", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			env := a.mustCall(t, toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, Session: "pending", WaitMS: 100})
			e := requireEnvelopeError(t, env, "APPROVAL_PENDING", true)
			require.Contains(t, e["suggestion"], "get_task")
			id := requireTaskStatus(t, env, "awaiting_approval")
			require.Equal(t, id, e["details"].(map[string]any)["task_id"])
			requireRobotAtRest(t, env, id+" (move_arm_to)")
			h.pendingApproval(id)
			requireNothingMoved(t, h)
			return []map[string]any{env}
		}},

		{name: "APPROVAL_DENIED carries the operator's reason to the waiting call", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			// Given an action call that waits for its task
			waiting := a.callAsync(toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, Session: "denied", WaitMS: 30000})
			// When the operator denies its request with a reason
			apr := firstPendingApproval(h)
			code, body := h.do(http.MethodPost, "/v1/approvals/"+apr["id"].(string)+"/deny", h.operator,
				map[string]any{"reason": "someone is standing next to the arm"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			// Then the call answers APPROVAL_DENIED with the reason, and nothing moved
			env := await(t, waiting)
			e := requireEnvelopeError(t, env, "APPROVAL_DENIED", false)
			require.Contains(t, e["message"], `"someone is standing next to the arm"`)
			require.Equal(t, apr["task_id"], requireTaskStatus(t, env, "denied"))
			requireRobotAtRest(t, env, "")
			requireNothingMoved(t, h)
			return []map[string]any{env}
		}},

		{
			name: "APPROVAL_EXPIRED when no operator decides in time",
			edit: func(c *hwconfig.Config) { c.Safety.ApprovalTTL = hwconfig.Duration(300 * time.Millisecond) },
			run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
				env := a.mustCall(t, toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, Session: "expired", WaitMS: 20000})
				requireEnvelopeError(t, env, "APPROVAL_EXPIRED", false)
				requireTaskStatus(t, env, "expired")
				requireRobotAtRest(t, env, "")
				requireNothingFiledNothingMoved(t, h)
				return []map[string]any{env}
			},
		},

		{name: "a call the operator's scoped grant covers runs on the grant and says so", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			// Given the operator's grant for base motions inside a rectangle
			grant := grantBase(t, h)
			// When the agent drives inside it and waits for the task
			env := a.mustCall(t, toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 0.3, "y": 0.0}, Session: "grant", WaitMS: 30000})
			// Then the call answers with the status the task has — it ran
			// to its end — approved by that grant, no operator asked
			require.Equal(t, true, env["ok"], "%v", env)
			requireTaskStatus(t, env, "succeeded")
			by := taskData(env)["approved_by_grant"].(map[string]any)
			require.Equal(t, grant, by["id"])
			require.Equal(t, "operator", by["granted_by"])
			text := env["text"].(string)
			require.True(t, strings.HasPrefix(text, "Approved by "), text)
			require.Contains(t, text, " grant "+grant+" ")
			require.NotContains(t, text, "waiting for an operator")
			requireRobotAtRest(t, env, "")
			require.Empty(t, pendingApprovals(t, h), "no operator was asked")
			require.Equal(t, 1, simLogMotions(h))
			return []map[string]any{env}
		}},

		{name: "the same idempotency key is the same task and one motion", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			spec := toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 0.3, "y": 0.0}, Session: "replay", Key: "replay-1"}
			first := a.mustCall(t, spec)
			require.Equal(t, true, first["ok"], "%v", first)
			id := requireTaskStatus(t, first, "awaiting_approval")
			// When the call is repeated with the same key
			again := a.mustCall(t, spec)
			// Then it is the same task, with one request for the operator
			require.Equal(t, true, again["ok"], "%v", again)
			require.Equal(t, id, requireTaskStatus(t, again, "awaiting_approval"))
			require.Equal(t, 1, approvalCount(t, h))
			h.approve(id)
			done := a.waitTask(t, id, "replay")
			require.Equal(t, "succeeded", taskData(done)["status"], "%v", done)
			// And a repeat after the end still answers that finished task
			late := a.mustCall(t, spec)
			require.Equal(t, true, late["ok"], "%v", late)
			require.Equal(t, id, requireTaskStatus(t, late, "succeeded"))
			// And the simulator's command log holds exactly one motion
			require.Equal(t, 1, simLogMotions(h))
			require.Equal(t, 1, approvalCount(t, h))
			return []map[string]any{first, again, done, late}
		}},

		{name: "CONFLICT when a key is reused with other arguments", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			first := a.mustCall(t, toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, Session: "conflict", Key: "conflict-1"})
			id := requireTaskStatus(t, first, "awaiting_approval")
			env := a.mustCall(t, toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "reach_table"}, Session: "conflict", Key: "conflict-1"})
			e := requireEnvelopeError(t, env, "CONFLICT", false)
			d := e["details"].(map[string]any)
			require.Equal(t, "conflict-1", d["idempotency_key"])
			require.Equal(t, id, d["original_task_id"])
			requireRobotAtRest(t, env, id+" (move_arm_to)")
			require.Len(t, pendingApprovals(t, h), 1, "nothing was filed for the conflicting call")
			requireNothingMoved(t, h)
			return []map[string]any{first, env}
		}},

		{name: "ESTOP_ACTIVE while the e-stop is latched", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			code, body := h.do(http.MethodPost, "/v1/estop", h.agent, map[string]any{"reason": "person in the aisle"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			env := a.mustCall(t, toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, Session: "estop"})
			e := requireEnvelopeError(t, env, "ESTOP_ACTIVE", false)
			require.Contains(t, e["message"], "person in the aisle")
			requireRobotAtRest(t, env, "")
			requireNothingFiledNothingMoved(t, h)
			return []map[string]any{env}
		}},

		{name: "ROBOT_BUSY names the task holding the robot", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			first := a.mustCall(t, toolCallSpec{Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, Session: "busy"})
			id := requireTaskStatus(t, first, "awaiting_approval")
			env := a.mustCall(t, toolCallSpec{Tool: "move_base_to", Args: map[string]any{"location": "table"}, Session: "busy"})
			e := requireEnvelopeError(t, env, "ROBOT_BUSY", true)
			require.Contains(t, e["message"], id)
			require.Equal(t, id, e["details"].(map[string]any)["task_id"])
			requireRobotAtRest(t, env, id+" (move_arm_to)")
			require.Len(t, pendingApprovals(t, h), 1, "no request was filed for the refused call")
			requireNothingMoved(t, h)
			return []map[string]any{first, env}
		}},

		{name: "LOOP_DETECTED on the third identical failure", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			spec := toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 4.0, "y": -4.0}, Session: "looper"}
			one := a.mustCall(t, spec)
			requireEnvelopeError(t, one, "SAFETY_VIOLATION", false)
			two := a.mustCall(t, spec)
			requireEnvelopeError(t, two, "SAFETY_VIOLATION", false)
			three := a.mustCall(t, spec)
			e := requireEnvelopeError(t, three, "LOOP_DETECTED", false)
			require.Contains(t, e["suggestion"], "tell the user")
			requireRobotAtRest(t, three, "")
			requireNothingFiledNothingMoved(t, h)
			return []map[string]any{one, two, three}
		}},

		{
			name: "RATE_LIMITED past the session's burst",
			run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
				// toolapi.Conf's defaults: a burst of 40 at 20 calls/s per session.
				const burst = 40
				n := 0
				var last map[string]any
				for n < 10*burst {
					n++
					last = a.mustCall(t, toolCallSpec{Tool: "list_named_poses", Session: "chatty"})
					if last["ok"] != true {
						break
					}
				}
				requireEnvelopeError(t, last, "RATE_LIMITED", true)
				require.Greater(t, n, burst, "the first %d calls of a session are never limited", burst)
				requireRobotAtRest(t, last, "")
				requireNothingFiledNothingMoved(t, h)
				return []map[string]any{last}
			},
		},

		{
			name: "TIMEOUT from a real deadline, stopped short, with what recovery did",
			// A one-second bound on a drive that needs about five.
			edit: func(c *hwconfig.Config) {
				c.Actions["move_base_to"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalRequired, Timeout: hwconfig.Duration(time.Second)}
			},
			run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
				// Given a drive the operator approves while the call waits
				waiting := a.callAsync(toolCallSpec{Tool: "move_base_to", Args: map[string]any{"x": 3.0, "y": 0.0}, Session: "timeout", WaitMS: 30000})
				apr := firstPendingApproval(h)
				code, body := h.do(http.MethodPost, "/v1/approvals/"+apr["id"].(string)+"/approve", h.operator, map[string]any{})
				require.Equal(t, http.StatusOK, code, "%v", body)
				// Then the call answers TIMEOUT once recovery is done
				env := await(t, waiting)
				e := requireEnvelopeError(t, env, "TIMEOUT", false)
				require.Equal(t, "deadline", e["details"].(map[string]any)["monitor"])
				msg := e["message"].(string)
				require.Contains(t, msg, "move_base_to timed out")
				require.Contains(t, msg, "arm already in stowed, base stopped", "what recovery did")
				require.Equal(t, apr["task_id"], requireTaskStatus(t, env, "recovered"))
				requireRobotAtRest(t, env, "")
				// And the base drove part of the way, once, and was stopped
				require.Greater(t, h.sim.Odometer().BaseDistance, 0.05, "the base drove")
				require.Less(t, h.sim.Odometer().BaseDistance, 2.5, "the base was stopped well short of 3 m")
				require.Equal(t, 1, simLogMotions(h))
				requireStopAfterLastCommand(t, h)
				return []map[string]any{env}
			},
		},

		{name: "UNAVAILABLE while the robot link is down, with the last known state", run: func(t *testing.T, h *harness, a *protoAgent) []map[string]any {
			_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
			require.NoError(t, err)
			// (The link comes back before the bridge's final stop.)
			t.Cleanup(func() { h.sim.ClearFaults() })
			require.Eventually(t, func() bool { return !h.b.Supervisor().Status().LinkUp }, 5*time.Second, 10*time.Millisecond)
			env := a.mustCall(t, toolCallSpec{Tool: "get_robot_state", Session: "linkdown"})
			e := requireEnvelopeError(t, env, "UNAVAILABLE", true)
			require.Equal(t, true, e["details"].(map[string]any)["last_known"], "%v", e)
			data := taskData(env)
			require.NotNil(t, data, "the last known state is in data: %v", env)
			require.Equal(t, false, data["link_up"])
			require.Contains(t, data, "state_age_ms")
			require.Contains(t, env["text"], "last known")
			require.Contains(t, env["robot"], "robot link down")
			return []map[string]any{env}
		}},
	}
}
