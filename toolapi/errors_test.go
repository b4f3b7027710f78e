package toolapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// submitFails makes every Submit fail with err.
func submitFails(err error) func(*harness) {
	return func(h *harness) {
		h.tasks.SubmitFn = func(context.Context, actions.Request) (actions.TaskView, error) { return actions.TaskView{}, err }
	}
}

// taskEnds makes every Submit create a task that, once waited for, ended
// in status with err.
func taskEnds(status fsm.State, err *toolerr.Error) func(*harness) {
	return func(h *harness) {
		h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
			return actions.TaskView{ID: "t-9", Tool: r.Tool, Arguments: r.Arguments, Status: fsm.Executing}, nil
		}
		h.tasks.WaitFn = func(context.Context, string, time.Duration) (actions.TaskView, error) {
			return actions.TaskView{ID: "t-9", Tool: "move_base_to", Status: status, Error: err, Text: "the task ended"}, nil
		}
	}
}

var moveOK = args(map[string]any{"x": 1.0, "y": 2.0})

// TestErrorTypes_EveryTypeThroughHTTP produces every error type of the
// closed taxonomy through the public HTTP API and checks what an agent
// relies on: the type, its retry rule, a suggestion and the robot's state.
func TestErrorTypes_EveryTypeThroughHTTP(t *testing.T) {
	cases := []struct {
		name  string
		want  toolerr.Type
		setup func(*harness)
		// run makes the call(s); the last envelope is checked.
		run func(*harness) testEnvelope
	}{
		{
			name: "invalid params are ours", want: toolerr.InvalidParams,
			run: func(h *harness) testEnvelope { return h.call("move_base_to", args(map[string]any{"x": 99})) },
		},
		{
			name: "unknown tool is ours", want: toolerr.UnknownTool,
			run: func(h *harness) testEnvelope { return h.call("mvoe_base_to", moveOK) },
		},
		{
			name: "not found comes from the runner", want: toolerr.NotFound,
			setup: submitFails(toolerr.New(toolerr.NotFound, "no object %q was seen recently", "ghost")),
			run:   func(h *harness) testEnvelope { return h.call("grasp", args(map[string]any{"object_id": "ghost"})) },
		},
		{
			name: "permission denied comes from the runner", want: toolerr.PermissionDenied,
			setup: submitFails(toolerr.New(toolerr.PermissionDenied, "this session may not move the arm")),
			run:   func(h *harness) testEnvelope { return h.call("move_arm_to", args(map[string]any{"pose": "ready"})) },
		},
		{
			name: "approval pending after wait_ms is ours", want: toolerr.ApprovalPending,
			run: func(h *harness) testEnvelope {
				return h.call("move_base_to", map[string]any{"arguments": map[string]any{"location": "table"}, "wait_ms": 100})
			},
		},
		{
			name: "approval denied carries the task's error", want: toolerr.ApprovalDenied,
			setup: taskEnds(fsm.Denied, toolerr.New(toolerr.ApprovalDenied, "operator ann denied: the table is being cleaned")),
			run: func(h *harness) testEnvelope {
				return h.call("move_base_to", map[string]any{"arguments": moveOK["arguments"], "wait_ms": 50})
			},
		},
		{
			name: "approval expired without a runner error", want: toolerr.ApprovalExpired,
			setup: taskEnds(fsm.Expired, nil),
			run: func(h *harness) testEnvelope {
				return h.call("move_base_to", map[string]any{"arguments": moveOK["arguments"], "wait_ms": 50})
			},
		},
		{
			name: "safety violation comes from the supervisor", want: toolerr.SafetyViolation,
			setup: submitFails(toolerr.New(toolerr.SafetyViolation, "target (4.0, -4.0) is in the keep-out region stairs").With("limit", "keep_out")),
			run: func(h *harness) testEnvelope {
				return h.call("move_base_to", args(map[string]any{"x": 4.0, "y": -4.0}))
			},
		},
		{
			name: "estop comes from the supervisor", want: toolerr.EStopActive,
			setup: submitFails(toolerr.New(toolerr.EStopActive, "the e-stop is latched")),
			run:   func(h *harness) testEnvelope { return h.call("release", nil) },
		},
		{
			name: "robot busy comes from the runner", want: toolerr.RobotBusy,
			setup: submitFails(toolerr.New(toolerr.RobotBusy, "task t-1 (move_base_to) is executing").With("task_id", "t-1")),
			run:   func(h *harness) testEnvelope { return h.call("move_base_to", moveOK) },
		},
		{
			name: "timeout is a task that timed out", want: toolerr.Timeout,
			setup: taskEnds(fsm.Recovered, toolerr.New(toolerr.Timeout, "the base did not reach (1, 2) in 8 s; it was stopped and the arm stowed")),
			run: func(h *harness) testEnvelope {
				return h.call("move_base_to", map[string]any{"arguments": moveOK["arguments"], "wait_ms": 50})
			},
		},
		{
			name: "action failed is a task that failed", want: toolerr.ActionFailed,
			setup: taskEnds(fsm.Failed, toolerr.New(toolerr.ActionFailed, "the gripper closed on nothing")),
			run: func(h *harness) testEnvelope {
				return h.call("grasp", map[string]any{"arguments": map[string]any{"object_id": "red_cup"}, "wait_ms": 50})
			},
		},
		{
			name: "unavailable when the robot state cannot be read", want: toolerr.Unavailable,
			setup: func(h *harness) {
				h.robot.LatestFn = func(context.Context) (robot.State, error) { return robot.State{}, errors.New("link down") }
			},
			run: func(h *harness) testEnvelope { return h.call("get_robot_state", nil) },
		},
		{
			name: "rate limited is ours", want: toolerr.RateLimited,
			run: func(h *harness) testEnvelope {
				var env testEnvelope
				for range 41 { // burst 40
					env = h.call("get_robot_state", map[string]any{"session_id": "s"})
				}
				return env
			},
		},
		{
			name: "conflict is ours", want: toolerr.Conflict,
			run: func(h *harness) testEnvelope {
				h.call("move_base_to", map[string]any{"arguments": map[string]any{"x": 1, "y": 1}, "idempotency_key": "k"})
				return h.call("move_base_to", map[string]any{"arguments": map[string]any{"x": 2, "y": 1}, "idempotency_key": "k"})
			},
		},
		{
			name: "loop detected is ours", want: toolerr.LoopDetected,
			run: func(h *harness) testEnvelope {
				h.call("move_base_to", args(map[string]any{"x": 99}))
				h.call("move_base_to", args(map[string]any{"x": 99}))
				return h.call("move_base_to", args(map[string]any{"x": 99}))
			},
		},
		{
			name: "internal hides a plain error", want: toolerr.Internal,
			setup: submitFails(errors.New("sql: database is locked at /var/lib/secret.db")),
			run:   func(h *harness) testEnvelope { return h.call("move_base_to", moveOK) },
		},
	}
	covered := map[toolerr.Type]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a bridge with fakes behind it
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			// When the agent makes the call
			env := tc.run(h)
			// Then it gets a structured failure it can act on
			require.False(t, env.OK)
			require.NotNil(t, env.Error)
			require.Equal(t, tc.want, env.Error.Type, env.Error.Message)
			require.Equal(t, toolerr.InfoOf(tc.want).Retryable, env.Error.Retryable)
			require.NotEmpty(t, env.Error.Suggestion)
			require.NotEmpty(t, env.Error.Message)
			require.NotEmpty(t, env.Robot, "every envelope says where the robot is")
			require.NotContains(t, env.Error.Message, "/var/lib", "no internals leak")
			if env.Error.Retryable && tc.want != toolerr.Internal && tc.want != toolerr.RobotBusy {
				require.Positive(t, env.Error.RetryAfterMS, "retryable errors say when to come back")
			}
			covered[tc.want] = true
		})
	}
	// PERMISSION_DENIED also comes from the HTTP layer: see TestAuth.
	for _, typ := range toolerr.Types() {
		require.True(t, covered[typ], "no test produces %s", typ)
	}
}

func TestMoveBaseTo_XOutOfRange_NamesFieldAndRange(t *testing.T) {
	// Given the sim robot in a 10 m room
	h := newHarness(t)
	// When the model asks for x=99 and no y
	env := h.call("move_base_to", args(map[string]any{"x": 99}))
	// Then INVALID_PARAMS names x, what was received and the allowed range
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Equal(t, "x", env.Error.Details["field"])
	require.EqualValues(t, 99, env.Error.Details["received"])
	require.Contains(t, env.Error.Details["allowed"], "[-5, 5]")
	require.Contains(t, env.Error.Message, "x=99")
	require.Contains(t, env.Error.Message, "[-5, 5]")
	require.Zero(t, h.tasks.submits.Load(), "nothing reaches the runner")
}

func TestValidation_Messages(t *testing.T) {
	cases := []struct {
		name    string
		tool    string
		args    map[string]any
		field   string
		contain string
	}{
		{"missing required", "get_task", map[string]any{}, "task_id", "missing required field"},
		{"unknown field", "move_base_to", map[string]any{"x": 1, "y": 1, "speed": 2}, "speed", "allowed fields"},
		{"bad enum", "move_base_to", map[string]any{"location": "kitchen"}, "location", "one of dock, home, table"},
		{"wrong type", "move_base_to", map[string]any{"x": "1", "y": 1}, "x", "wrong type"},
		{"both forms", "move_base_to", map[string]any{"x": 1, "y": 1, "location": "home"}, "arguments", "mix two ways"},
		{"location with heading", "move_base_to", map[string]any{"theta_deg": 1, "location": "home"}, "arguments", "mix two ways"},
		{"x without y", "move_base_to", map[string]any{"x": 1}, "y", "missing required field \"y\""},
		{"neither form", "move_arm_to", map[string]any{}, "arguments", "give joints"},
		{"no arguments to move the base", "move_base_to", map[string]any{}, "arguments", "no arguments given; give x and y (and optionally theta_deg), or location alone (one of dock, home, table), not both"},
		{"heading alone", "move_base_to", map[string]any{"theta_deg": 90}, "x", "missing required field \"x\""},
		{"pose and joints", "move_arm_to", map[string]any{"pose": "ready", "joints": map[string]any{"elbow": 1.0}}, "arguments", "mix two ways of calling it: give joints (an object of joint name to radians), or pose alone (one of reach_table, ready, stowed), not both"},
		{"joint out of limits", "move_arm_to", map[string]any{"joints": map[string]any{"elbow": 3.0}}, "joints.elbow", "[-2.6, 2.6]"},
		{"unknown joint", "move_arm_to", map[string]any{"joints": map[string]any{"knee": 1.0}}, "joints.knee", "allowed fields"},
		{"unknown pose", "move_arm_to", map[string]any{"pose": "dab"}, "pose", "one of reach_table, ready, stowed"},
		{"bad object id", "grasp", map[string]any{"object_id": "a b"}, "object_id", "matching"},
		{"args to a no-arg tool", "release", map[string]any{"force": 1}, "force", "no arguments"},
		{"wait too long", "get_task", map[string]any{"task_id": "t-1", "wait_ms": 1e9}, "wait_ms", "[0, 60000]"},
		{"empty label", "describe_scene", map[string]any{"label": ""}, "label", "of 1 to 64 characters (not empty)"},
	}
	reg, err := NewRegistry(loadSimConfig(t))
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool, ok := reg.Lookup(tc.tool)
			require.True(t, ok)
			te := tool.Validate(tc.args)
			require.NotNil(t, te)
			require.Equal(t, toolerr.InvalidParams, te.Type)
			require.Equal(t, tc.field, te.Details["field"], te.Message)
			require.Contains(t, te.Message, tc.contain)
			require.NotEmpty(t, te.Details["allowed"])
			if tl := tool; len(tl.forms) > 0 && tc.field == "arguments" {
				require.Contains(t, te.SuggestionText(), tl.formsHint, "the suggestion says which form to use")
			}
		})
	}
	t.Run("valid forms pass", func(t *testing.T) {
		for tool, a := range map[string]map[string]any{
			"move_base_to":          {"x": 1, "y": -1, "theta_deg": 90},
			"move_base_to/xy":       {"x": 1, "y": -1},
			"move_base_to/location": {"location": "home"},
			"move_arm_to/pose":      {"pose": "ready"},
			"move_arm_to":           {"joints": map[string]any{"elbow": -1.0}},
			"grasp":                 {"object_id": "red_cup"},
			"stop":                  {},
		} {
			tl, _ := reg.Lookup(strings.Split(tool, "/")[0])
			require.Nil(t, tl.Validate(a), tool)
		}
	})
}

func TestUnknownTool_SuggestsClosest(t *testing.T) {
	h := newHarness(t)
	env := h.call("mvoe_base_to", moveOK)
	require.Equal(t, toolerr.UnknownTool, env.Error.Type)
	require.Equal(t, "move_base_to", env.Error.Details["closest"].([]any)[0])
	require.Contains(t, env.Error.Suggestion, "move_base_to")
}

func TestAuth(t *testing.T) {
	h := newHarness(t, func(c *Conf) { c.Ready = func(context.Context) error { return errors.New("store not writable") } })
	h.srv.Mount("POST /v1/approvals/{id}/approve", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFromRequest(r)
		if !ok {
			t.Error("the handler ran without a principal")
		}
		writeJSON(w, http.StatusOK, map[string]any{"by": p.Name})
	}), RoleOperator)
	cases := []struct {
		name, method, path, token string
		status                    int
	}{
		{"no token", "GET", "/v1/tools", "", http.StatusUnauthorized},
		{"wrong token", "GET", "/v1/tools", "nope-nope-nope-nope", http.StatusUnauthorized},
		{"no token on an unknown v1 route", "GET", "/v1/secret", "", http.StatusUnauthorized},
		{"agent token", "GET", "/v1/tools", testTokens.Agent, http.StatusOK},
		{"operator may do what the agent may", "GET", "/v1/tools", testTokens.Operator, http.StatusOK},
		{"agent on an operator route", "POST", "/v1/approvals/a1/approve", testTokens.Agent, http.StatusForbidden},
		{"operator on an operator route", "POST", "/v1/approvals/a1/approve", testTokens.Operator, http.StatusOK},
		{"healthz is public", "GET", "/healthz", "", http.StatusOK},
		{"readyz is public and says why", "GET", "/readyz", "", http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.do(tc.method, tc.path, tc.token, nil)
			require.Equal(t, tc.status, status, string(body))
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				env := decodeEnv(t, body)
				require.Equal(t, toolerr.PermissionDenied, env.Error.Type)
				require.False(t, env.Error.Retryable)
				require.NotEmpty(t, env.Error.Suggestion)
				require.Empty(t, env.Robot, "an unauthenticated caller learns nothing about the robot")
			}
		})
	}
}
