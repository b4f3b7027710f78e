package toolapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// ToolRequestOperatorHelp is the operator hand-off's tool.
const ToolRequestOperatorHelp = "request_operator_help"

// Escalations is the operator hand-off as the tool API sees it.
// *escalation.Service implements it.
type Escalations interface {
	Open(ctx context.Context, r escalation.OpenRequest) (escalation.Escalation, error)
	OpenFor(agent, session string, src escalation.Source) bool
	TakeAnswer(ctx context.Context, agent, session string) (escalation.Escalation, bool)
}

var _ Escalations = (*escalation.Service)(nil)

// OperatorMessage is an operator's answer to the session's request for
// help, carried once by the envelope of the session's next call.
type OperatorMessage struct {
	EscalationID string `json:"escalation_id"`
	Text         string `json:"text"`
	By           string `json:"by"`
}

func (b builder) requestOperatorHelp() *Tool {
	return &Tool{
		Name: ToolRequestOperatorHelp, Kind: KindState, Writes: true,
		Description: "Ask a human operator for help. Use it when you are stuck: the same action keeps failing, " +
			"a fault or an e-stop stopped your task, the instruction is ambiguous, or you cannot tell what to do safely. " +
			"Call it instead of retrying. It moves nothing and needs no approval; it returns at once with the escalation " +
			"(status open). The operator's answer arrives as an \"escalation\" event on the agent event stream and in the " +
			"operator_message of the first tool result you get after they answer. summary: what you tried, what went wrong and what you need (1 to 2000 characters); " +
			`task_id: optional, the task it is about. Example: {"summary": "grasp of cup-1 failed 3 times with ACTION_FAILED; is the cup still on the table?", "task_id": "t-4"}.`,
		InputSchema: object(map[string]any{
			"summary": map[string]any{
				"type": "string", "minLength": 1, "maxLength": escalation.MaxTextLen,
				"description": "what you tried, what went wrong and what you need from the operator",
			},
			"task_id": map[string]any{
				"type": "string", "minLength": 1, "maxLength": 128,
				"description": "optional; the id of your task this is about, e.g. \"t-1\"",
			},
		}, "summary"),
		Timeout: defaultStateTimeoutMS * time.Millisecond,
	}
}

// noEscalations answers request_operator_help with UNAVAILABLE.
type noEscalations struct{}

var _ Escalations = noEscalations{}

func (noEscalations) Open(context.Context, escalation.OpenRequest) (escalation.Escalation, error) {
	return escalation.Escalation{}, &toolerr.Error{
		Type: toolerr.Unavailable, Message: "no operator hand-off is configured on this bridge", RetryAfter: time.Minute,
		Suggestion: "tell the user you are stuck and what you need; do not retry request_operator_help now",
	}
}
func (noEscalations) OpenFor(string, string, escalation.Source) bool { return false }
func (noEscalations) TakeAnswer(context.Context, string, string) (escalation.Escalation, bool) {
	return escalation.Escalation{}, false
}

// history keeps each session's last tool calls for its escalations.
type history struct {
	mu       sync.Mutex
	sessions map[sessionKey]*recentCalls // guarded by mu
	swept    time.Time                   // guarded by mu; the last sweep of idle sessions
}

// recentCalls is a session's last escalation.MaxRecent calls, a ring:
// the newest at next-1.
type recentCalls struct {
	calls [escalation.MaxRecent]escalation.Call
	next  int
	n     int
	seen  time.Time
}

func newHistory() *history {
	return &history{sessions: map[sessionKey]*recentCalls{}}
}

// historyIdle forgets a session's calls after this long without one.
const historyIdle = time.Hour

func (h *history) add(key sessionKey, c escalation.Call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.At.Sub(h.swept) > time.Minute {
		for k, r := range h.sessions {
			if c.At.Sub(r.seen) > historyIdle {
				delete(h.sessions, k)
			}
		}
		h.swept = c.At
	}
	r := h.sessions[key]
	if r == nil {
		r = &recentCalls{}
		h.sessions[key] = r
	}
	r.calls[r.next] = c
	r.next = (r.next + 1) % len(r.calls)
	r.n = min(r.n+1, len(r.calls))
	r.seen = c.At
}

// recent returns the session's last calls, oldest first.
func (h *history) recent(key sessionKey) []escalation.Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.sessions[key]
	if r == nil || r.n == 0 {
		return nil
	}
	out := make([]escalation.Call, 0, r.n)
	for i := range r.n {
		out = append(out, r.calls[(r.next-r.n+i+len(r.calls))%len(r.calls)])
	}
	return out
}

// shorten cuts s to n characters, marking the cut.
func cutText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// callRecord is one call as an escalation shows it: arguments redacted.
func (s *Server) callRecord(at time.Time, tool string, args map[string]any, env Envelope) escalation.Call {
	// No arguments are "{}" as Redact and json.Marshal would write them.
	rawArgs := "{}"
	if len(args) > 0 {
		raw, _ := json.Marshal(s.reg.Redact(tool, args))
		rawArgs = string(raw)
	}
	c := escalation.Call{At: at, Tool: cutText(tool, 64), Args: cutText(rawArgs, 200), OK: env.OK}
	if env.Error != nil {
		c.ErrorType, c.Message = string(env.Error.Type), cutText(env.Error.Message, 300)
	} else {
		c.Message = cutText(env.Text, 300)
	}
	return c
}

// requestHelp runs request_operator_help; u is the robot it names (nil:
// none, on a fleet).
func (s *Server) requestHelp(ctx context.Context, p Principal, u *unit, req CallRequest, args map[string]any) outcome {
	summary, _ := args["summary"].(string)
	sum, err := escalation.NormalizeText("summary", summary)
	if err != nil {
		return fail(fieldError("summary", cutText(summary, 64), "1 to 2000 characters of text saying what you need (control characters are removed)"))
	}
	taskID, _ := args["task_id"].(string)
	if taskID != "" && !s.sessionTask(p, u, req.SessionID, taskID) {
		return fail(fieldError("task_id", cutText(taskID, 64), "the id of one of this session's tasks, or no task_id"))
	}
	robotID := ""
	if s.multi() && u != nil {
		// The escalation carries its robot, and its summary names it for
		// an operator reading the text alone.
		robotID = u.id
		sum = cutText("Robot "+u.id+": "+sum, escalation.MaxTextLen)
	}
	e, err := s.escalate(ctx, p.Name, req.SessionID, taskID, robotID, sum, escalation.SourceAgent)
	if err != nil {
		return fail(err)
	}
	return outcome{
		data: map[string]any{"escalation": e},
		text: fmt.Sprintf("An operator has been asked for help (escalation %s, status open). Their answer will arrive as an "+
			"\"escalation\" event on your event stream and in the operator_message of the first tool result you get after they answer; "+
			"until then do not retry what failed.", e.ID),
	}
}

// sessionTask reports whether task id is one of the session's: on robot
// u, or, when the call names no robot, on any robot of the fleet (task
// ids are each runner's own, so the first robot with such a task of
// this session is the one).
func (s *Server) sessionTask(p Principal, u *unit, session, id string) bool {
	us := []*unit{u}
	if u == nil {
		us = s.units()
	}
	for _, u := range us {
		if v, err := u.tasks.Get(id); err == nil && v.Principal == p.Name && v.SessionID == session {
			return true
		}
	}
	return false
}

// escalate files an escalation with the session's recent calls.
func (s *Server) escalate(ctx context.Context, agent, session, taskID, robotID, summary string, src escalation.Source) (escalation.Escalation, error) {
	e, err := s.conf.Escalations.Open(ctx, escalation.OpenRequest{
		SessionID: session, Agent: agent, TaskID: taskID, RobotID: robotID, Summary: summary, Source: src,
		Recent: s.hist.recent(sessionKey{principal: agent, id: session}),
	})
	if err != nil {
		if te, ok := errors.AsType[*toolerr.Error](err); ok {
			return e, te
		}
		s.log.Error("escalation not filed", "source", src, "err", err)
		return e, &toolerr.Error{Type: toolerr.Unavailable, Message: "the request for help could not be recorded", RetryAfter: 5 * time.Second}
	}
	return e, nil
}

// Escalate files an escalation the bridge raises by itself (a fault that
// latched during the agent's task on robot robotID) for agent's session,
// with the session's recent tool calls.
func (s *Server) Escalate(ctx context.Context, agent, session, taskID, robotID, summary string, src escalation.Source) (escalation.Escalation, error) {
	return s.escalate(ctx, agent, session, taskID, robotID, summary, src)
}

// loopEscalation raises one escalation for the session's loop episode:
// the call that first got LOOP_DETECTED, and none while one is open.
func (s *Server) loopEscalation(ctx context.Context, p Principal, req CallRequest, le *toolerr.Error) {
	if n, _ := le.Details["count"].(int); n != s.conf.LoopThreshold {
		return
	}
	if s.conf.Escalations.OpenFor(p.Name, req.SessionID, escalation.SourceLoopDetected) {
		return
	}
	sum := "The agent's session repeats a failing call: " + strings.TrimSuffix(le.Message, ".") + ". The bridge refuses it with LOOP_DETECTED."
	if _, err := s.escalate(context.WithoutCancel(ctx), p.Name, req.SessionID, "", "", sum, escalation.SourceLoopDetected); err != nil {
		s.log.Warn("loop escalation not filed", "principal", p.Name, "session_id", req.SessionID, "err", err)
	}
}

// deliverAnswer puts the session's operator answer, if one waits, into
// env, once.
func (s *Server) deliverAnswer(ctx context.Context, p Principal, session string, env *Envelope) {
	e, ok := s.conf.Escalations.TakeAnswer(ctx, p.Name, session)
	if !ok {
		return
	}
	env.OperatorMessage = &OperatorMessage{EscalationID: e.ID, Text: e.Answer.Text, By: e.Answer.By}
	sentence := "The operator answered your request for help: " + strings.TrimSpace(e.Answer.Text)
	if !strings.HasSuffix(sentence, ".") && !strings.HasSuffix(sentence, "?") && !strings.HasSuffix(sentence, "!") {
		sentence += "."
	}
	if env.Text == "" {
		env.Text = sentence
	} else {
		env.Text = sentence + " " + env.Text
	}
}

// EscalationEvent is the data of the agent stream's "escalation" event.
type EscalationEvent struct {
	// Text is one sentence for the model.
	Text       string                `json:"text"`
	Escalation escalation.Escalation `json:"escalation"`
}

func escalationEventOf(e escalation.Escalation) EscalationEvent {
	ev := EscalationEvent{Escalation: e}
	switch {
	case e.Answer != nil:
		ev.Text = fmt.Sprintf("The operator answered your request for help (escalation %s): %s", e.ID, e.Answer.Text)
	case e.Source == escalation.SourceAgent:
		ev.Text = fmt.Sprintf("An operator has been asked for help (escalation %s); wait for the answer.", e.ID)
	default:
		ev.Text = fmt.Sprintf("The bridge asked an operator for help on your session (escalation %s, %s): %s",
			e.ID, strings.ReplaceAll(string(e.Source), "_", " "), e.Summary)
	}
	return ev
}
