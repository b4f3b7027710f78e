package bridge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// maxPauseReason bounds an operator's pause or abort reason, in
// characters.
const maxPauseReason = 1000

// mountPause mounts the operator's pause, resume and abort of a running
// task (issue 14). Only an operator may call them: an agent stops its own
// task with cancel_task or the stop tool.
func (b *Bridge) mountPause() {
	b.mountOperator("POST /v1/tasks/{id}/pause", http.HandlerFunc(b.handlePause), toolapi.RoleOperator, b.taskRobot)
	b.mountOperator("POST /v1/tasks/{id}/resume", http.HandlerFunc(b.handleResume), toolapi.RoleOperator, b.taskRobot)
	b.mountOperator("POST /v1/tasks/{id}/abort", http.HandlerFunc(b.handleAbort), toolapi.RoleOperator, b.taskRobot)
}

// decodePauseBody reads {"reason": "..."} strictly: unknown fields, a
// reason longer than maxPauseReason characters, or (required) a missing
// one are INVALID_PARAMS naming the field. An empty body is no reason.
func decodePauseBody(r io.Reader, required bool) (string, *toolerr.Error) {
	b, err := io.ReadAll(io.LimitReader(r, maxReasonBody+1))
	if err != nil {
		return "", toolerr.New(toolerr.InvalidParams, "the body could not be read").With("field", "body")
	}
	if len(b) > maxReasonBody {
		return "", toolerr.New(toolerr.InvalidParams, "the body is larger than %d bytes", maxReasonBody).With("field", "body")
	}
	reason := ""
	if strings.TrimSpace(string(b)) != "" {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		var body struct {
			Reason *string `json:"reason"`
		}
		if err := dec.Decode(&body); err != nil {
			return "", toolerr.New(toolerr.InvalidParams, `the body must be {"reason": "..."}: %v`, err).With("field", "body")
		}
		if dec.More() {
			return "", toolerr.New(toolerr.InvalidParams, `the body must be one JSON object {"reason": "..."}`).With("field", "body")
		}
		if body.Reason != nil {
			reason = strings.TrimSpace(*body.Reason)
		}
	}
	switch n := utf8.RuneCountInString(reason); {
	case !utf8.ValidString(reason):
		return "", toolerr.New(toolerr.InvalidParams, "reason is not valid UTF-8").With("field", "reason")
	case n > maxPauseReason:
		return "", toolerr.New(toolerr.InvalidParams, "reason is %d characters long; allowed: 1 to %d", n, maxPauseReason).
			With("field", "reason").With("allowed", fmt.Sprintf("1 to %d characters", maxPauseReason))
	case n == 0 && required:
		return "", toolerr.New(toolerr.InvalidParams, "reason is missing; say why the task is paused (1 to %d characters)", maxPauseReason).
			With("field", "reason").With("allowed", fmt.Sprintf("1 to %d characters", maxPauseReason))
	}
	return reason, nil
}

// writeTaskAnswer writes {"task": v, "text": text}, or the error with the
// task as it now is: 404 for an unknown task, 409 for a refusal the
// task's state or the gate made (nothing changed), 503 when the robot is
// unreachable.
func writeTaskAnswer(w http.ResponseWriter, v actions.TaskView, text string, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, map[string]any{"task": v, "text": text})
		return
	}
	te := toolerr.As(err)
	code := http.StatusConflict
	switch te.Type {
	case toolerr.NotFound:
		code = http.StatusNotFound
	case toolerr.InvalidParams:
		code = http.StatusBadRequest
	case toolerr.Timeout:
		code = http.StatusGatewayTimeout
	}
	body := map[string]any{"error": map[string]any{
		"type": te.Type, "message": te.Message, "retryable": te.Retryable(), "suggestion": te.SuggestionText(),
	}}
	if v.ID != "" {
		body["task"] = v
	}
	writeJSON(w, code, body)
}

func (b *Bridge) handlePause(w http.ResponseWriter, r *http.Request) {
	reason, te := decodePauseBody(r.Body, true)
	if te != nil {
		writeError(w, http.StatusBadRequest, te)
		return
	}
	by := principalName(r)
	v, err := fleetTasks{b}.Pause(r.Context(), r.PathValue("id"), by, reason)
	writeTaskAnswer(w, v, v.Text, err)
}

func (b *Bridge) handleResume(w http.ResponseWriter, r *http.Request) {
	reason, te := decodePauseBody(r.Body, false)
	if te != nil {
		writeError(w, http.StatusBadRequest, te)
		return
	}
	if reason != "" {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "resume takes no reason; send an empty body or {}").With("field", "reason"))
		return
	}
	v, err := fleetTasks{b}.Resume(r.Context(), r.PathValue("id"), principalName(r))
	writeTaskAnswer(w, v, v.Text, err)
}

func (b *Bridge) handleAbort(w http.ResponseWriter, r *http.Request) {
	reason, te := decodePauseBody(r.Body, false)
	if te != nil {
		writeError(w, http.StatusBadRequest, te)
		return
	}
	v, err := fleetTasks{b}.Abort(r.Context(), r.PathValue("id"), principalName(r), reason)
	writeTaskAnswer(w, v, v.Text, err)
}
