package toolapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// underGrant makes h's runner approve every action at once, as an active
// scoped grant for it would: every Submit is a task that goes straight to
// executing, i.e. one motion. A second Submit of one tool call would be a
// second motion nobody was asked about.
func underGrant(h *harness) {
	h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
		v := actions.TaskView{
			ID: fmt.Sprintf("t-%d", h.tasks.submits.Load()), Tool: r.Tool, Arguments: r.Arguments, Status: fsm.Executing,
			SessionID: r.SessionID, Principal: r.Principal, Text: "approved by grant g-1 (" + r.Tool + ", 10 minutes)",
		}
		h.tasks.put(v)
		return v, nil
	}
}

// toolCallsAs posts an assistant message with token and decodes every
// answer's envelope.
func (h *harness) toolCallsAs(token string, body any) []testEnvelope {
	h.t.Helper()
	status, out := h.do("POST", "/v1/tool_calls", token, body)
	require.Equal(h.t, http.StatusOK, status, string(out))
	var res ToolCallsResult
	require.NoError(h.t, json.Unmarshal(out, &res))
	envs := make([]testEnvelope, len(res.Messages))
	for i, m := range res.Messages {
		envs[i] = decodeEnv(h.t, []byte(m.Content))
	}
	return envs
}

func message(session string, calls ...any) map[string]any {
	m := map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	if session != "" {
		m["session_id"] = session
	}
	return m
}

func TestToolCalls_RepostedAssistantMessageDoesNotMoveTwice(t *testing.T) {
	cases := []struct {
		name string
		// now is where the first call's task is when the message comes again.
		now fsm.State
	}{
		{"while the first call awaits approval", fsm.AwaitingApproval},
		{"while the first call is approved", fsm.Approved},
		{"while the first call is executing", fsm.Executing},
		{"after the first call succeeded", fsm.Succeeded},
		{"after the first call failed", fsm.Recovered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given an active grant that approves move_base_to at once
			h := newHarness(t)
			underGrant(h)
			msg := message("conv-1",
				toolCall("call_a", "get_robot_state", "{}"),
				toolCall("call_b", "move_base_to", `{"location": "table"}`))
			// And the message was posted once and moved the robot once
			first := h.toolCallsAs(testTokens.Agent, msg)
			require.True(t, first[1].OK, "%+v", first[1].Error)
			require.Equal(t, fsm.Executing, first[1].Task.Status)
			require.EqualValues(t, 1, h.tasks.submits.Load())
			h.tasks.put(actions.TaskView{ID: first[1].Task.ID, Tool: "move_base_to", Status: tc.now})

			// When the host re-posts the same message (its request timed out)
			again := h.toolCallsAs(testTokens.Agent, msg)

			// Then the action answers with the same task in its current
			// status, says nothing was sent again, and the runner was not
			// asked for a second motion
			require.NotNil(t, again[1].Task, "%+v", again[1].Error)
			require.Equal(t, first[1].Task.ID, again[1].Task.ID)
			require.Equal(t, tc.now, again[1].Task.Status)
			require.Contains(t, again[1].Text, `tool call id "call_b" in session "conv-1" was already sent`)
			require.Contains(t, again[1].Text, "nothing was sent to the robot again")
			require.EqualValues(t, 1, h.tasks.submits.Load())
			// And the state call simply ran again
			require.True(t, again[0].OK)
		})
	}
}

func TestToolCalls_ConcurrentRepostsMoveOnce(t *testing.T) {
	// Given a runner under a grant whose Submit is slow
	h := newHarness(t)
	underGrant(h)
	granted := h.tasks.SubmitFn
	gate := make(chan struct{})
	h.tasks.SubmitFn = func(ctx context.Context, r actions.Request) (actions.TaskView, error) {
		<-gate
		return granted(ctx, r)
	}
	msg := message("conv-1", toolCall("call_1", "move_base_to", `{"x": 1, "y": 1}`))
	// When the host posts the same message 10 times at once (retries
	// racing the first request)
	const n = 10
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	envs := make([][]testEnvelope, n)
	for i := range n {
		go func() {
			defer done.Done()
			started.Done()
			envs[i] = h.toolCallsAs(testTokens.Agent, msg)
		}()
	}
	started.Wait()
	close(gate)
	done.Wait()
	// Then exactly one motion was submitted and every answer names it
	require.EqualValues(t, 1, h.tasks.submits.Load())
	for _, env := range envs {
		require.True(t, env[0].OK, "%+v", env[0].Error)
		require.Equal(t, "t-1", env[0].Task.ID)
	}
}

func TestToolCalls_SameIDOtherSessionIsANewCall(t *testing.T) {
	type scope struct{ token, session, id string }
	cases := []struct {
		name string
		a, b scope
	}{
		{"another session", scope{testTokens.Agent, "conv-a", "call_1"}, scope{testTokens.Agent, "conv-b", "call_1"}},
		{"another credential", scope{testTokens.Agent, "conv-a", "call_1"}, scope{testTokens.Operator, "conv-a", "call_1"}},
		{"no session and a session", scope{testTokens.Agent, "", "call_1"}, scope{testTokens.Agent, "conv-a", "call_1"}},
		{"session and id split differently", scope{testTokens.Agent, "a", "b c"}, scope{testTokens.Agent, "a b", "c"}},
		{"session and id swapped", scope{testTokens.Agent, "x", "y"}, scope{testTokens.Agent, "y", "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a grant under which every submitted call moves the robot
			h := newHarness(t)
			underGrant(h)
			post := func(s scope) testEnvelope {
				env := h.toolCallsAs(s.token, message(s.session, toolCall(s.id, "move_base_to", `{"location": "table"}`)))[0]
				require.True(t, env.OK, "%+v", env.Error)
				return env
			}
			// When each scope posts the same call twice
			a1, a2 := post(tc.a), post(tc.a)
			b1, b2 := post(tc.b), post(tc.b)
			// Then each scope has its own task, once
			require.Equal(t, a1.Task.ID, a2.Task.ID)
			require.Equal(t, b1.Task.ID, b2.Task.ID)
			require.NotEqual(t, a1.Task.ID, b1.Task.ID)
			require.EqualValues(t, 2, h.tasks.submits.Load())
		})
	}
}

func TestToolCalls_SameIDOtherArgumentsConflict(t *testing.T) {
	cases := []struct {
		name      string
		tool      string
		arguments string
		// conflict is false when the second call is the same call.
		conflict bool
		message  string
	}{
		{
			name: "other arguments", tool: "move_base_to", arguments: `{"location": "dock"}`, conflict: true,
			message: `tool call id "call_1" in session "conv-1" was already used by a move_base_to call with other arguments (task t-1)`,
		},
		{
			name: "another tool", tool: "move_arm_to", arguments: `{"pose": "ready"}`, conflict: true,
			message: `tool call id "call_1" in session "conv-1" was already used by a move_base_to call (task t-1)`,
		},
		{name: "same arguments written differently", tool: "move_base_to", arguments: "```json\n{'location': 'table',}\n```"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a call that moved the robot under a grant
			h := newHarness(t)
			underGrant(h)
			first := h.toolCallsAs(testTokens.Agent, message("conv-1", toolCall("call_1", "move_base_to", `{"location": "table"}`)))[0]
			require.True(t, first.OK)
			// When a later message reuses its id for another call
			env := h.toolCallsAs(testTokens.Agent, message("conv-1", toolCall("call_1", tc.tool, tc.arguments)))[0]
			// Then nothing new is submitted
			require.EqualValues(t, 1, h.tasks.submits.Load())
			if !tc.conflict {
				require.True(t, env.OK, "%+v", env.Error)
				require.Equal(t, first.Task.ID, env.Task.ID)
				return
			}
			// And the answer is a CONFLICT that names the original call
			require.False(t, env.OK)
			require.NotNil(t, env.Error)
			require.Equal(t, toolerr.Conflict, env.Error.Type)
			require.False(t, env.Error.Retryable)
			require.Contains(t, env.Error.Message, tc.message)
			require.Equal(t, "call_1", env.Error.Details["tool_call_id"])
			require.Equal(t, "move_base_to", env.Error.Details["original_tool"])
			require.Equal(t, "t-1", env.Error.Details["original_task_id"])
			require.Contains(t, env.Error.Suggestion, "new id")
		})
	}
}

func TestToolCalls_DuplicateIDInOneMessageRunsOnce(t *testing.T) {
	cases := []struct {
		name  string
		calls []any
		// want is each answer's error type ("" when ok).
		want    []toolerr.Type
		submits int32
		stops   int32
	}{
		{
			name:  "the same action twice",
			calls: []any{toolCall("call_1", "move_base_to", `{"location": "table"}`), toolCall("call_1", "move_base_to", `{"location": "table"}`)},
			want:  []toolerr.Type{"", toolerr.InvalidParams}, submits: 1,
		},
		{
			name:  "two actions under one id",
			calls: []any{toolCall("call_1", "move_base_to", `{"location": "table"}`), toolCall("call_1", "move_arm_to", `{"pose": "ready"}`)},
			want:  []toolerr.Type{"", toolerr.InvalidParams}, submits: 1,
		},
		{
			name:  "a state call, then an action with its id",
			calls: []any{toolCall("call_1", "get_robot_state", `{}`), toolCall("call_1", "move_base_to", `{"location": "table"}`)},
			want:  []toolerr.Type{"", toolerr.InvalidParams}, submits: 0,
		},
		{
			name:  "stop always runs",
			calls: []any{toolCall("call_1", "move_base_to", `{"location": "table"}`), toolCall("call_1", "stop", `{}`)},
			want:  []toolerr.Type{"", ""}, submits: 1, stops: 1,
		},
		{
			name:  "cancel_task always runs",
			calls: []any{toolCall("call_1", "move_base_to", `{"location": "table"}`), toolCall("call_1", "cancel_task", `{"task_id": "t-1"}`)},
			want:  []toolerr.Type{"", ""}, submits: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a grant under which every submitted call moves the robot
			h := newHarness(t)
			underGrant(h)
			var stops atomic.Int32
			h.tasks.StopFn = func(context.Context, string, string) (actions.StopReport, error) {
				stops.Add(1)
				return actions.StopReport{Text: "Stopped.", State: testState()}, nil
			}
			// When one message has two calls with the same id
			envs := h.toolCallsAs(testTokens.Agent, message("conv-1", tc.calls...))
			// Then only the first of them ran, unless the later one stops
			require.Len(t, envs, len(tc.want))
			for i, want := range tc.want {
				if want == "" {
					require.True(t, envs[i].OK, "call %d: %+v", i, envs[i].Error)
					continue
				}
				require.NotNil(t, envs[i].Error, "call %d ran", i)
				require.Equal(t, want, envs[i].Error.Type, "call %d", i)
				require.Equal(t, fmt.Sprintf("tool_calls[%d].id", i), envs[i].Error.Details["field"])
				require.EqualValues(t, 0, envs[i].Error.Details["first_index"])
				require.Contains(t, envs[i].Error.Message, `has the id "call_1" of tool call 0`)
			}
			require.Equal(t, tc.submits, h.tasks.submits.Load())
			require.Equal(t, tc.stops, stops.Load())

			// When the host re-posts the message
			again := h.toolCallsAs(testTokens.Agent, message("conv-1", tc.calls...))
			// Then the duplicates are refused again, the first call answers
			// with its task (as it is now: cancel_task has cancelled it) and
			// nothing more was submitted
			for i, want := range tc.want {
				if want != "" {
					require.NotNil(t, again[i].Error, "call %d ran", i)
					require.Equal(t, want, again[i].Error.Type, "call %d", i)
				}
			}
			if envs[0].Task != nil {
				require.NotNil(t, again[0].Task, "%+v", again[0].Error)
				require.Equal(t, envs[0].Task.ID, again[0].Task.ID)
			}
			require.Equal(t, tc.submits, h.tasks.submits.Load())
		})
	}
}

func TestToolCalls_CallsWithoutIDAreNotDeduplicated(t *testing.T) {
	// Given a host that omits tool call ids
	h := newHarness(t)
	msg := message("conv-1", map[string]any{"type": "function", "function": map[string]any{"name": "move_base_to", "arguments": `{"location": "table"}`}})
	// When it posts the same message twice
	first := h.toolCallsAs(testTokens.Agent, msg)[0]
	second := h.toolCallsAs(testTokens.Agent, msg)[0]
	// Then there is nothing to recognise it by: two calls, two tasks
	require.True(t, first.OK)
	require.True(t, second.OK)
	require.NotEqual(t, first.Task.ID, second.Task.ID)
	require.EqualValues(t, 2, h.tasks.submits.Load())
}

func TestToolCalls_IdempotencyKeyPrefixReplacesTheSessionScope(t *testing.T) {
	call := toolCall("call_9", "move_base_to", `{"location": "dock"}`)
	withPrefix := func(session, prefix string) map[string]any {
		m := message(session, call)
		m["idempotency_key_prefix"] = prefix
		return m
	}
	cases := []struct {
		name string
		// then is what comes after withPrefix("conv-1", "conv42:").
		then    func(h *harness) testEnvelope
		submits int32
	}{
		{"the same prefix in another session is the same call", func(h *harness) testEnvelope {
			return h.toolCallsAs(testTokens.Agent, withPrefix("conv-2", "conv42:"))[0]
		}, 1},
		{"prefix + id is the idempotency_key of /v1/tools/{name}/call", func(h *harness) testEnvelope {
			return h.call("move_base_to", keyed("conv42:call_9", map[string]any{"location": "dock"}))
		}, 1},
		{"another prefix is another call", func(h *harness) testEnvelope {
			return h.toolCallsAs(testTokens.Agent, withPrefix("conv-1", "conv43:"))[0]
		}, 2},
		{"no prefix is another call", func(h *harness) testEnvelope {
			return h.toolCallsAs(testTokens.Agent, message("conv-1", call))[0]
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a call posted with a prefix under a grant
			h := newHarness(t)
			underGrant(h)
			first := h.toolCallsAs(testTokens.Agent, withPrefix("conv-1", "conv42:"))[0]
			require.True(t, first.OK)
			// When the next call comes
			env := tc.then(h)
			// Then it is the same task only when its key is the same
			require.True(t, env.OK, "%+v", env.Error)
			require.Equal(t, tc.submits, h.tasks.submits.Load())
			if tc.submits == 1 {
				require.Equal(t, first.Task.ID, env.Task.ID)
			} else {
				require.NotEqual(t, first.Task.ID, env.Task.ID)
			}
		})
	}
}

func TestToolCalls_OverlongIDIsRefusedButStopRuns(t *testing.T) {
	// Given a grant and a host that sends an id longer than any key allows
	h := newHarness(t)
	underGrant(h)
	long := strings.Repeat("x", maxIDLen+1)
	// When the message has a motion and a stop with that id
	envs := h.toolCallsAs(testTokens.Agent, message("conv-1",
		toolCall(long, "move_base_to", `{"location": "table"}`),
		toolCall(long, "stop", `{}`)))
	// Then the motion was refused with the field named, and the stop ran
	require.NotNil(t, envs[0].Error, "the motion ran")
	require.Equal(t, toolerr.InvalidParams, envs[0].Error.Type)
	require.Equal(t, "tool_calls[0].id", envs[0].Error.Details["field"])
	require.Contains(t, envs[0].Error.Message, "not run")
	require.True(t, envs[1].OK, "%+v", envs[1].Error)
	require.EqualValues(t, 0, h.tasks.submits.Load())
}

func TestToolCallKey_DistinctScopesDistinctKeys(t *testing.T) {
	cases := []struct {
		name                 string
		session, prefix, id  string
		session2, prefix2, b string
		same                 bool
	}{
		{name: "same scope", session: "s", id: "call_1", session2: "s", b: "call_1", same: true},
		{name: "other session", session: "s", id: "call_1", session2: "t", b: "call_1"},
		{name: "split moved", session: "a", id: "b c", session2: "a b", b: "c"},
		{name: "quote in session", session: `a" "b`, id: "c", session2: "a", b: `b" "c`},
		{name: "NUL in session", session: "a\x00b", id: "c", session2: "a", b: "b\x00c"},
		{name: "prefix ignores session", session: "s", prefix: "p:", id: "1", session2: "t", prefix2: "p:", b: "1", same: true},
		{name: "prefix and no prefix", session: "s", prefix: "p:", id: "1", session2: "s", b: "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k1, k2 := toolCallKey(tc.session, tc.prefix, tc.id), toolCallKey(tc.session2, tc.prefix2, tc.b)
			if tc.same {
				require.Equal(t, k1, k2)
			} else {
				require.NotEqual(t, k1, k2)
			}
			require.NotContains(t, k1, "\x00", "the store separates the credential from the key with a NUL byte")
		})
	}
}

func TestToolCalls_RepostOfACallDoneWithoutATaskIsNotNotFound(t *testing.T) {
	// Given a robot without an arm, where return_to_safe_pose is carried
	// out at once as a stop and leaves no task
	h := newHarness(t)
	h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
		return actions.TaskView{Tool: r.Tool, Status: fsm.Succeeded, Text: "Stopped; nothing was running."}, nil
	}
	msg := message("conv-1", toolCall("call_1", "return_to_safe_pose", `{}`))
	first := h.toolCallsAs(testTokens.Agent, msg)[0]
	require.True(t, first.OK, "%+v", first.Error)
	// When the host re-posts the message
	again := h.toolCallsAs(testTokens.Agent, msg)[0]
	// Then it is answered as done, not as an unknown task "", and nothing
	// was submitted again
	require.True(t, again.OK, "%+v", again.Error)
	require.Equal(t, fsm.Succeeded, again.Task.Status)
	require.Contains(t, again.Text, "nothing was sent to the robot again")
	require.EqualValues(t, 1, h.tasks.submits.Load())
}
