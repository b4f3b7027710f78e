package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// newEscalations builds the operator hand-off on the store: what a
// previous run stored is restored (an open escalation may still be
// answered), every change is committed and audited before it takes
// effect, counted, and published on the bus (the console and the owning
// agent's event stream).
func (b *Bridge) newEscalations(ctx context.Context) (*escalation.Service, error) {
	prev, err := b.dur.st.Escalations(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridge: escalations: %w", err)
	}
	return escalation.New(escalation.Conf{
		Store: b.dur.st, Observer: b.dur.m, Clock: b.clock, Logger: b.conf.Logger, Restore: prev,
		Publish: func(e escalation.Escalation) {
			at := e.CreatedAt
			if e.Answer != nil {
				at = e.Answer.At
			}
			b.bus.Publish(events.TypeEscalation, at, e)
		},
	}), nil
}

// faultEscalation raises an escalation when a fault latches during an
// agent's task: the operator is asked to look at what the agent's session
// did. A fault outside a task, or in an operator's own task, raises none.
// It runs off the supervisor's observer path, so the store write never
// delays the safety path.
func (b *Bridge) faultEscalation(e safety.Event) {
	if e.Kind != safety.EventFaultLatched || e.TaskID == "" {
		return
	}
	s, ok := b.robot(e.RobotID)
	if !ok || s.runner == nil || b.api == nil {
		return
	}
	// The task is read off the observer's goroutine too: the supervisor
	// may emit while the runner holds the task's lock.
	b.bg.Go(func() {
		v, err := s.runner.Get(e.TaskID)
		if err != nil || v.Principal == "" || v.Principal == "operator" {
			return
		}
		sum := fmt.Sprintf("A fault latched during task %s (%s): %s. Every motion is refused until an operator clears the fault.",
			v.ID, v.Tool, strings.TrimSuffix(strings.TrimSpace(e.Reason), "."))
		if b.fleet() {
			sum = "Robot " + s.id + ": " + sum
		}
		if _, err := b.api.Escalate(context.Background(), v.Principal, v.SessionID, v.ID, s.id, sum, escalation.SourceFault); err != nil {
			b.log.Warn("fault escalation not filed", "task_id", v.ID, "err", err)
		}
	})
}

// maxAnswerBody bounds POST /v1/escalations/{id}/answer.
const maxAnswerBody = 16 << 10

// answerBody is the body of an operator's answer.
type answerBody struct {
	Text string `json:"text"`
}

// decodeAnswer reads {"text": "..."} strictly and normalises the text
// (escalation.NormalizeText): 1 to 2000 characters, control characters
// removed.
func decodeAnswer(raw []byte) (string, error) {
	if len(raw) > maxAnswerBody {
		return "", fmt.Errorf("body larger than %d bytes", maxAnswerBody)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var body answerBody
	if err := dec.Decode(&body); err != nil {
		return "", fmt.Errorf(`body must be {"text": "..."}: %w`, err)
	}
	if dec.More() {
		return "", errors.New(`body must be one JSON object {"text": "..."}`)
	}
	return escalation.NormalizeText("text", body.Text)
}

func (b *Bridge) mountEscalations() {
	b.api.Mount("GET /v1/escalations", http.HandlerFunc(b.handleEscalations), toolapi.RoleOperator)
	b.api.Mount("POST /v1/escalations/{id}/answer", http.HandlerFunc(b.handleEscalationAnswer), toolapi.RoleOperator)
}

// handleEscalations is GET /v1/escalations: every escalation, oldest
// first, and how many wait for an answer.
func (b *Bridge) handleEscalations(w http.ResponseWriter, _ *http.Request) {
	all := b.escalations.List()
	open := 0
	for _, e := range all {
		if e.Status == escalation.StatusOpen {
			open++
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"escalations": all, "open": open})
}

// handleEscalationAnswer is POST /v1/escalations/{id}/answer.
func (b *Bridge) handleEscalationAnswer(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxAnswerBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "read body: %v", err))
		return
	}
	text, err := decodeAnswer(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	e, err := b.escalations.Answer(r.Context(), r.PathValue("id"), principalName(r), text)
	switch {
	case errors.Is(err, escalation.ErrNotFound):
		writeError(w, http.StatusNotFound, toolerr.New(toolerr.NotFound, "no escalation %q", r.PathValue("id")))
	case errors.Is(err, escalation.ErrNotOpen):
		writeError(w, http.StatusConflict, toolerr.New(toolerr.InvalidParams, "%v", err))
	case err != nil:
		b.log.Error("escalation answer not recorded", "id", r.PathValue("id"), "err", err)
		writeError(w, http.StatusServiceUnavailable, &toolerr.Error{Type: toolerr.Unavailable, Message: "the answer could not be recorded; nothing was sent to the agent"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"escalation": e,
			"text":       "Answer recorded; the agent gets it on its event stream and in its next tool result.",
		})
	}
}
