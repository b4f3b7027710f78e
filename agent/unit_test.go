package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestFitResult(t *testing.T) {
	long := strings.Repeat("The robot sees a cup on the table. ", 200)
	env := map[string]any{
		"ok": true, "tool": "describe_scene", "text": long, "robot": "stopped at (0.00, 0.00) facing 0°",
		"data": map[string]any{"objects": strings.Repeat("x", 5000)},
	}
	raw, err := json.Marshal(env)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		budget int
	}{{"minimum", MinResultBytes}, {"medium", 2000}, {"large", 6000}} {
		t.Run(tc.name, func(t *testing.T) {
			got, summarized := fitResult(string(raw), tc.budget, []string{"max_objects", "label"})
			require.True(t, summarized)
			require.LessOrEqual(t, len(got), tc.budget)
			var s map[string]any
			require.NoError(t, json.Unmarshal([]byte(got), &s))
			require.Equal(t, true, s["truncated"])
			require.Equal(t, true, s["ok"])
			require.Equal(t, "describe_scene", s["tool"])
			require.Contains(t, s["note"], "To get the rest, call it again asking for less, with its arguments (label, max_objects).")
			text, _ := s["text"].(string)
			if text != "" {
				require.True(t, strings.HasSuffix(text, "table."), "cut at a sentence: %q", text[max(0, len(text)-20):])
			}
		})
	}
	t.Run("fits", func(t *testing.T) {
		got, summarized := fitResult(`{"ok":true}`, MinResultBytes, nil)
		require.False(t, summarized)
		require.JSONEq(t, `{"ok":true}`, got)
	})
	t.Run("an error keeps its type and retry rule", func(t *testing.T) {
		e := map[string]any{
			"ok": false, "tool": "get_task", "robot": "x",
			"error": map[string]any{"type": "UNAVAILABLE", "message": strings.Repeat("m ", 2000), "retryable": true, "retry_after_ms": 2000, "suggestion": "wait"},
		}
		raw, _ := json.Marshal(e)
		got, summarized := fitResult(string(raw), MinResultBytes, nil)
		require.True(t, summarized)
		require.LessOrEqual(t, len(got), MinResultBytes)
		var s struct {
			Error summaryError `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(got), &s))
		require.Equal(t, "UNAVAILABLE", s.Error.Type)
		require.True(t, s.Error.Retryable)
		require.Equal(t, int64(2000), s.Error.RetryAfterMS)
	})
}

func TestCutText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"One. Two three.", "One."},
		{"one two three four", "one two…"},
		{"héllo wörld ünïcode", "héllo…"},
		{"short", "short"},
	} {
		require.Equal(t, tc.want, cutText(tc.in, 10), tc.in)
	}
}

func TestCanonicalArgs_OneSignaturePerCall(t *testing.T) {
	same := []string{`{"x": 1, "y": 0}`, `{"y":0,"x":1.0}`, "```json\n{\"x\": 1, \"y\": 0,}\n```", `{"x":1,"y":0,"theta_deg":null}`}
	for _, s := range same {
		require.Equal(t, `{"x":1,"y":0}`, canonicalArgs(s), s)
	}
	require.Equal(t, "{}", canonicalArgs(""))
	require.NotEqual(t, canonicalArgs(`{"x": 1}`), canonicalArgs(`{"x": 2}`))
}

func TestSystemPrompt_StatesEveryErrorTypesRule(t *testing.T) {
	p := SystemPrompt("The robot serves drinks.")
	for _, typ := range toolerr.Types() {
		require.Contains(t, p, "- "+string(typ)+" (")
		require.Contains(t, p, toolerr.InfoOf(typ).Suggestion+".")
	}
	for _, rule := range []string{"Never call an action again to retry it", "After LOOP_DETECTED stop", "Never show the user error types, codes", "\"not_sent\": true", "When some calls of a batch fail", "call request_operator_help with a summary", "operator_answer (from the operator, not the user)"} {
		require.Contains(t, p, rule)
	}
	require.True(t, strings.HasSuffix(p, "\nThe robot serves drinks."))
}

func TestPlain_NoCodeReachesTheUser(t *testing.T) {
	got := plain("Task task-1 (move_base_to) ended denied with APPROVAL_DENIED: the operator said no.")
	require.Equal(t, "Task task-1 (move_base_to) ended denied with (the operator refused it): the operator said no.", got)
	for _, typ := range toolerr.Types() {
		require.NotEmpty(t, plainWords[typ], typ)
	}
}

func TestConf_Errors(t *testing.T) {
	m, err := NewOpenAI(OpenAIConf{BaseURL: "http://127.0.0.1:1/v1", Model: "m"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		conf Conf
		want string
	}{
		{"no bridge", Conf{Token: "t", Model: m}, "Conf.BridgeURL is required"},
		{"bad bridge", Conf{BridgeURL: "127.0.0.1:8080", Token: "t", Model: m}, `Conf.BridgeURL "127.0.0.1:8080" is not an http(s) URL with a host`},
		{"no token", Conf{BridgeURL: "http://h", Model: m}, "Conf.Token is required"},
		{"no model", Conf{BridgeURL: "http://h", Token: "t"}, "Conf.Model is required"},
		{"iterations", Conf{BridgeURL: "http://h", Token: "t", Model: m, Limits: Limits{MaxIterations: -1}}, "Limits.MaxIterations is -1"},
		{"budget", Conf{BridgeURL: "http://h", Token: "t", Model: m, Limits: Limits{MaxResultBytes: 100}}, "Limits.MaxResultBytes is 100; it must be at least 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.conf)
			require.ErrorContains(t, err, tc.want)
		})
	}
	am, err := NewAnthropic(AnthropicConf{Model: "m", APIKey: "k"})
	require.NoError(t, err)
	_, err = New(Conf{BridgeURL: "http://h", Token: "t", Model: am, StrictTools: true})
	require.ErrorContains(t, err, `Conf.StrictTools applies to the openai format only, not "anthropic"`)
	_, err = NewOpenAI(OpenAIConf{BaseURL: "localhost:8080", Model: "m"})
	require.ErrorContains(t, err, `OpenAIConf.BaseURL "localhost:8080" is not an http(s) URL`)
	_, err = NewOpenAI(OpenAIConf{BaseURL: "http://h/v1"})
	require.ErrorContains(t, err, "OpenAIConf.Model is required")
}

// flakyModel answers with the given statuses, then with text.
func flakyModel(t *testing.T, statuses ...int) (*httptest.Server, *int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if i < len(statuses) {
			w.Header().Set("Retry-After", "0.001")
			w.WriteHeader(statuses[i])
			_, _ = w.Write([]byte(`{"error":{"message":"try later"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"hello"}}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestOpenAI_RetriesTemporaryFailuresOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		wantN    int
		wantErr  string
	}{
		{"429 and 503 are retried", []int{429, 503}, 3, ""},
		{"retries are bounded", []int{500, 500, 500, 500}, 3, "model: HTTP 500: try later"},
		{"400 is not retried", []int{400}, 1, "model: HTTP 400: try later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := flakyModel(t, tc.statuses...)
			m, err := NewOpenAI(OpenAIConf{BaseURL: srv.URL + "/v1", Model: "m", Retry: Retry{MaxRetries: 2, Backoff: time.Millisecond}})
			require.NoError(t, err)
			reply, err := m.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			require.Equal(t, tc.wantN, *n)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "hello", reply.Content)
		})
	}
}

func TestDecodeChatCompletion(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Reply
		wantErr  string
	}{
		{"text", `{"choices":[{"message":{"content":"hi"}}]}`, Reply{Content: "hi"}, ""},
		{"parts", `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}}]}`, Reply{Content: "ab"}, ""},
		{
			"string arguments", `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"stop","arguments":"{\"reason\":\"x\"}"}}]}}]}`,
			Reply{ToolCalls: []ToolCall{{ID: "c1", Name: "stop", Arguments: `{"reason":"x"}`}}},
			"",
		},
		{
			"object arguments", `{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"stop","arguments":{"reason":"x"}}}]}}]}`,
			Reply{ToolCalls: []ToolCall{{ID: "c1", Name: "stop", Arguments: `{"reason":"x"}`}}},
			"",
		},
		{"no choices", `{"choices":[]}`, Reply{}, "the chat completion has no choices"},
		{"error", `{"error":{"message":"context too long"}}`, Reply{}, "the chat completion is an error: context too long"},
		{"no name", `{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"arguments":"{}"}}]}}]}`, Reply{}, "tool call 0 of the chat completion has no function name"},
		{"bad arguments", `{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"x","arguments":5}}]}}]}`, Reply{}, "tool call 0 (x): arguments are neither a JSON string nor an object"},
		{"not json", `<html>`, Reply{}, "the chat completion is not the API's JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeChatCompletion([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAnthropicMessages_AlternateAndAnswerEachToolUse(t *testing.T) {
	msgs := []Message{
		{Role: RoleUser, Content: "go"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "t1", Name: "get_robot_state", Arguments: "{}"}, {ID: "t2", Name: "describe_scene", Arguments: "{label: cup"}}},
		{Role: RoleTool, ToolCallID: "t1", Content: `{"ok":true}`},
		{Role: RoleTool, ToolCallID: "t2", Content: `{"ok":false}`, IsError: true},
		{Role: RoleUser, Content: `{"type":"task_update"}`},
		{Role: RoleAssistant, Content: "done"},
	}
	got, err := json.Marshal(anthropicMessages(msgs))
	require.NoError(t, err)
	require.JSONEq(t, `[
	 {"role":"user","content":[{"type":"text","text":"go"}]},
	 {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_robot_state","input":{}},{"type":"tool_use","id":"t2","name":"describe_scene","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{\"ok\":true}"},{"type":"tool_result","tool_use_id":"t2","content":"{\"ok\":false}","is_error":true},{"type":"text","text":"{\"type\":\"task_update\"}"}]},
	 {"role":"assistant","content":[{"type":"text","text":"done"}]}]`, string(got))
}

func TestDecodeAnthropicMessage(t *testing.T) {
	got, err := DecodeAnthropicMessage([]byte(`{"type":"message","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"describe_scene","input":{"label":"cup"}}]}`))
	require.NoError(t, err)
	require.Equal(t, Reply{Content: "Let me look.", ToolCalls: []ToolCall{{ID: "toolu_1", Name: "describe_scene", Arguments: `{"label":"cup"}`}}}, got)
	_, err = DecodeAnthropicMessage([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	require.EqualError(t, err, "the message is an error: Overloaded")
	_, err = DecodeAnthropicMessage([]byte(`{"type":"message","content":[{"type":"tool_use","id":"x","name":"stop","input":[1]}]}`))
	require.EqualError(t, err, "content block 0 (stop): the input is not a JSON object")
}

func TestReadSSE(t *testing.T) {
	in := "retry: 1000\n\n: heartbeat\n\nevent: task\ndata: {\"a\":\ndata: 1}\nid: 7\n\nevent: hello\ndata: {}\n\n"
	var got []sseEvent
	require.NoError(t, readSSE(strings.NewReader(in), func(e sseEvent) bool { got = append(got, e); return true }))
	require.Equal(t, []sseEvent{{Name: "task", Data: []byte("{\"a\":\n1}"), ID: "7"}, {Name: "hello", Data: []byte("{}")}}, got)
}

func TestModelError_NeverCarriesTheKey(t *testing.T) {
	// Given an endpoint that quotes the key it refuses
	const key = "sk-secret-0123456789abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + key + `."}}`))
	}))
	t.Cleanup(srv.Close)
	for _, mk := range []func() (Model, error){
		func() (Model, error) { return NewOpenAI(OpenAIConf{BaseURL: srv.URL + "/v1", Model: "m", APIKey: key}) },
		func() (Model, error) { return NewAnthropic(AnthropicConf{BaseURL: srv.URL, Model: "m", APIKey: key}) },
	} {
		m, err := mk()
		require.NoError(t, err)
		_, err = m.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
		require.EqualError(t, err, "model: HTTP 401: Incorrect API key provided: [redacted].")
	}
}

func TestFitResult_TaskUpdate(t *testing.T) {
	var tasks []map[string]any
	for i := range 40 {
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("task-%d", i), "tool": "move_base_to", "status": "succeeded", "text": strings.Repeat("driving. ", 10)})
	}
	raw, err := json.Marshal(map[string]any{"type": "task_update", "from": "the agent loop", "tasks": tasks})
	require.NoError(t, err)
	got, summarized := fitResult(string(raw), 1024, nil)
	require.True(t, summarized)
	require.LessOrEqual(t, len(got), 1024)
	var s summary
	require.NoError(t, json.Unmarshal([]byte(got), &s))
	require.NotEmpty(t, s.Tasks)
	require.Equal(t, map[string]any{"id": "task-0", "status": "succeeded"}, s.Tasks[0])
	require.Contains(t, s.Note, `Read each task with get_task {"task_id": …} for the rest.`)
}
