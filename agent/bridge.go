package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// maxBridgeBody bounds what the loop reads of one bridge answer.
const maxBridgeBody = 8 << 20

// bridgeClient speaks the bridge's agent API with the agent token.
type bridgeClient struct {
	base    string
	token   string
	session string
	hc      *http.Client
	// stream has no overall timeout: an event stream lasts as long as
	// its context (the turn's).
	stream *http.Client
}

// BridgeError is a failure to talk to the bridge at all (not a tool's
// failure, which is an envelope): unreachable, an HTTP error, or an answer
// that is not what the API promises.
type BridgeError struct {
	// Op is what the loop was doing ("send the tool calls").
	Op string
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Message is the bridge's error message, when it sent one.
	Message string
	Err     error
}

func (e *BridgeError) Error() string {
	switch {
	case e.Status != 0 && e.Message != "":
		return fmt.Sprintf("bridge: %s: HTTP %d: %s", e.Op, e.Status, e.Message)
	case e.Status != 0:
		return fmt.Sprintf("bridge: %s: HTTP %d", e.Op, e.Status)
	}
	return fmt.Sprintf("bridge: %s: %v", e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *BridgeError) Unwrap() error { return e.Err }

func (c *bridgeClient) do(ctx context.Context, op, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return &BridgeError{Op: op, Err: err}
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return &BridgeError{Op: op, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &BridgeError{Op: op, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBridgeBody+1))
	if err != nil {
		return &BridgeError{Op: op, Status: resp.StatusCode, Err: err}
	}
	if len(raw) > maxBridgeBody {
		return &BridgeError{Op: op, Status: resp.StatusCode, Err: fmt.Errorf("answer longer than %d bytes", maxBridgeBody)}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *toolapi.ErrorBody `json:"error"`
		}
		be := &BridgeError{Op: op, Status: resp.StatusCode}
		if json.Unmarshal(raw, &e) == nil && e.Error != nil {
			be.Message = e.Error.Message
		}
		return be
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &BridgeError{Op: op, Status: resp.StatusCode, Err: fmt.Errorf("answer is not the API's JSON: %w", err)}
	}
	return nil
}

// toolInfos returns the native tool list (kind, approval, schema).
func (c *bridgeClient) toolInfos(ctx context.Context) ([]toolapi.ToolInfo, error) {
	var out struct {
		Tools []toolapi.ToolInfo `json:"tools"`
	}
	if err := c.do(ctx, "list the tools", http.MethodGet, "/v1/tools", nil, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// providerTools returns the tools array in a model API's format.
func (c *bridgeClient) providerTools(ctx context.Context, format string, strict bool) (json.RawMessage, error) {
	q := url.Values{"format": {format}}
	if strict {
		q.Set("strict", "true")
	}
	var out json.RawMessage
	if err := c.do(ctx, "list the tools as "+format, http.MethodGet, "/v1/tools?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// wireCall is one tool call as an OpenAI-style assistant message carries
// it, the shape POST /v1/tool_calls takes.
type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCalls sends one batch through POST /v1/tool_calls. It is called at
// most once per batch: a tool call is never retried.
func (c *bridgeClient) toolCalls(ctx context.Context, calls []ToolCall) (toolapi.ToolCallsResult, error) {
	wire := make([]wireCall, len(calls))
	for i, tc := range calls {
		wire[i].ID, wire[i].Type = tc.ID, "function"
		wire[i].Function.Name, wire[i].Function.Arguments = tc.Name, tc.Arguments
	}
	body := map[string]any{"role": "assistant", "session_id": c.session, "tool_calls": wire}
	var out toolapi.ToolCallsResult
	if err := c.do(ctx, "send the tool calls", http.MethodPost, "/v1/tool_calls", body, &out); err != nil {
		return out, err
	}
	if len(out.Messages) != len(calls) {
		return out, &BridgeError{
			Op: "send the tool calls", Status: http.StatusOK,
			Err: fmt.Errorf("%d tool calls sent, %d answers", len(calls), len(out.Messages)),
		}
	}
	return out, nil
}

// task reads a task as it is now (GET /v1/tasks/{id}): get_task's envelope.
func (c *bridgeClient) task(ctx context.Context, id string) (toolapi.Envelope, error) {
	var env toolapi.Envelope
	err := c.do(ctx, "read task "+id, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, &env)
	return env, err
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	Name string
	Data []byte
	ID   string
}

// maxSSELine bounds one line of the event stream.
const maxSSELine = 1 << 20

// readSSE reads events from r until it ends or fails, calling fn for
// each. It follows the SSE format: "event:", "data:" (joined by newlines),
// "id:", comments and "retry:" ignored, a blank line dispatches.
func readSSE(r io.Reader, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var ev sseEvent
	var data [][]byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 || ev.Name != "" {
				ev.Data = bytes.Join(data, []byte("\n"))
				if ev.Name == "" {
					ev.Name = "message"
				}
				if !fn(ev) {
					return nil
				}
			}
			ev, data = sseEvent{}, nil
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			data = append(data, bytes.Clone(value))
		case "id":
			ev.ID = string(value)
		}
	}
	return sc.Err()
}

// streamEvent is what the loop reads of the agent event stream.
type streamEvent struct {
	// Kind is hello, task, state, escalation or missed.
	Kind string
	// Task is set for a task event and for a hello naming a task.
	Task *toolapi.TaskData
	// Text is the bridge's sentence.
	Text string
	// Robot is the robot's state in words (state and hello events).
	Robot string
	// Escalation is set for an escalation event: a request for an
	// operator's help of this credential was opened or answered.
	Escalation *escalation.Escalation
}

// decodeStreamEvent decodes one agent stream event; ok is false for an
// event the loop has no use for.
func decodeStreamEvent(ev sseEvent) (streamEvent, bool, error) {
	switch ev.Name {
	case "hello":
		var h struct {
			Text  string             `json:"text"`
			Robot toolapi.RobotEvent `json:"robot"`
			Task  *toolapi.TaskData  `json:"task"`
		}
		if err := json.Unmarshal(ev.Data, &h); err != nil {
			return streamEvent{}, false, fmt.Errorf("hello event: %w", err)
		}
		return streamEvent{Kind: "hello", Task: h.Task, Text: h.Text, Robot: h.Robot.Summary}, true, nil
	case "task":
		var w struct {
			Data toolapi.TaskEvent `json:"data"`
		}
		if err := json.Unmarshal(ev.Data, &w); err != nil {
			return streamEvent{}, false, fmt.Errorf("task event: %w", err)
		}
		if w.Data.Task.ID == "" {
			return streamEvent{}, false, errors.New("task event without a task id")
		}
		return streamEvent{Kind: "task", Task: &w.Data.Task, Text: w.Data.Text}, true, nil
	case "state":
		var w struct {
			Data toolapi.RobotEvent `json:"data"`
		}
		if err := json.Unmarshal(ev.Data, &w); err != nil {
			return streamEvent{}, false, fmt.Errorf("state event: %w", err)
		}
		return streamEvent{Kind: "state", Text: w.Data.Text, Robot: w.Data.Summary}, true, nil
	case "escalation":
		var w struct {
			Data toolapi.EscalationEvent `json:"data"`
		}
		if err := json.Unmarshal(ev.Data, &w); err != nil {
			return streamEvent{}, false, fmt.Errorf("escalation event: %w", err)
		}
		if w.Data.Escalation.ID == "" {
			return streamEvent{}, false, errors.New("escalation event without an escalation id")
		}
		return streamEvent{Kind: "escalation", Text: w.Data.Text, Escalation: &w.Data.Escalation}, true, nil
	case "missed":
		var m struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			return streamEvent{}, false, fmt.Errorf("missed event: %w", err)
		}
		return streamEvent{Kind: "missed", Text: m.Text}, true, nil
	}
	return streamEvent{}, false, nil
}

// eventStream is one open GET /v1/agent/events.
type eventStream struct {
	events <-chan streamEvent
	// done is closed when the stream has ended; err then says why.
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

// openEvents opens the agent event stream and returns once its hello has
// arrived, so every task transition after it is on the stream.
func (c *bridgeClient) openEvents(ctx context.Context) (*eventStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.base+"/v1/agent/events", nil)
	if err != nil {
		cancel()
		return nil, &BridgeError{Op: "open the event stream", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.stream.Do(req)
	if err != nil {
		cancel()
		return nil, &BridgeError{Op: "open the event stream", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		cancel()
		return nil, &BridgeError{Op: "open the event stream", Status: resp.StatusCode}
	}
	ch := make(chan streamEvent, 256)
	st := &eventStream{events: ch, done: make(chan struct{}), cancel: cancel}
	hello := make(chan struct{})
	go func() {
		defer close(st.done)
		defer func() { _ = resp.Body.Close() }()
		sawHello := false
		st.err = readSSE(resp.Body, func(ev sseEvent) bool {
			se, ok, err := decodeStreamEvent(ev)
			if err != nil || !ok {
				return true
			}
			if se.Kind == "hello" && !sawHello {
				sawHello = true
				close(hello)
			}
			select {
			case ch <- se:
				return true
			case <-sctx.Done():
				return false
			}
		})
		if st.err == nil {
			st.err = io.ErrUnexpectedEOF
		}
	}()
	select {
	case <-hello:
		return st, nil
	case <-st.done:
		cancel()
		return nil, &BridgeError{Op: "open the event stream", Err: fmt.Errorf("stream ended before its hello: %w", st.err)}
	case <-ctx.Done():
		cancel()
		<-st.done
		return nil, &BridgeError{Op: "open the event stream", Err: ctx.Err()}
	}
}

// Close ends the stream and waits for its reader.
func (s *eventStream) Close() {
	s.cancel()
	<-s.done
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// canonicalArgs is a call's arguments in one spelling, for its
// signature: the bridge's own repair reads them (so `{label: 'cup',}` and
// `{"label":"cup"}` are the same call), nulls are dropped (the bridge
// reads a null as "not given"), and keys are sorted. Arguments the repair
// cannot read are their trimmed text.
func canonicalArgs(raw string) string {
	if strings.TrimSpace(raw) == "" {
		return "{}"
	}
	args, _, err := toolapi.ExtractArguments(raw)
	if err != nil {
		return "unparsed:" + strings.TrimSpace(raw)
	}
	for k, v := range args {
		if v == nil {
			delete(args, k)
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "unparsed:" + strings.TrimSpace(raw)
	}
	return string(b)
}
