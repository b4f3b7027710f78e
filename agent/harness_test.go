package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/bridge"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// The real bridge and simulator, booted in-process, and a scripted model:
// the one stand-in of these tests, for a model that cannot run here.

const (
	testAgentTok    = "agent-token-for-agent-tests-0123456789"
	testOperatorTok = "operator-token-for-agent-tests-0123456789"
)

// testBridge is a running bridge on the bundled simulator.
type testBridge struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func startBridge(tb testing.TB, edit func(*hwconfig.Config)) *testBridge {
	tb.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(tb, err)
	cfg.Sim.FalsePositiveRate = 0
	if edit != nil {
		edit(cfg)
	}
	require.NoError(tb, cfg.Validate())
	b, err := bridge.New(bridge.Conf{
		Config: cfg, Listen: "127.0.0.1:0", DataDir: tb.TempDir(),
		Env: func(k string) string {
			switch k {
			case "ROBOT_BRIDGE_AGENT_TOKEN":
				return testAgentTok
			case "ROBOT_BRIDGE_OPERATOR_TOKEN":
				return testOperatorTok
			}
			return ""
		},
	})
	require.NoError(tb, err)
	require.NoError(tb, b.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(tb, b.Stop(ctx))
	})
	tbr := &testBridge{t: tb, base: "http://" + b.Addr(), hc: &http.Client{Timeout: 30 * time.Second}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := tbr.do(http.MethodGet, "/readyz", "", nil)
		if code == http.StatusOK {
			return tbr
		}
		require.True(tb, time.Now().Before(deadline), "the bridge never became ready")
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *testBridge) do(method, path, token string, body any) (int, map[string]any) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	require.NoError(b.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	require.NoError(b.t, err)
	defer func() { _ = resp.Body.Close() }()
	out := map[string]any{}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(b.t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, out
}

// motions counts the motion commands the simulator acted on, from its
// command log (GET /v1/sim/log), and fails the test when the log holds a
// command sent twice (one the simulator acknowledged without acting
// again, or two accepted commands with one id).
func (b *testBridge) motions() int {
	b.t.Helper()
	code, body := b.do(http.MethodGet, "/v1/sim/log", testOperatorTok, nil)
	require.Equal(b.t, http.StatusOK, code, "%v", body)
	entries, ok := body["entries"].([]any)
	require.True(b.t, ok, "%v", body)
	n := 0
	ids := map[any]bool{}
	for _, e := range entries {
		m := e.(map[string]any)
		require.NotEqual(b.t, true, m["duplicate"], "a command was sent twice: %v", m)
		if m["op"] == "command" && m["accepted"] == true {
			require.False(b.t, ids[m["id"]], "two accepted commands with one id: %v", m)
			ids[m["id"]] = true
			n++
		}
	}
	return n
}

// approvals returns every approval request the bridge filed.
func (b *testBridge) approvals() []map[string]any {
	b.t.Helper()
	code, body := b.do(http.MethodGet, "/v1/approvals", testOperatorTok, nil)
	require.Equal(b.t, http.StatusOK, code, "%v", body)
	list, _ := body["approvals"].([]any)
	out := make([]map[string]any, len(list))
	for i, a := range list {
		out[i] = a.(map[string]any)
	}
	return out
}

// operator decides every approval request as it appears, until the test
// ends: approve when reason is "", else deny with reason.
func (b *testBridge) operator(t *testing.T, denyReason string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/v1/approvals?status=pending", nil)
			req.Header.Set("Authorization", "Bearer "+testOperatorTok)
			resp, err := b.hc.Do(req)
			if err != nil {
				continue
			}
			var body struct {
				Approvals []struct {
					ID string `json:"id"`
				} `json:"approvals"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			_ = resp.Body.Close()
			for _, a := range body.Approvals {
				verb, payload := "approve", `{}`
				if denyReason != "" {
					verb, payload = "deny", fmt.Sprintf(`{"reason":%q}`, denyReason)
				}
				dreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/v1/approvals/"+a.ID+"/"+verb, strings.NewReader(payload))
				dreq.Header.Set("Authorization", "Bearer "+testOperatorTok)
				dreq.Header.Set("Content-Type", "application/json")
				if dresp, err := b.hc.Do(dreq); err == nil {
					_ = dresp.Body.Close()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
}

// script is a fixture of agent/testdata: the user's prompt and the
// model's replies, one per chat completions request, in order.
type script struct {
	Prompt  string        `json:"prompt"`
	Replies []scriptReply `json:"replies"`
}

type scriptReply struct {
	Content   string `json:"content"`
	ToolCalls []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
}

func loadScript(t testing.TB, name string) script {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	var s script
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&s), name)
	require.NotEmpty(t, s.Replies, name)
	return s
}

// scriptedModel is an OpenAI-compatible chat completions server that
// replays a script and checks every request it gets: each tool_call id
// answered by one tool message right after its assistant message, each
// tool message and each task update valid JSON.
type scriptedModel struct {
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	replies []scriptReply
	// requests are the decoded request bodies, in order; guarded by mu.
	requests []chatRequest
	// problems are what the checks found wrong; guarded by mu.
	problems []string
	// status, when set, answers the first len(status) requests with
	// these HTTP statuses instead of a reply; guarded by mu.
	status []int
}

type chatRequest struct {
	Model    string            `json:"model"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type chatMsg struct {
	Role       string  `json:"role"`
	Content    *string `json:"content"`
	ToolCallID string  `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func newScriptedModel(t testing.TB, replies []scriptReply) *scriptedModel {
	m := &scriptedModel{t: t, replies: replies}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, req)
	m.check(req)
	if len(m.status) > 0 {
		st := m.status[0]
		m.status = m.status[1:]
		if st != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(st)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"scripted failure %d"}}`, st)
			return
		}
	}
	var reply scriptReply
	if len(m.replies) == 0 {
		reply.Content = "SCRIPT EXHAUSTED"
	} else {
		reply, m.replies = m.replies[0], m.replies[1:]
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if reply.Content != "" {
		msg["content"] = reply.Content
	}
	if len(reply.ToolCalls) > 0 {
		var tcs []map[string]any
		for _, tc := range reply.ToolCalls {
			tcs = append(tcs, map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = tcs
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
	})
}

// check records what is wrong with one request; under mu.
func (m *scriptedModel) check(req chatRequest) {
	var msgs []chatMsg
	for i, raw := range req.Messages {
		var cm chatMsg
		if err := json.Unmarshal(raw, &cm); err != nil {
			m.problems = append(m.problems, fmt.Sprintf("message %d: %v", i, err))
			return
		}
		msgs = append(msgs, cm)
	}
	if len(msgs) == 0 || msgs[0].Role != "system" {
		m.problems = append(m.problems, "the first message is not the system prompt")
	}
	for i := 0; i < len(msgs); i++ {
		cm := msgs[i]
		switch cm.Role {
		case "assistant":
			for k, tc := range cm.ToolCalls {
				j := i + 1 + k
				if j >= len(msgs) || msgs[j].Role != "tool" || msgs[j].ToolCallID != tc.ID {
					m.problems = append(m.problems, fmt.Sprintf("message %d: tool call %s is not answered by message %d", i, tc.ID, j))
				}
			}
		case "tool":
			if cm.Content == nil || !json.Valid([]byte(*cm.Content)) {
				m.problems = append(m.problems, fmt.Sprintf("message %d: a tool message is not valid JSON", i))
			}
		case "user":
			if cm.Content != nil && strings.HasPrefix(*cm.Content, "{") && !json.Valid([]byte(*cm.Content)) {
				m.problems = append(m.problems, fmt.Sprintf("message %d: a task update is not valid JSON", i))
			}
		}
	}
}

// lastRequest returns the messages of the n-th request (from 0).
func (m *scriptedModel) request(n int) []chatMsg {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Less(m.t, n, len(m.requests), "the model got %d requests", len(m.requests))
	var out []chatMsg
	for _, raw := range m.requests[n].Messages {
		var cm chatMsg
		require.NoError(m.t, json.Unmarshal(raw, &cm))
		out = append(out, cm)
	}
	return out
}

func (m *scriptedModel) requestCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

func (m *scriptedModel) requireClean() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Empty(m.t, m.problems, "what the model was sent")
}

// newAgent builds an agent of the bridge and the scripted model.
func newAgent(t testing.TB, b *testBridge, m *scriptedModel, limits Limits, obs Observer) *Agent {
	t.Helper()
	model, err := NewOpenAI(OpenAIConf{BaseURL: m.srv.URL + "/v1", Model: "scripted", Retry: Retry{MaxRetries: 2, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
	require.NoError(t, err)
	a, err := New(Conf{BridgeURL: b.base, Token: testAgentTok, Model: model, Limits: limits, Observer: obs})
	require.NoError(t, err)
	return a
}

// toolEnvelopes returns the tool messages after the last assistant
// message with tool calls in msgs, decoded.
func toolEnvelopes(t testing.TB, msgs []chatMsg) []map[string]any {
	t.Helper()
	last := -1
	for i, m := range msgs {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			last = i
		}
	}
	require.GreaterOrEqual(t, last, 0, "no tool calls in the conversation")
	var out []map[string]any
	for _, m := range msgs[last+1:] {
		if m.Role != "tool" {
			break
		}
		env := map[string]any{}
		require.NoError(t, json.Unmarshal([]byte(*m.Content), &env))
		out = append(out, env)
	}
	return out
}

// taskUpdate returns the last task update in msgs, decoded.
func taskUpdate(t testing.TB, msgs []chatMsg) map[string]any {
	t.Helper()
	for _, m := range slices.Backward(msgs) {
		if m.Role == "user" && m.Content != nil && strings.HasPrefix(*m.Content, "{") {
			u := map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(*m.Content), &u))
			require.Equal(t, "task_update", u["type"])
			return u
		}
	}
	t.Fatal("no task update was sent to the model")
	return nil
}

func errTypeOf(env map[string]any) string {
	e, _ := env["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}
