package toolapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
	// optional additions. Every action call with an id is idempotent: its
	// key is derived from the credential, the session id and the tool call
	// id (see toolCallKey), so re-posting the same message — after a
	// timeout, a crash of the host or of the bridge — never moves the robot
	// twice. With a prefix the key is prefix + tool call id instead, scoped
	// to the credential only, exactly the key an idempotency_key of that
	// value on POST /v1/tools/{name}/call would be.
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
	msg, te := decodeToolCalls(data)
	if te != nil {
		writeHTTPError(w, http.StatusBadRequest, te)
		return
	}
	writeJSON(w, http.StatusOK, s.ToolCalls(r, msg))
}

// decodeToolCalls parses the body of POST /v1/tool_calls. Every rejection
// is an INVALID_PARAMS for the whole message (HTTP 400, nothing run);
// problems of one call (its arguments, a reused id) are that call's
// envelope instead, so the other calls still run.
func decodeToolCalls(data []byte) (assistantMessage, *toolerr.Error) {
	var msg assistantMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		te := bodyError(err)
		te.Suggestion = `send the assistant message as the model emitted it: {"role": "assistant", "tool_calls": [{"id": "...", "type": "function", "function": {"name": "...", "arguments": "{...}"}}]}`
		return msg, te
	}
	switch {
	case len(msg.ToolCalls) == 0:
		return msg, fieldError("tool_calls", "[]", "a non-empty array of tool calls")
	case len(msg.ToolCalls) > maxToolCalls:
		return msg, fieldError("tool_calls", len(msg.ToolCalls), fmt.Sprintf("at most %d tool calls", maxToolCalls))
	case msg.WaitMS < 0:
		return msg, fieldError("wait_ms", msg.WaitMS, "an integer number of milliseconds ≥ 0")
	case msg.Role != "" && msg.Role != "assistant":
		return msg, fieldError("role", msg.Role, "assistant")
	case len(msg.SessionID) > maxIDLen:
		return msg, fieldError("session_id", msg.SessionID[:32]+"…", fmt.Sprintf("a string of at most %d characters", maxIDLen))
	case len(msg.IdempotencyKeyPrefix) > maxIDLen:
		return msg, fieldError("idempotency_key_prefix", msg.IdempotencyKeyPrefix[:32]+"…", fmt.Sprintf("a string of at most %d characters", maxIDLen))
	}
	return msg, nil
}

// plannedCall is one tool call of a message as it will be run.
type plannedCall struct {
	// answerID is the tool_call_id of its answer: the call's id, or
	// call_<index> when it has none.
	answerID string
	// req is the call without its arguments and trace id; IdempotencyKey
	// is set for every call with an id.
	req CallRequest
	raw json.RawMessage
	// refused, when set, answers the call instead of running it.
	refused *toolerr.Error
}

// neverRefused are the tools a tool call id problem never keeps from
// running: they stop motion and never start one, and a stop wins at
// every moment (docs/DESIGN.md §4, invariant 10).
func neverRefused(tool string) bool { return tool == ToolStop || tool == ToolCancelTask }

// planToolCalls derives each call's idempotency key from its id and
// refuses, with INVALID_PARAMS, a call whose id is too long or was already
// used by an earlier call of the same message: the message is ambiguous,
// and running both could move the robot twice under one id (docs/DESIGN.md §4,
// invariant 7). The first call with an id runs; stop and cancel_task
// always run. A call without an id gets no key and is never deduplicated.
func planToolCalls(msg assistantMessage) []plannedCall {
	plan := make([]plannedCall, len(msg.ToolCalls))
	first := map[string]int{}
	for i, tc := range msg.ToolCalls {
		pc := plannedCall{
			answerID: tc.ID, raw: tc.Function.Arguments,
			req: CallRequest{
				Tool: tc.Function.Name, SessionID: msg.SessionID,
				Wait: time.Duration(msg.WaitMS) * time.Millisecond,
			},
		}
		if tc.ID == "" {
			pc.answerID = fmt.Sprintf("call_%d", i)
			plan[i] = pc
			continue
		}
		pc.req.toolCallID, pc.req.keyPrefix = tc.ID, msg.IdempotencyKeyPrefix
		j, seen := first[tc.ID]
		switch {
		case neverRefused(tc.Function.Name):
		case len(tc.ID) > maxIDLen:
			pc.refused = fieldError(fmt.Sprintf("tool_calls[%d].id", i), tc.ID[:32]+"…", fmt.Sprintf("a string of at most %d characters", maxIDLen))
			pc.refused.Message += "; the call was not run"
		case seen:
			te := toolerr.New(toolerr.InvalidParams,
				"tool call %d (%s) has the id %q of tool call %d (%s) in the same message; an id names one call, so this one was not run",
				i, shorten(tc.Function.Name), tc.ID, j, shorten(msg.ToolCalls[j].Function.Name))
			te.Suggestion = "give every tool call of a message its own id; if this call is still wanted, send it again as a new tool call with a new id"
			pc.refused = te.With("field", fmt.Sprintf("tool_calls[%d].id", i)).With("received", tc.ID).
				With("allowed", "an id no other tool call of the message has").With("first_index", j)
		}
		if !seen {
			first[tc.ID] = i
		}
		if len(tc.ID) <= maxIDLen {
			pc.req.IdempotencyKey = toolCallKey(msg.SessionID, msg.IdempotencyKeyPrefix, tc.ID)
		}
		plan[i] = pc
	}
	return plan
}

// toolCallKey is the idempotency key of a tool call with an id (before
// submitOnce scopes it to the credential). By default it is derived from
// the session id and the tool call id, each quoted so that no two
// (session, id) pairs share a key: models reuse ids like "call_1" across
// conversations, and two sessions must never answer each other's calls.
// With a prefix it is prefix + id, as it always was, so keys stored
// before the default existed still match.
func toolCallKey(sessionID, prefix, id string) string {
	if prefix != "" {
		return prefix + id
	}
	return "tool_call " + strconv.QuoteToASCII(sessionID) + " " + strconv.QuoteToASCII(id)
}

// shorten bounds a name the caller chose before it goes into a message.
func shorten(name string) string {
	if len(name) > 64 {
		return name[:64] + "…"
	}
	if name == "" {
		return "(no name)"
	}
	return name
}

// ToolCalls runs an assistant message's tool calls: state tools in
// parallel, action tools one at a time in the order given (concurrently
// with the state tools), and answers one tool message per call in the
// original order. A failing call never hides the others' results. Every
// action call with an id is idempotent (see planToolCalls): re-posting the
// message returns the same tasks, never a second motion.
func (s *Server) ToolCalls(r *http.Request, msg assistantMessage) ToolCallsResult {
	ctx := r.Context()
	p := principalOf(r)
	plan := planToolCalls(msg)
	envs := make([]Envelope, len(plan))
	trace := r.Header.Get("X-Request-Id")
	run := func(i int) {
		pc := plan[i]
		req := pc.req
		req.TraceID = trace
		args, argErr := toolCallArguments(pc.raw)
		switch {
		case argErr != nil:
			envs[i] = s.callWithArgError(ctx, p, req, argErr)
		case pc.refused != nil:
			// Through the call path without running: the rate limit and
			// the loop guard still see the call.
			req.Arguments = args
			envs[i] = s.call(ctx, p, req, pc.refused).envelope()
		default:
			req.Arguments = args
			envs[i] = s.Call(ctx, p, req)
		}
	}
	var actionsIdx []int
	var wg sync.WaitGroup
	for i, pc := range plan {
		if t, ok := s.reg.Lookup(pc.req.Tool); ok && t.Kind == KindAction {
			actionsIdx = append(actionsIdx, i)
			continue
		}
		wg.Go(func() {
			run(i)
		})
	}
	wg.Go(func() {
		for _, i := range actionsIdx {
			run(i)
		}
	})
	wg.Wait()

	res := ToolCallsResult{Messages: make([]ToolMessage, len(envs))}
	var okNames, failed []string
	for i, env := range envs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(env)
		res.Messages[i] = ToolMessage{Role: "tool", ToolCallID: plan[i].answerID, Content: strings.TrimSpace(buf.String())}
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
