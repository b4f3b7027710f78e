package agent

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The rule that keeps the loop from retrying an action (package comment):
// per turn, each call signature — tool and canonical arguments — keeps
// what became of it, and an action's repeat is answered by the loop
// instead of the bridge when repeating it cannot be a new request.

// sigState is what a turn knows of one call signature.
type sigState struct {
	key  string
	tool string
	// args are the canonical arguments.
	args string
	// failures counts the signature's failures in a row (ok false,
	// refusals by the loop and tasks that ended other than succeeded).
	failures int
	// last is the signature's latest result.
	last CallResult
	// lastTask is the task of its latest call, as it ended.
	lastTask *TaskStatus
	// blocked says why a repeat of this action is not sent; "" when it
	// may be sent. blockedType is the type of the failure behind it.
	blocked     string
	blockedType toolerr.Type
	// succeededAt is the turn's actionSeq right after this action last
	// succeeded; 0 when it has not.
	succeededAt int
	// succeededTask is the id of the task of that success.
	succeededTask string
	// retryAt is when a retryable failure's retry_after_ms has passed.
	retryAt time.Time
}

func (t *turn) sig(c ToolCall) *sigState {
	args := canonicalArgs(c.Arguments)
	key := c.Name + "\x00" + args
	s, ok := t.sigs[key]
	if !ok {
		s = &sigState{key: key, tool: c.Name, args: args}
		t.sigs[key] = s
	}
	return s
}

// gatedAction reports whether the loop may hold back a repeat of tool:
// every action the bridge lists, except the two that only end motion —
// a stop wins at every moment (docs/DESIGN.md §4, invariant 10).
func (t *turn) gatedAction(tool string) bool {
	return t.isActionTool(tool) && tool != toolapi.ToolStop && tool != toolapi.ToolCancelTask
}

// gate returns the loop's own answer for a call it does not send, or ""
// to send it. inBatch holds the signatures already sent in this batch.
func (t *turn) gate(i int, c ToolCall, s *sigState, inBatch map[string]int) string {
	if !t.gatedAction(c.Name) {
		return ""
	}
	if j, ok := inBatch[s.key]; ok {
		te := toolerr.New(toolerr.InvalidParams,
			"not sent: tool call %d repeats tool call %d of the same message (%s with the same arguments), which was sent", i, j, c.Name)
		te.Suggestion = "one call per action; follow the first call's task instead of repeating it"
		return localEnvelope(c.Name, te, t.lastRobot)
	}
	switch {
	case s.blocked != "":
		te := &toolerr.Error{
			Type: s.blockedType, Message: "not sent: " + s.blocked,
			Suggestion: "do not call it again with the same arguments; tell the user what happened, or do something different",
		}
		return localEnvelope(c.Name, te, t.lastRobot)
	case s.succeededAt > 0 && s.succeededAt == t.actionSeq:
		text := fmt.Sprintf("Not sent again: the same %s call (same arguments) already succeeded in this request (task %s) and no other motion ran since, so it would only do the same again.",
			c.Name, s.succeededTask)
		return localOK(c.Name, text, s.succeededTask, t.lastRobot)
	}
	return ""
}

// record notes a call's result against its signature.
func (t *turn) record(s *sigState, c ToolCall, r CallResult) {
	s.last = r
	if r.OK {
		s.failures = 0
		if t.gatedAction(c.Name) && !r.NotSent && r.TaskStatus == string(fsm.Succeeded) {
			t.actionSeq++
			s.succeededAt, s.succeededTask = t.actionSeq, r.TaskID
		}
		return
	}
	s.failures++
	if r.Retryable && r.RetryAfterMS > 0 {
		s.retryAt = time.Now().Add(time.Duration(r.RetryAfterMS) * time.Millisecond)
	}
	if !r.Retryable && !r.NotSent && t.gatedAction(c.Name) {
		s.blocked = fmt.Sprintf("the same %s call (same arguments) already failed in this request, and repeating it unchanged cannot help: %s", c.Name, toolerr.Clause(r.Message))
		s.blockedType = toolerr.Type(r.ErrorType)
	}
}

// recordTask notes how the task of a call ended.
func (t *turn) recordTask(s *sigState, c ToolCall, ts TaskStatus) {
	s.lastTask = &ts
	if ts.Status == string(fsm.Succeeded) {
		s.failures = 0
		t.actionSeq++
		s.succeededAt, s.succeededTask = t.actionSeq, ts.ID
		s.blocked = ""
		return
	}
	s.failures++
	s.succeededAt = 0
	if t.gatedAction(c.Name) {
		typ := toolerr.Type(ts.ErrorType)
		if !typ.Valid() {
			typ = toolerr.ActionFailed
		}
		msg := ts.ErrorMessage
		if msg == "" {
			msg = "task " + ts.ID + " ended " + ts.Status
		}
		s.blocked = fmt.Sprintf("the same %s call (same arguments) already ran in this request as task %s, which ended %s: %s", c.Name, ts.ID, ts.Status, toolerr.Clause(msg))
		s.blockedType = typ
	}
}

// local is the envelope of a call the loop answered itself.
type local struct {
	OK      bool               `json:"ok"`
	Tool    string             `json:"tool"`
	NotSent bool               `json:"not_sent"`
	Text    string             `json:"text,omitempty"`
	Task    *localTask         `json:"task,omitempty"`
	Robot   string             `json:"robot,omitempty"`
	Error   *toolapi.ErrorBody `json:"error,omitempty"`
}

type localTask struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func robotWords(lastRobot string) string {
	if lastRobot == "" {
		return ""
	}
	return "as last reported: " + lastRobot
}

func localEnvelope(tool string, te *toolerr.Error, lastRobot string) string {
	body := toolapi.ErrorBodyOf(te)
	// The loop's refusals are never to be retried as they are.
	body.Retryable, body.RetryAfterMS = false, 0
	raw, _ := json.Marshal(local{Tool: tool, NotSent: true, Robot: robotWords(lastRobot), Error: body})
	return string(raw)
}

func localFailure(tool string, typ toolerr.Type, msg, suggestion, lastRobot string) string {
	return localEnvelope(tool, &toolerr.Error{Type: typ, Message: msg, Suggestion: suggestion}, lastRobot)
}

func localOK(tool, text, taskID, lastRobot string) string {
	l := local{OK: true, Tool: tool, NotSent: true, Text: text, Robot: robotWords(lastRobot)}
	if taskID != "" {
		l.Task = &localTask{ID: taskID, Status: string(fsm.Succeeded)}
	}
	raw, _ := json.Marshal(l)
	return string(raw)
}
