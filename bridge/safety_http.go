package bridge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// maxReasonBody bounds the body of the e-stop routes.
const maxReasonBody = 4 << 10

// reasonBody is the optional body of the e-stop and fault routes.
type reasonBody struct {
	Reason string `json:"reason"`
}

// decodeReason reads an optional {"reason": "..."} body strictly.
func decodeReason(r *http.Request) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxReasonBody+1))
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxReasonBody {
		return "", fmt.Errorf("body larger than %d bytes", maxReasonBody)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var body reasonBody
	if err := dec.Decode(&body); err != nil {
		return "", fmt.Errorf("body must be {\"reason\": \"...\"}: %w", err)
	}
	return strings.TrimSpace(body.Reason), nil
}

func writeError(w http.ResponseWriter, code int, e *toolerr.Error) {
	writeJSON(w, code, map[string]any{"error": map[string]any{
		"type": e.Type, "message": e.Message, "retryable": e.Retryable(), "suggestion": e.SuggestionText(),
	}})
}

// handleEStop latches the e-stop. Any authenticated role may press it:
// stopping is always safe, so it is never gated on anything.
func (b *Bridge) handleEStop(w http.ResponseWriter, r *http.Request) {
	reason, err := decodeReason(r)
	if err != nil {
		// A malformed body must not keep the robot moving.
		reason = "e-stop pressed (body ignored: " + err.Error() + ")"
	}
	if reason == "" {
		reason = "e-stop pressed"
	}
	by := principalName(r)
	if err := b.sup.EStop(r.Context(), by, reason); err != nil {
		// The latch is set even when the stop command could not be
		// delivered; say so.
		writeJSON(w, http.StatusOK, map[string]any{"estop": b.sup.Status().EStop, "warning": err.Error(), "text": describeSafety(b.sup.Status())})
		return
	}
	st := b.sup.Status()
	writeJSON(w, http.StatusOK, map[string]any{"estop": st.EStop, "text": describeSafety(st)})
}

func (b *Bridge) handleEStopReset(w http.ResponseWriter, r *http.Request) {
	if _, err := decodeReason(r); err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	if err := b.sup.ResetEStop(principalName(r)); err != nil {
		writeError(w, http.StatusConflict, toolerr.As(err))
		return
	}
	st := b.sup.Status()
	writeJSON(w, http.StatusOK, map[string]any{"estop": st.EStop, "text": describeSafety(st)})
}

func (b *Bridge) handleFaultClear(w http.ResponseWriter, r *http.Request) {
	if _, err := decodeReason(r); err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	if err := b.sup.ClearFault(principalName(r)); err != nil {
		writeError(w, http.StatusConflict, toolerr.As(err))
		return
	}
	st := b.sup.Status()
	writeJSON(w, http.StatusOK, map[string]any{"fault": st.Fault, "text": describeSafety(st)})
}

func (b *Bridge) handleSafety(w http.ResponseWriter, _ *http.Request) {
	st := b.sup.Status()
	writeJSON(w, http.StatusOK, map[string]any{"status": st, "text": describeSafety(st)})
}

// describeSafety says the supervisor's state in one sentence.
func describeSafety(st safety.Status) string {
	var parts []string
	if st.EStop.Active {
		parts = append(parts, fmt.Sprintf("e-stop LATCHED by %s (%s); an operator must reset it", st.EStop.By, st.EStop.Reason))
	} else {
		parts = append(parts, "e-stop not active")
	}
	if st.Fault.Latched {
		parts = append(parts, fmt.Sprintf("fault LATCHED (%s); an operator must clear it", st.Fault.Reason))
	} else {
		parts = append(parts, "no fault latched")
	}
	if st.RobotEStop {
		parts = append(parts, "the robot's own e-stop is engaged")
	}
	if st.LinkUp {
		parts = append(parts, "robot link up")
	} else {
		parts = append(parts, "robot link DOWN")
	}
	if st.Active != nil {
		parts = append(parts, "a motion is being supervised")
	}
	return strings.Join(parts, "; ") + "."
}
