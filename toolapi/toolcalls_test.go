package toolapi

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func toolCall(id, name, arguments string) map[string]any {
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": arguments}}
}

func (h *harness) toolCalls(body any) ToolCallsResult {
	h.t.Helper()
	status, out := h.do("POST", "/v1/tool_calls", testTokens.Agent, body)
	require.Equal(h.t, http.StatusOK, status, string(out))
	var res ToolCallsResult
	require.NoError(h.t, json.Unmarshal(out, &res))
	return res
}

func TestToolCalls_CodeFencedTrailingCommaExecutes(t *testing.T) {
	// Given an assistant message whose arguments are fenced and sloppy
	h := newHarness(t)
	msg := map[string]any{
		"role":    "assistant",
		"content": nil,
		"tool_calls": []any{
			toolCall("call_1", "move_base_to", "Sure! Here are the arguments:\n```json\n{\"x\": 1.5, \"y\": -0.5,}\n```"),
		},
	}
	// When it is posted as is
	res := h.toolCalls(msg)
	// Then the action was submitted with the repaired arguments
	require.Len(t, res.Messages, 1)
	require.Equal(t, "tool", res.Messages[0].Role)
	require.Equal(t, "call_1", res.Messages[0].ToolCallID)
	env := decodeEnv(t, []byte(res.Messages[0].Content))
	require.True(t, env.OK, res.Messages[0].Content)
	require.EqualValues(t, 1, h.tasks.submits.Load())
	require.Equal(t, map[string]any{"x": 1.5, "y": -0.5}, h.tasks.lastRequest().Arguments)
}

func TestToolCalls_OrderPartialFailureAndSummary(t *testing.T) {
	// Given actions that record their order
	h := newHarness(t)
	var mu sync.Mutex
	var order []string
	h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
		mu.Lock()
		order = append(order, r.Tool)
		mu.Unlock()
		if r.Tool == "grasp" {
			return actions.TaskView{}, toolerr.New(toolerr.NotFound, "no object ghost")
		}
		return actions.TaskView{ID: "t-" + r.Tool, Tool: r.Tool, Status: fsm.AwaitingApproval}, nil
	}
	// When a message mixes state and action calls, one unreadable
	res := h.toolCalls(map[string]any{"tool_calls": []any{
		toolCall("a", "get_robot_state", ""),
		toolCall("b", "move_base_to", `{"location": "table"}`),
		toolCall("c", "grasp", `{'object_id': 'ghost'}`),
		toolCall("d", "list_named_poses", "{}"),
		toolCall("e", "move_arm_to", `{"pose": "ready"`),
		toolCall("f", "release", `{}`),
		toolCall("", "nosuch_tool", `{}`),
	}})
	// Then every call has its message, in order, with matching ids
	require.Len(t, res.Messages, 7)
	var types []string
	for i, id := range []string{"a", "b", "c", "d", "e", "f", "call_6"} {
		require.Equal(t, id, res.Messages[i].ToolCallID)
		env := decodeEnv(t, []byte(res.Messages[i].Content))
		if env.OK {
			types = append(types, "ok")
		} else {
			types = append(types, string(env.Error.Type))
		}
	}
	require.Equal(t, []string{"ok", "ok", "NOT_FOUND", "ok", "INVALID_PARAMS", "ok", "UNKNOWN_TOOL"}, types)
	// And the actions ran one at a time in the given order
	require.Equal(t, []string{"move_base_to", "grasp", "release"}, order)
	// And the unreadable arguments are explained
	bad := decodeEnv(t, []byte(res.Messages[4].Content))
	require.Contains(t, bad.Error.Message, "never closed")
	require.Contains(t, res.Summary, "7 tool calls: 4 ok")
	require.Contains(t, res.Summary, "grasp: NOT_FOUND")
}

func TestToolCalls_IdempotencyPrefixMakesRepostsSafe(t *testing.T) {
	h := newHarness(t)
	msg := map[string]any{"idempotency_key_prefix": "conv42:", "tool_calls": []any{toolCall("call_9", "move_base_to", `{"location": "dock"}`)}}
	first := h.toolCalls(msg)
	second := h.toolCalls(msg)
	require.Equal(t, decodeEnv(t, []byte(first.Messages[0].Content)).Task.ID, decodeEnv(t, []byte(second.Messages[0].Content)).Task.ID)
	require.EqualValues(t, 1, h.tasks.submits.Load())
}

func TestToolCalls_BadMessages(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name string
		body string
	}{
		{"not json", `{"tool_calls": [`},
		{"no calls", `{"role": "assistant", "content": "hi"}`},
		{"wrong role", `{"role": "user", "tool_calls": [{"id": "a", "function": {"name": "stop"}}]}`},
		{"session_id too long", `{"session_id": "` + strings.Repeat("s", maxIDLen+1) + `", "tool_calls": [{"id": "a", "function": {"name": "stop"}}]}`},
		{"idempotency_key_prefix too long", `{"idempotency_key_prefix": "` + strings.Repeat("p", maxIDLen+1) + `", "tool_calls": [{"id": "a", "function": {"name": "stop"}}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := h.do("POST", "/v1/tool_calls", testTokens.Agent, tc.body)
			require.Equal(t, http.StatusBadRequest, status)
			env := decodeEnv(t, out)
			require.Equal(t, toolerr.InvalidParams, env.Error.Type)
			require.NotEmpty(t, env.Error.Suggestion)
		})
	}
}

func TestExtractArguments(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]any
		// errPart, when set, is expected in the error message.
		errPart string
	}{
		{name: "plain", in: `{"x": 1, "y": 2}`, want: map[string]any{"x": 1.0, "y": 2.0}},
		{name: "empty", in: "  ", want: map[string]any{}},
		{name: "null", in: "null", want: map[string]any{}},
		{name: "prose around", in: `I will move there: {"location": "table"} and then stop.`, want: map[string]any{"location": "table"}},
		{name: "json fence", in: "```json\n{\"x\": 1}\n```", want: map[string]any{"x": 1.0}},
		{name: "bare fence", in: "```\n{\"x\": 1}\n```", want: map[string]any{"x": 1.0}},
		{name: "trailing commas", in: `{"joints": {"elbow": -1.0,}, }`, want: map[string]any{"joints": map[string]any{"elbow": -1.0}}},
		{name: "single quotes", in: `{'object_id': 'red_cup'}`, want: map[string]any{"object_id": "red_cup"}},
		{name: "single quotes with inner double", in: `{'reason': 'user said "stop"'}`, want: map[string]any{"reason": `user said "stop"`}},
		{name: "escaped single quote", in: `{'reason': 'it\'s late'}`, want: map[string]any{"reason": "it's late"}},
		{name: "bare keys", in: `{x: 1, y: -2.5e0}`, want: map[string]any{"x": 1.0, "y": -2.5}},
		{name: "python literals", in: `{'a': True, 'b': None, 'c': False}`, want: map[string]any{"a": true, "b": nil, "c": false}},
		{name: "comma inside string kept", in: `{"reason": "a, }"}`, want: map[string]any{"reason": "a, }"}},
		{name: "double encoded", in: `"{\"x\": 1}"`, want: map[string]any{"x": 1.0}},
		{name: "truncated", in: `{"x": 1, "y"`, errPart: "never closed"},
		{name: "truncated string", in: `{"x": "abc`, errPart: "never closed"},
		{name: "array", in: `[1, 2]`, errPart: "array, not an object"},
		{name: "number", in: `42`, errPart: "number, not an object"},
		{name: "no object", in: `move to the table please`, errPart: "no JSON object"},
		{name: "two objects", in: `{"x": 1} {"x": 2}`, errPart: "more than one"},
		{name: "unrepairable", in: `{"x": 1 "y": 2}`, errPart: "offset"},
		{name: "mismatched bracket", in: `{"x": [1, 2}`, errPart: "did not open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := ExtractArguments(tc.in)
			if tc.errPart != "" {
				require.Error(t, err)
				te := toolerr.As(err)
				require.Equal(t, toolerr.InvalidParams, te.Type)
				require.Contains(t, te.Message, tc.errPart)
				require.Equal(t, "arguments", te.Details["field"])
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeCallBody(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		bodyErr string
		argErr  string
		args    map[string]any
	}{
		{name: "empty body is no arguments", body: "", args: map[string]any{}},
		{name: "full", body: `{"arguments": {"x": 1}, "session_id": "s", "idempotency_key": "k", "wait_ms": 5}`, args: map[string]any{"x": 1.0}},
		{name: "arguments as a string are repaired", body: `{"arguments": "{'x': 1,}"}`, args: map[string]any{"x": 1.0}},
		{name: "unknown field", body: `{"args": {}}`, bodyErr: `unknown field "args"`},
		{name: "trailing data", body: `{} {}`, bodyErr: "extra data"},
		{name: "not json", body: `{arguments: 1}`, bodyErr: "not valid JSON"},
		{name: "truncated", body: `{"arguments": {`, bodyErr: "ends before"},
		{name: "wait_ms negative", body: `{"wait_ms": -1}`, bodyErr: "wait_ms"},
		{name: "wait_ms wrong type", body: `{"wait_ms": "soon"}`, bodyErr: "wait_ms"},
		{name: "arguments an array", body: `{"arguments": [1]}`, argErr: "array, not an object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, argErr, bodyErr := decodeCallBody([]byte(tc.body))
			switch {
			case tc.bodyErr != "":
				require.NotNil(t, bodyErr)
				require.Contains(t, bodyErr.Message, tc.bodyErr)
			case tc.argErr != "":
				require.Nil(t, bodyErr)
				require.NotNil(t, argErr)
				require.Contains(t, argErr.Message, tc.argErr)
			default:
				require.Nil(t, bodyErr)
				require.Nil(t, argErr)
				require.Equal(t, tc.args, req.Arguments)
			}
		})
	}
}

func TestHTTP_BodyLimitsAndFormats(t *testing.T) {
	h := newHarness(t, func(c *Conf) { c.MaxBodyBytes = 64 })
	status, out := h.do("POST", "/v1/tools/stop/call", testTokens.Agent, `{"arguments": {"reason": "`+strings.Repeat("a", 100)+`"}}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, toolerr.InvalidParams, decodeEnv(t, out).Error.Type)

	status, out = h.do("POST", "/v1/tools/stop/call", testTokens.Agent, `{"argumnets": {}}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, decodeEnv(t, out).Error.Message, "argumnets")

	status, _ = h.do("GET", "/v1/tools?format=yaml", testTokens.Agent, nil)
	require.Equal(t, http.StatusBadRequest, status)

	status, out = h.do("GET", "/v1/nothing", testTokens.Agent, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, toolerr.NotFound, decodeEnv(t, out).Error.Type)
}

func TestLoadOrCreateTokens(t *testing.T) {
	noEnv := func(string) string { return "" }
	t.Run("generated once, stored 0600, loaded again", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		tok, created, err := LoadOrCreateTokens(dir, noEnv)
		require.NoError(t, err)
		require.True(t, created)
		require.NoError(t, tok.validate())
		fi, err := os.Stat(filepath.Join(dir, TokensFile))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		again, created, err := LoadOrCreateTokens(dir, noEnv)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, tok, again)
	})
	t.Run("environment wins", func(t *testing.T) {
		env := map[string]string{EnvAgentToken: testTokens.Agent, EnvOperatorToken: testTokens.Operator}
		tok, created, err := LoadOrCreateTokens(t.TempDir(), func(k string) string { return env[k] })
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, testTokens, tok)
	})
	t.Run("a readable token file is refused", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := LoadOrCreateTokens(dir, noEnv)
		require.NoError(t, err)
		require.NoError(t, os.Chmod(filepath.Join(dir, TokensFile), 0o644))
		_, _, err = LoadOrCreateTokens(dir, noEnv)
		require.ErrorContains(t, err, "chmod 600")
	})
	t.Run("a weak env token is refused", func(t *testing.T) {
		env := map[string]string{EnvAgentToken: "short", EnvOperatorToken: testTokens.Operator}
		_, _, err := LoadOrCreateTokens(t.TempDir(), func(k string) string { return env[k] })
		require.ErrorIs(t, err, ErrConf)
	})
}
