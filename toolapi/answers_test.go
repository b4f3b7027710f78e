package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestErrorBody_EveryRetryableTypeCarriesARetryAfter(t *testing.T) {
	for _, typ := range toolerr.Types() {
		t.Run(string(typ), func(t *testing.T) {
			// Given an error of the type whose producer set no wait
			body := ErrorBodyOf(&toolerr.Error{Type: typ, Message: "m"})
			// Then a retryable one says how long to wait, and one that must
			// not be retried says 0
			if toolerr.InfoOf(typ).Retryable {
				require.True(t, body.Retryable)
				require.Positive(t, body.RetryAfterMS)
			} else {
				require.False(t, body.Retryable)
				require.Zero(t, body.RetryAfterMS)
			}
			// And a producer's own wait is kept for a retryable type
			body = ErrorBodyOf(&toolerr.Error{Type: typ, Message: "m", RetryAfter: 1500 * time.Millisecond})
			if body.Retryable {
				require.EqualValues(t, 1500, body.RetryAfterMS)
			}
		})
	}
}

func TestRobotBusyWithoutAWait_ReachesTheAgentWithOne(t *testing.T) {
	// Given a runner that refuses a motion as busy and names no wait
	h := newHarness(t)
	submitFails(toolerr.New(toolerr.RobotBusy, "task t-1 (move_base_to) is executing"))(h)
	// When the agent calls a motion
	env := h.call("move_base_to", moveOK)
	// Then the envelope tells it to wait before retrying
	require.Equal(t, toolerr.RobotBusy, env.Error.Type)
	require.True(t, env.Error.Retryable)
	require.Equal(t, toolerr.DefaultRetryAfter(toolerr.RobotBusy).Milliseconds(), env.Error.RetryAfterMS)
	require.Positive(t, env.Error.RetryAfterMS)
}

func TestClosest_OffersOnlyNamesThatAreCloseAndNeverMotionForAReadOnlyName(t *testing.T) {
	reg, err := NewRegistry(loadSimConfig(t))
	require.NoError(t, err)
	cases := []struct {
		in   string
		want []string // all offered; nil: none is close enough
	}{
		{"mvoe_base_to", []string{"move_base_to"}},
		{"move_base", []string{"move_base_to"}},
		{"getRobotState", []string{"get_robot_state"}},
		{"get-robot-state", []string{"get_robot_state"}},
		{"get_robot_status", []string{"get_robot_state"}},
		{"get_task_state", []string{"get_task"}},
		{"STOP", []string{"stop"}},
		{"emergency_stop", []string{"stop"}},
		{"cancel", []string{"cancel_task"}},
		{"grab", []string{"grasp"}},
		// no tool is close: nothing is offered, least of all a motion
		{"fly", nil},
		{"dance", nil},
		{"get_weather", nil},
		{"list_tools", nil},
		{"", nil},
		// read-only-sounding names are offered state tools only
		{"get_state", []string{"get_robot_state"}},
		{"get_pose", []string{"list_named_poses"}},
		{"read_state", []string{"get_robot_state"}},
		{"show_poses", []string{"list_named_poses"}},
		{"get_move_base_to", nil},
		{"list_grasp", nil},
		{"describe_release", nil},
		{"safety_status", []string{"get_safety_status"}},
	}
	motion := map[string]bool{ToolMoveBaseTo: true, ToolMoveArmTo: true, ToolGrasp: true, ToolRelease: true, ToolReturnToSafePose: true}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got := reg.Closest(tc.in, 3)
			if tc.want == nil {
				require.Empty(t, got)
				return
			}
			require.Subset(t, got, tc.want)
			if soundsReadOnly(normalizeToolName(tc.in)) {
				for _, g := range got {
					require.False(t, motion[g], "%s offered for the read-only %q", g, tc.in)
				}
			}
		})
	}
}

func TestUnknownTool_NothingCloseListsTheToolsInstead(t *testing.T) {
	// Given a bridge
	h := newHarness(t)
	// When the model calls a tool no name resembles
	env := h.call("fly", args(map[string]any{}))
	// Then it is UNKNOWN_TOOL offering nothing, listing what exists
	require.Equal(t, toolerr.UnknownTool, env.Error.Type)
	require.Empty(t, env.Error.Details["closest"])
	require.NotContains(t, env.Error.Message, "did you mean")
	require.Contains(t, env.Error.Message, "no tool has a similar name")
	require.NotContains(t, env.Error.Suggestion, "call stop")
	require.Len(t, env.Error.Details["available"], len(h.srv.Registry().Tools()))
}

// connClient is an HTTP client with a connection of its own.
func connClient() *http.Client { return &http.Client{Transport: &http.Transport{}} }

func postCall(t *testing.T, c *http.Client, url, tool string, body any) testEnvelope {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", url+"/v1/tools/"+tool+"/call", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testTokens.Agent)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return decodeEnv(t, out)
}

func TestLoopGuard_CallsWithoutASessionAreKeyedPerConnection(t *testing.T) {
	for _, tc := range []struct {
		name        string
		connContext bool // the bridge's http.Server sets ConnContext
	}{
		{"connection ids from ConnContext", true},
		{"connections told apart by their address", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given one credential on two connections, no session ids
			h := newHarness(t) // LoopThreshold 3
			ts := httptest.NewUnstartedServer(h.srv.Handler())
			if tc.connContext {
				ts.Config.ConnContext = ConnContext
			}
			ts.Start()
			t.Cleanup(ts.Close)
			a, b := connClient(), connClient()
			t.Cleanup(a.CloseIdleConnections)
			t.Cleanup(b.CloseIdleConnections)
			bad := args(map[string]any{"x": 99, "y": 0})

			// When each connection repeats the same failing call twice
			for range 2 {
				require.Equal(t, toolerr.InvalidParams, postCall(t, a, ts.URL, "move_base_to", bad).Error.Type)
				require.Equal(t, toolerr.InvalidParams, postCall(t, b, ts.URL, "move_base_to", bad).Error.Type)
			}
			// Then neither tripped the other's loop guard, and the same
			// connection's third repeat does trip its own
			require.Equal(t, toolerr.LoopDetected, postCall(t, a, ts.URL, "move_base_to", bad).Error.Type)
			require.Equal(t, toolerr.LoopDetected, postCall(t, b, ts.URL, "move_base_to", bad).Error.Type)

			// When both connections use one session_id
			inSession := map[string]any{"arguments": map[string]any{"x": 99, "y": 1}, "session_id": "conversation-1"}
			require.Equal(t, toolerr.InvalidParams, postCall(t, a, ts.URL, "move_base_to", inSession).Error.Type)
			require.Equal(t, toolerr.InvalidParams, postCall(t, b, ts.URL, "move_base_to", inSession).Error.Type)
			// Then the session is one loop, whichever connection it is on
			require.Equal(t, toolerr.LoopDetected, postCall(t, a, ts.URL, "move_base_to", inSession).Error.Type)
		})
	}
}

func TestStrictModeNulls_AreOptionalArgumentsLeftOut(t *testing.T) {
	// Given the strict-mode schemas the bridge publishes
	h := newHarness(t)
	var tools []OpenAITool
	fetchJSON(t, h, "/v1/tools?format=openai&strict=true", &tools)
	strict := map[string]*jsonschema.Schema{}
	for _, tl := range tools {
		raw, err := json.Marshal(tl.Function.Parameters)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		require.NoError(t, err)
		c := jsonschema.NewCompiler()
		require.NoError(t, c.AddResource("urn:"+tl.Function.Name, doc))
		strict[tl.Function.Name], err = c.Compile("urn:" + tl.Function.Name)
		require.NoError(t, err)
	}
	// asStrictModel returns a strict-mode model's arguments, checked
	// against the published strict schema (the model can only emit those).
	asStrictModel := func(tool, js string) map[string]any {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(js))
		require.NoError(t, err)
		require.NoError(t, strict[tool].Validate(v), "%s is a valid strict-mode output", js)
		return decodeObject(t, js)
	}

	// When a strict model drives the base by x and y, with nulls for the rest
	env := h.call("move_base_to", keyed("k-strict", asStrictModel("move_base_to", `{"x": 1, "y": 2, "theta_deg": null, "location": null, "robot_id": null}`)))
	// Then the runner gets exactly the arguments given
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, map[string]any{"x": 1.0, "y": 2.0}, h.tasks.lastRequest().Arguments)
	// And the same call without the nulls is the same request (a replay)
	again := h.call("move_base_to", keyed("k-strict", map[string]any{"x": 1, "y": 2}))
	require.True(t, again.OK, "%+v", again.Error)
	require.Equal(t, env.Task.ID, again.Task.ID)
	require.EqualValues(t, 1, h.tasks.submits.Load())

	// When it moves the arm by one joint, nulls for the others and the pose
	env = h.call("move_arm_to", args(asStrictModel("move_arm_to", `{"pose": null, "robot_id": null, "joints": {"elbow": -1, "wrist": null, "shoulder_yaw": null, "shoulder_pitch": null}}`)))
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, map[string]any{"joints": map[string]any{"elbow": -1.0}}, h.tasks.lastRequest().Arguments)

	// When everything is null, it gave no form at all
	env = h.call("move_base_to", args(asStrictModel("move_base_to", `{"x": null, "y": null, "theta_deg": null, "location": null, "robot_id": null}`)))
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Contains(t, env.Error.Message, "give x and y (and optionally theta_deg), or location alone")
	// When both forms come, with nulls for what is left
	env = h.call("move_base_to", args(asStrictModel("move_base_to", `{"x": 1, "y": 2, "theta_deg": null, "location": "home", "robot_id": null}`)))
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Contains(t, env.Error.Message, "mix two ways")

	// When a required argument is null, it is not "absent": it is wrong
	env = h.call("get_task", args(map[string]any{"task_id": nil, "wait_ms": nil}))
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Equal(t, "task_id", env.Error.Details["field"])
	require.Contains(t, env.Error.Message, "wrong type")
	require.EqualValues(t, 2, h.tasks.submits.Load(), "no refused call reached the runner")
}

func TestGrantCoveredCall_AnswersApprovedByTheGrantWithItsRealStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		covered bool
	}{{"covered by a scoped grant", true}, {"no grant covers it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a runner that files an approval the grant (if any)
			// approves at once, and takes the approval in a moment later
			h := newHarness(t, func(c *Conf) {
				if tc.covered {
					c.GrantCover = func(id string) (GrantCover, bool) {
						g := GrantCover{
							GrantID: "grt_7", By: "ann", Scope: "move_arm_to the named poses ready, stowed",
							ExpiresAt: time.Date(2026, 1, 2, 3, 14, 5, 0, time.UTC),
						}
						return g, id == "apr_1"
					}
				}
			})
			var gets atomic.Int32
			h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
				return actions.TaskView{
					ID: "t-1", Tool: r.Tool, Arguments: r.Arguments, Status: fsm.AwaitingApproval, ApprovalID: "apr_1",
					Text: "waiting for an operator to approve: move the arm to ready",
				}, nil
			}
			h.tasks.GetFn = func(id string) (actions.TaskView, error) {
				v := actions.TaskView{
					ID: id, Tool: ToolMoveArmTo, Status: fsm.AwaitingApproval, ApprovalID: "apr_1",
					Text: "waiting for an operator to approve: move the arm to ready",
				}
				if gets.Add(1) > 2 && tc.covered {
					v.Status, v.Text = fsm.Executing, "moving the arm to ready"
					v.Progress = actions.Progress{Fraction: 0, Text: "moving the arm to ready"}
				}
				return v, nil
			}
			// When the agent asks for the covered motion
			env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}))
			require.True(t, env.OK, "%+v", env.Error)
			if !tc.covered {
				// Then, without a grant, it waits for an operator, as said
				require.Equal(t, fsm.AwaitingApproval, env.Task.Status)
				require.Contains(t, env.Text, "waiting for an operator to approve")
				require.NotContains(t, string(env.Data), "approved_by_grant")
				return
			}
			// Then it answers with the status the task really has, names
			// the grant, its scope and its end, and never says it waits
			require.Equal(t, fsm.Executing, env.Task.Status)
			require.True(t, strings.HasPrefix(env.Text,
				"Approved by ann's grant grt_7 (move_arm_to the named poses ready, stowed), valid until 03:14 UTC (10 min from now), with no operator asked. Task t-1 (move_arm_to) is executing"), env.Text)
			require.NotContains(t, env.Text, "waiting for an operator")
			var data TaskData
			require.NoError(t, json.Unmarshal(env.Data, &data))
			require.Equal(t, &GrantData{
				ID: "grt_7", By: "ann", Scope: "move_arm_to the named poses ready, stowed",
				ExpiresAt: time.Date(2026, 1, 2, 3, 14, 5, 0, time.UTC), ExpiresInMS: 600000,
			}, data.Grant)
		})
	}
}

var durationKeyRE = regexp.MustCompile(`(^|_)(age|wait|timeout|after|window|duration|expires_in|elapsed|delay|ttl)($|_)`)

// TestJSON_DurationsInMillisecondsAndNoZeroTimes reads a corpus of the
// envelopes and listings the tool API serves and requires every duration
// to carry its unit in its name (…_ms) and no absent time to be encoded
// as 0001-01-01T00:00:00Z.
func TestJSON_DurationsInMillisecondsAndNoZeroTimes(t *testing.T) {
	h := newHarness(t, func(c *Conf) {
		c.GrantCover = func(string) (GrantCover, bool) { return GrantCover{GrantID: "grt_1", By: "ann"}, true }
	})
	h.tasks.put(actions.TaskView{ID: "t-5", Tool: ToolMoveBaseTo, Status: fsm.Failed, Error: toolerr.New(toolerr.ActionFailed, "blocked")})
	var corpus [][]byte
	get := func(path string) {
		_, out := h.do("GET", path, testTokens.Agent, nil)
		corpus = append(corpus, out)
	}
	post := func(tool string, a map[string]any) {
		_, out := h.do("POST", "/v1/tools/"+tool+"/call", testTokens.Agent, args(a))
		corpus = append(corpus, out)
	}
	get("/v1/tools")
	get("/v1/tools?format=openai&strict=true")
	get("/v1/tools?format=gemini")
	post("get_robot_state", nil)
	post("list_named_poses", nil)
	post("get_safety_status", nil)
	post("stop", map[string]any{"reason": "test"})
	post("move_base_to", map[string]any{"location": "table"})
	post("get_task", map[string]any{"task_id": "t-5"})
	post("get_task", map[string]any{"task_id": "t-none"})
	post("cancel_task", map[string]any{"task_id": "t-5"})
	post("fly", nil)
	post("move_base_to", map[string]any{"x": 99})
	h.robot.up.Store(false)
	h.robot.receivedAgo(3 * time.Second)
	post("get_robot_state", nil)

	for _, raw := range corpus {
		require.NotContains(t, string(raw), "0001-01-01", string(raw))
		var v any
		require.NoError(t, json.Unmarshal(raw, &v))
		walkJSON(v, func(key string, val any) {
			if _, isNum := val.(float64); isNum && durationKeyRE.MatchString(key) {
				require.True(t, strings.HasSuffix(key, "_ms"), "duration %q without its unit in %s", key, raw)
			}
		})
	}
}

func walkJSON(v any, fn func(key string, val any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			fn(k, val)
			walkJSON(val, fn)
		}
	case []any:
		for _, val := range x {
			walkJSON(val, fn)
		}
	}
}
