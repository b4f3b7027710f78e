package toolapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// maxToolCalls bounds one assistant message's tool calls.
const maxToolCalls = 32

// assistantMessage is an assistant message as an OpenAI-style model emits
// it. Fields a model or SDK adds beyond these (content, refusal, name,
// reasoning) are ignored: the message is passed through, not written by
// hand.
type assistantMessage struct {
	Role      string          `json:"role"`
	ToolCalls []modelToolCall `json:"tool_calls"`
	// SessionID, WaitMS and IdempotencyKeyPrefix are the bridge's own
	// optional additions. With a prefix, each action call uses prefix +
	// tool_call id as its idempotency key, so re-posting the same message
	// never moves the robot twice.
	SessionID            string `json:"session_id"`
	WaitMS               int64  `json:"wait_ms"`
	IdempotencyKeyPrefix string `json:"idempotency_key_prefix"`
}

type modelToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ToolMessage is one role:"tool" message to append to the conversation.
type ToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	// Content is the call's Envelope encoded as JSON.
	Content string `json:"content"`
}

// ToolCallsResult is the answer of POST /v1/tool_calls.
type ToolCallsResult struct {
	Messages []ToolMessage `json:"messages"`
	// Summary says in one sentence what succeeded and what failed.
	Summary string `json:"summary"`
}

func (s *Server) handleToolCalls(w http.ResponseWriter, r *http.Request) {
	data, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var msg assistantMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		te := bodyError(err)
		te.Suggestion = `send the assistant message as the model emitted it: {"role": "assistant", "tool_calls": [{"id": "...", "type": "function", "function": {"name": "...", "arguments": "{...}"}}]}`
		writeHTTPError(w, http.StatusBadRequest, te)
		return
	}
	switch {
	case len(msg.ToolCalls) == 0:
		writeHTTPError(w, http.StatusBadRequest, fieldError("tool_calls", "[]", "a non-empty array of tool calls"))
		return
	case len(msg.ToolCalls) > maxToolCalls:
		writeHTTPError(w, http.StatusBadRequest, fieldError("tool_calls", len(msg.ToolCalls), fmt.Sprintf("at most %d tool calls", maxToolCalls)))
		return
	case msg.WaitMS < 0:
		writeHTTPError(w, http.StatusBadRequest, fieldError("wait_ms", msg.WaitMS, "an integer number of milliseconds ≥ 0"))
		return
	case msg.Role != "" && msg.Role != "assistant":
		writeHTTPError(w, http.StatusBadRequest, fieldError("role", msg.Role, "assistant"))
		return
	}
	writeJSON(w, http.StatusOK, s.ToolCalls(r, msg))
}

// ToolCalls runs an assistant message's tool calls: state tools in
// parallel, action tools one at a time in the order given (concurrently
// with the state tools), and answers one tool message per call in the
// original order. A failing call never hides the others' results.
func (s *Server) ToolCalls(r *http.Request, msg assistantMessage) ToolCallsResult {
	ctx := r.Context()
	p := principalOf(r)
	envs := make([]Envelope, len(msg.ToolCalls))
	ids := make([]string, len(msg.ToolCalls))
	run := func(i int) {
		tc := msg.ToolCalls[i]
		req := CallRequest{
			Tool: tc.Function.Name, SessionID: msg.SessionID,
			Wait: time.Duration(msg.WaitMS) * time.Millisecond, TraceID: r.Header.Get("X-Request-Id"),
		}
		if msg.IdempotencyKeyPrefix != "" && tc.ID != "" {
			req.IdempotencyKey = msg.IdempotencyKeyPrefix + tc.ID
		}
		args, argErr := toolCallArguments(tc.Function.Arguments)
		if argErr != nil {
			envs[i] = s.callWithArgError(ctx, p, req, argErr)
			return
		}
		req.Arguments = args
		envs[i] = s.Call(ctx, p, req)
	}
	var actionsIdx []int
	var wg sync.WaitGroup
	for i, tc := range msg.ToolCalls {
		ids[i] = tc.ID
		if ids[i] == "" {
			ids[i] = fmt.Sprintf("call_%d", i)
		}
		if t, ok := s.reg.Lookup(tc.Function.Name); ok && t.Kind == KindAction {
			actionsIdx = append(actionsIdx, i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, i := range actionsIdx {
			run(i)
		}
	}()
	wg.Wait()

	res := ToolCallsResult{Messages: make([]ToolMessage, len(envs))}
	var okNames, failed []string
	for i, env := range envs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(env)
		res.Messages[i] = ToolMessage{Role: "tool", ToolCallID: ids[i], Content: strings.TrimSpace(buf.String())}
		name := env.Tool
		if name == "" {
			name = "(no name)"
		}
		if env.OK {
			okNames = append(okNames, name)
		} else {
			failed = append(failed, fmt.Sprintf("%s: %s", name, env.Error.Type))
		}
	}
	res.Summary = fmt.Sprintf("%d tool calls: %d ok", len(envs), len(okNames))
	if len(okNames) > 0 {
		res.Summary += " (" + strings.Join(okNames, ", ") + ")"
	}
	if len(failed) > 0 {
		res.Summary += fmt.Sprintf(", %d failed (%s)", len(failed), strings.Join(failed, "; "))
	}
	res.Summary += "."
	return res
}

// toolCallArguments reads a tool call's arguments: normally a JSON string
// (repaired by ExtractArguments), sometimes an object.
func toolCallArguments(raw json.RawMessage) (map[string]any, *toolerr.Error) {
	return decodeArguments(raw)
}
