package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// EndReason says how a turn ended.
type EndReason int

// The ways a turn ends. Only EndAnswered is the model's own final answer;
// for every other the loop wrote the answer.
const (
	// EndAnswered: the model answered without tool calls.
	EndAnswered EndReason = iota
	// EndNoAnswer: the model answered with neither text nor tool calls.
	EndNoAnswer
	// EndMaxIterations: Limits.MaxIterations model calls were spent.
	EndMaxIterations
	// EndRepeatedFailure: one call signature failed Limits.MaxSameFailure times.
	EndRepeatedFailure
	// EndLoopDetected: the bridge answered LOOP_DETECTED.
	EndLoopDetected
	// EndDeadline: the turn's wall-clock budget ran out.
	EndDeadline
	// EndBridgeError: the bridge could not be reached or answered outside its API.
	EndBridgeError
	// EndModelError: the model could not be reached or refused the request.
	EndModelError
	// EndCancelled: the caller cancelled the turn's context (an interrupt).
	EndCancelled
)

var endNames = map[EndReason]string{
	EndAnswered: "answered", EndNoAnswer: "no_answer", EndMaxIterations: "max_iterations",
	EndRepeatedFailure: "repeated_failure", EndLoopDetected: "loop_detected", EndDeadline: "deadline",
	EndBridgeError: "bridge_error", EndModelError: "model_error", EndCancelled: "cancelled",
}

// String returns the reason's name, as logs show it.
func (r EndReason) String() string {
	if s, ok := endNames[r]; ok {
		return s
	}
	return fmt.Sprintf("EndReason(%d)", int(r))
}

// Result is how one turn ended.
type Result struct {
	// Answer is the final message for the user: the model's, or the
	// loop's when a limit ended the turn.
	Answer string
	End    EndReason
	// Iterations is how many times the model was asked.
	Iterations int
	// Calls are the turn's tool calls with their results, in order.
	Calls []CallRecord
	// Tasks are the tasks the loop waited on, as they ended (or were
	// when the turn ended).
	Tasks []TaskStatus
}

// CallRecord is one tool call of a turn and its result.
type CallRecord struct {
	// Call is the call as sent (its ID is the one the bridge saw).
	Call   ToolCall
	Result CallResult
}

// Agent is one conversation with the robot: its transcript, its session
// with the bridge, and the loop that runs each user turn. Turns of one
// Agent run one at a time.
type Agent struct {
	conf   Conf
	log    *slog.Logger
	bridge *bridgeClient
	system string

	mu sync.Mutex // held for a whole turn
	// history is the conversation so far; guarded by mu.
	history []Message
	// usedIDs counts each tool call id sent in this conversation, so a
	// model that reuses "call_1" gets a fresh id for the bridge; guarded
	// by mu.
	usedIDs map[string]int
	// generated numbers the ids the loop gives calls without one.
	generated int
}

// New checks conf and returns an Agent. It does not contact the bridge.
func New(conf Conf) (*Agent, error) {
	if err := conf.fill(); err != nil {
		return nil, err
	}
	a := &Agent{
		conf: conf, log: conf.Logger.With("component", "agent", "session_id", conf.SessionID),
		system: SystemPrompt(conf.Instructions), usedIDs: map[string]int{},
	}
	a.bridge = &bridgeClient{
		base: conf.BridgeURL, token: conf.Token, session: conf.SessionID, hc: conf.HTTPClient,
		stream: &http.Client{Transport: conf.HTTPClient.Transport},
	}
	return a, nil
}

// SessionID returns the session id the bridge sees.
func (a *Agent) SessionID() string { return a.conf.SessionID }

// History returns a copy of the conversation so far.
func (a *Agent) History() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Message(nil), a.history...)
}

// Turn runs one user turn to its end and returns the final answer. A
// failure of the model or the bridge does not make it return an error: it
// ends the turn with the loop's own answer saying so (Result.End tells
// which). The error is for a turn that could not start (an empty prompt).
func (a *Agent) Turn(ctx context.Context, prompt string) (Result, error) {
	prompt = strings.TrimSpace(prompt)
	if prompt == "" {
		return Result{}, errors.New("agent: the prompt is empty")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, a.conf.Limits.TurnTimeout)
	defer cancel()
	t := &turn{a: a, sigs: map[string]*sigState{}, started: time.Now()}
	a.history = append(a.history, Message{Role: RoleUser, Content: prompt})
	res := t.run(ctx)
	if res.End != EndAnswered {
		// The loop's answer joins the transcript, so the next turn's
		// model sees what the user was told.
		a.history = append(a.history, Message{Role: RoleAssistant, Content: res.Answer})
	}
	a.log.Info("turn ended", "end", res.End.String(), "iterations", res.Iterations, "calls", len(res.Calls))
	return res, nil
}

// turn is the state of one Turn.
type turn struct {
	a       *Agent
	started time.Time
	infos   map[string]toolapi.ToolInfo
	tools   json.RawMessage
	sigs    map[string]*sigState
	// actionSeq counts the actions of the turn that succeeded.
	actionSeq int
	// lastRobot is the robot in words as the bridge last reported it.
	lastRobot string
	res       Result
	// ended is the signature that ended the turn (EndRepeatedFailure,
	// EndLoopDetected).
	endedSig *sigState
	// endErr is the cause of EndBridgeError or EndModelError.
	endErr error
	// live are the tasks that were still running when the turn ended.
	live []TaskStatus
	// answers are operator answers the event stream carried while the
	// loop waited, not yet given to the model.
	answers []escalation.Escalation
	// answered are the escalations whose answer the model was given.
	answered map[string]bool
}

func (t *turn) run(ctx context.Context) Result {
	if err := t.fetchTools(ctx); err != nil {
		return t.end(ctx, err, EndBridgeError)
	}
	for {
		if t.res.Iterations >= t.a.conf.Limits.MaxIterations {
			return t.end(ctx, nil, EndMaxIterations)
		}
		t.res.Iterations++
		t.a.conf.Observer.ModelAsked(t.res.Iterations)
		reply, err := t.a.conf.Model.Complete(ctx, Request{System: t.a.system, Messages: t.a.history, Tools: t.tools})
		if err != nil {
			return t.end(ctx, err, EndModelError)
		}
		calls := t.assignIDs(reply.ToolCalls)
		t.a.history = append(t.a.history, Message{Role: RoleAssistant, Content: reply.Content, ToolCalls: calls})
		if len(calls) == 0 {
			if strings.TrimSpace(reply.Content) == "" {
				return t.end(ctx, nil, EndNoAnswer)
			}
			t.res.Answer, t.res.End = reply.Content, EndAnswered
			return t.res
		}
		if end, stop, err := t.runBatch(ctx, calls); stop {
			return t.end(ctx, err, end)
		}
	}
}

// end finishes a turn the loop ends: the answer is the loop's. A context
// that ended turns any reason into what happened: EndDeadline when the
// turn's time ran out, EndCancelled when the caller cancelled it.
func (t *turn) end(ctx context.Context, err error, why EndReason) Result {
	if ctx.Err() != nil && why != EndLoopDetected && why != EndRepeatedFailure {
		why = EndDeadline
		if errors.Is(ctx.Err(), context.Canceled) {
			why = EndCancelled
		}
	}
	t.res.End, t.endErr = why, err
	t.res.Answer = t.loopAnswer()
	return t.res
}

func (t *turn) fetchTools(ctx context.Context) error {
	infos, err := t.a.bridge.toolInfos(ctx)
	if err != nil {
		return err
	}
	t.infos = make(map[string]toolapi.ToolInfo, len(infos))
	for _, ti := range infos {
		t.infos[ti.Name] = ti
	}
	t.tools, err = t.a.bridge.providerTools(ctx, t.a.conf.Model.Format(), t.a.conf.StrictTools)
	return err
}

// assignIDs gives the bridge a stable, unused id for every call: the
// model's own id the first time the conversation sees it; a call without
// an id gets agent_<n>, and an id the model already used in an earlier
// message gets <id>~<n>, so that the bridge (which keys each call by its
// id within the session) treats it as the new call it is. The ids are
// written into the transcript, so every tool message answers the id of
// its call exactly once. Two calls with one id in the same message keep
// it: the bridge runs the first and refuses the others.
func (t *turn) assignIDs(calls []ToolCall) []ToolCall {
	out := make([]ToolCall, len(calls))
	inMsg := map[string]bool{}
	for i, c := range calls {
		switch {
		case c.ID == "":
			t.a.generated++
			c.ID = fmt.Sprintf("agent_%d", t.a.generated)
		case inMsg[c.ID]:
		case t.a.usedIDs[c.ID] > 0:
			n := t.a.usedIDs[c.ID]
			t.a.usedIDs[c.ID] = n + 1
			c.ID = fmt.Sprintf("%s~%d", c.ID, n)
		}
		inMsg[c.ID] = true
		t.a.usedIDs[c.ID]++
		out[i] = c
	}
	return out
}

// isActionTool reports whether the bridge lists name as an action.
func (t *turn) isActionTool(name string) bool {
	ti, ok := t.infos[name]
	return ok && ti.Kind == toolapi.KindAction
}

// runBatch sends one assistant message's tool calls, appends their tool
// messages, waits for the tasks they started and appends the update. stop
// is true when the turn must end, for the reason end.
func (t *turn) runBatch(ctx context.Context, calls []ToolCall) (end EndReason, stop bool, err error) {
	n := len(calls)
	contents := make([]string, n)
	sigs := make([]*sigState, n)
	var send []int
	var waitUntil time.Time
	inBatch := map[string]int{}
	sendsAction := false
	for i, c := range calls {
		s := t.sig(c)
		sigs[i] = s
		if local := t.gate(i, c, s, inBatch); local != "" {
			contents[i] = local
			t.a.conf.Observer.ToolCall(c, false)
			continue
		}
		if _, seen := inBatch[s.key]; !seen {
			inBatch[s.key] = i
		}
		send = append(send, i)
		sendsAction = sendsAction || t.isActionTool(c.Name) || c.Name == toolapi.ToolRequestOperatorHelp
		if s.retryAt.After(waitUntil) {
			waitUntil = s.retryAt
		}
		t.a.conf.Observer.ToolCall(c, true)
	}

	var stream *eventStream
	if len(send) > 0 {
		if sendsAction {
			// Opened before the calls are sent: every transition of the
			// tasks they start is on it.
			if stream, err = t.a.bridge.openEvents(ctx); err != nil {
				t.answerUnsent(calls, send, contents, "it was not sent: the bridge's event stream could not be opened")
				t.appendResults(calls, contents, sigs)
				return EndBridgeError, true, err
			}
			defer stream.Close()
		}
		if d := time.Until(waitUntil); d > 0 {
			if !sleepCtx(ctx, d) {
				t.answerUnsent(calls, send, contents, "it was not sent: the time for this request ran out while waiting to retry it")
				t.appendResults(calls, contents, sigs)
				return EndDeadline, true, ctx.Err()
			}
		}
		batch := make([]ToolCall, len(send))
		for j, i := range send {
			batch[j] = calls[i]
		}
		out, err := t.a.bridge.toolCalls(ctx, batch)
		if err != nil {
			t.answerUnsent(calls, send, contents, "the bridge did not answer, so whether it ran is unknown; it was not sent again")
			t.appendResults(calls, contents, sigs)
			return EndBridgeError, true, err
		}
		for j, i := range send {
			contents[i] = out.Messages[j].Content
		}
	}
	results := t.appendResults(calls, contents, sigs)

	for i, r := range results {
		if r.ErrorType == string(toolerr.LoopDetected) {
			t.endedSig = sigs[i]
			return EndLoopDetected, true, nil
		}
	}

	// Wait for the tasks the sent actions started.
	var waitIDs []string
	seen := map[string]TaskStatus{}
	for _, i := range send {
		r := results[i]
		if r.TaskID != "" && r.TaskStatus != "" && !fsm.State(r.TaskStatus).Terminal() && t.isActionTool(calls[i].Name) {
			waitIDs = append(waitIDs, r.TaskID)
			seen[r.TaskID] = TaskStatus{ID: r.TaskID, Tool: calls[i].Name, Status: r.TaskStatus}
		}
	}
	if len(waitIDs) > 0 {
		final, err := t.waitTasks(ctx, stream, seen)
		t.taskOutcomes(calls, results, sigs, final)
		if err != nil {
			return EndDeadline, true, err
		}
		t.appendUpdate(waitIDs, final)
	}
	// Wait for the operator's answer to each request for help of the
	// batch (the stream was opened before the calls were sent).
	if helpIDs := t.helpRequests(calls, send, contents); len(helpIDs) > 0 {
		if err := t.waitAnswers(ctx, stream, helpIDs); err != nil {
			t.appendAnswers()
			return EndDeadline, true, err
		}
	}
	t.appendAnswers()
	for _, s := range sigs {
		if s.failures >= t.a.conf.Limits.MaxSameFailure {
			t.endedSig = s
			return EndRepeatedFailure, true, nil
		}
	}
	return 0, false, nil
}

// answerUnsent answers the calls of send that have no content yet with
// the loop's own failure envelope saying why.
func (t *turn) answerUnsent(calls []ToolCall, send []int, contents []string, why string) {
	for _, i := range send {
		if contents[i] == "" {
			contents[i] = localFailure(calls[i].Name, toolerr.Unavailable, why, "tell the user; do not send it again before checking get_robot_state", t.lastRobot)
		}
	}
}

// appendResults appends one tool message per call, in order, each within
// the size budget, and records the results.
func (t *turn) appendResults(calls []ToolCall, contents []string, sigs []*sigState) []CallResult {
	results := make([]CallResult, len(calls))
	for i, c := range calls {
		r := parseResult(c.Name, contents[i])
		content, summarized := fitResult(contents[i], t.a.conf.Limits.MaxResultBytes, t.argNames(c.Name))
		r.Summarized = summarized
		if r.Robot != "" && !r.NotSent {
			t.lastRobot = r.Robot
		}
		results[i] = r
		t.a.history = append(t.a.history, Message{Role: RoleTool, ToolCallID: c.ID, Content: content, IsError: !r.OK})
		t.res.Calls = append(t.res.Calls, CallRecord{Call: c, Result: r})
		t.record(sigs[i], c, r)
		t.a.conf.Observer.ToolResult(c, r)
	}
	return results
}

// argNames are the argument names of a tool's schema, for a summary's note.
func (t *turn) argNames(tool string) []string {
	props, _ := t.infos[tool].InputSchema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	return names
}

// taskOutcomes records how each waited task ended against the call that
// started it.
func (t *turn) taskOutcomes(calls []ToolCall, results []CallResult, sigs []*sigState, final map[string]TaskStatus) {
	for i, r := range results {
		ts, ok := final[r.TaskID]
		if r.TaskID == "" || !ok || !t.isActionTool(calls[i].Name) {
			continue
		}
		if !fsm.State(ts.Status).Terminal() {
			t.live = append(t.live, ts)
			continue
		}
		t.res.Tasks = append(t.res.Tasks, ts)
		t.recordTask(sigs[i], calls[i], ts)
	}
}

// appendUpdate gives the model the waited tasks' outcomes in one
// user-role message (see the package comment for why that role).
func (t *turn) appendUpdate(ids []string, final map[string]TaskStatus) {
	type taskLine struct {
		ID     string             `json:"id"`
		Tool   string             `json:"tool"`
		Status string             `json:"status"`
		Text   string             `json:"text"`
		Error  *toolapi.ErrorBody `json:"error,omitempty"`
	}
	u := struct {
		Type  string     `json:"type"`
		From  string     `json:"from"`
		Tasks []taskLine `json:"tasks"`
		Robot string     `json:"robot,omitempty"`
	}{
		Type: "task_update",
		From: "the agent loop, not the user: it waited on the bridge's event stream for the tasks your action calls started",
	}
	for _, id := range ids {
		ts := final[id]
		tl := taskLine{ID: id, Tool: ts.Tool, Status: ts.Status, Text: ts.Text}
		if ts.ErrorType != "" {
			tl.Error = &toolapi.ErrorBody{Type: toolerr.Type(ts.ErrorType), Message: ts.ErrorMessage, Retryable: ts.Retryable, Suggestion: ts.Suggestion}
		}
		u.Tasks = append(u.Tasks, tl)
	}
	if t.lastRobot != "" {
		u.Robot = "as last reported: " + t.lastRobot
	}
	raw, _ := json.Marshal(u)
	content, _ := fitResult(string(raw), t.a.conf.Limits.MaxResultBytes, nil)
	t.a.history = append(t.a.history, Message{Role: RoleUser, Content: content})
}

// waitTasks waits on the event stream until every task of seen (each
// as its call's envelope showed it) is terminal, and returns each as last
// seen. It returns the context's error when the turn's time ran out first.
func (t *turn) waitTasks(ctx context.Context, st *eventStream, seen map[string]TaskStatus) (map[string]TaskStatus, error) {
	final := make(map[string]TaskStatus, len(seen))
	pending := map[string]bool{}
	for id, ts := range seen {
		pending[id] = true
		final[id] = ts
	}
	see := func(d *toolapi.TaskData) {
		if d == nil || !pending[d.ID] {
			return
		}
		ts := taskStatusOf(*d)
		final[d.ID] = ts
		t.a.conf.Observer.TaskUpdate(ts)
		if fsm.State(ts.Status).Terminal() {
			delete(pending, d.ID)
		}
	}
	reread := func() error {
		for id := range pending {
			env, err := t.a.bridge.task(ctx, id)
			if err != nil {
				return err
			}
			if d, ok := taskDataOf(env); ok {
				see(&d)
			}
		}
		return nil
	}
	for len(pending) > 0 {
		select {
		case ev := <-st.events:
			switch ev.Kind {
			case "task":
				see(ev.Task)
			case "state":
				if ev.Robot != "" {
					t.lastRobot = ev.Robot
				}
			case "escalation":
				t.seeAnswer(ev.Escalation)
			case "missed":
				// The stream lost events: read the tasks as they are now.
				if err := reread(); err != nil {
					return final, err
				}
			}
		case <-st.done:
			// The stream ended (the bridge restarted or dropped it):
			// reopen it, then read the tasks as they are now. The pause
			// keeps a stream that keeps ending from becoming a busy loop.
			if !sleepCtx(ctx, reopenPause) {
				return final, ctx.Err()
			}
			ns, err := t.a.bridge.openEvents(ctx)
			if err != nil {
				return final, err
			}
			defer ns.Close()
			st = ns
			if err := reread(); err != nil {
				return final, err
			}
		case <-ctx.Done():
			return final, ctx.Err()
		}
	}
	return final, nil
}

func taskStatusOf(d toolapi.TaskData) TaskStatus {
	ts := TaskStatus{ID: d.ID, Tool: d.Tool, Status: string(d.Status), Fraction: d.Progress.Fraction, Text: d.Text}
	if d.Progress.Text != "" {
		ts.Text = d.Progress.Text
	}
	if d.Error != nil {
		ts.ErrorType, ts.ErrorMessage, ts.Retryable, ts.Suggestion = string(d.Error.Type), d.Error.Message, d.Error.Retryable, d.Error.Suggestion
	}
	return ts
}

// taskDataOf reads get_task's data out of its envelope.
func taskDataOf(env toolapi.Envelope) (toolapi.TaskData, bool) {
	var d toolapi.TaskData
	if !env.OK || env.Data == nil {
		return d, false
	}
	raw, err := json.Marshal(env.Data)
	if err != nil || json.Unmarshal(raw, &d) != nil || d.ID == "" {
		return d, false
	}
	return d, true
}

// parseResult reads the typed fields of a tool message's envelope.
func parseResult(tool, content string) CallResult {
	var env struct {
		toolapi.Envelope
		NotSent bool `json:"not_sent"`
	}
	if err := json.Unmarshal([]byte(content), &env); err != nil {
		return CallResult{Tool: tool, ErrorType: string(toolerr.Internal), Message: "the bridge's answer was not an envelope"}
	}
	r := CallResult{Tool: tool, OK: env.OK, Text: env.Text, Robot: env.Robot, NotSent: env.NotSent}
	if env.Error != nil {
		r.ErrorType, r.Retryable, r.RetryAfterMS, r.Message = string(env.Error.Type), env.Error.Retryable, env.Error.RetryAfterMS, env.Error.Message
	}
	if env.Task != nil {
		r.TaskID, r.TaskStatus = env.Task.ID, string(env.Task.Status)
	}
	return r
}

// reopenPause is how long the loop waits before it reopens an event
// stream that ended.
const reopenPause = 250 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
