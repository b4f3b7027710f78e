package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store"
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

// writeNotRecorded answers an operator's latch change that is in force in
// the supervisor but not on the disk: never "ok", and the status as it
// now is, so the caller knows what holds and what a restart would forget.
func writeNotRecorded(w http.ResponseWriter, te *toolerr.Error, extra map[string]any) {
	body := map[string]any{"error": map[string]any{
		"type": te.Type, "message": te.Message, "retryable": te.Retryable(), "suggestion": te.SuggestionText(),
	}}
	maps.Copy(body, extra)
	writeJSON(w, http.StatusServiceUnavailable, body)
}

// latchChange is the safety state after an operator changed a latch: what
// the HTTP routes below and the OperatorService RPCs (grpc.go) answer.
type latchChange struct {
	st   safety.Status
	text string
	// stopWarning is set when the e-stop's stop command could not be
	// delivered; the latch is set all the same.
	stopWarning string
	// notRecorded is set when the change is in force but its record is
	// not on the disk.
	notRecorded *toolerr.Error
}

// latchSettled reads the supervisor after a latch change whose record the
// store was asked to write, and says whether it is on the disk.
func (b *Bridge) latchSettled(ctx context.Context, what string) latchChange {
	recErr := b.dur.latchRecorded(ctx)
	st := b.sup.Status()
	c := latchChange{st: st, text: describeSafety(st)}
	if recErr != nil {
		c.notRecorded = toolerr.New(toolerr.Unavailable, "%s, but it is not recorded: %v", what, recErr).Wrap(recErr)
		fix := "fix the data dir's disk"
		if b.dur.st.Info().Driver == store.DriverPostgres {
			fix = "bring the PostgreSQL server back (the bridge reconnects by itself)"
		}
		c.notRecorded.Suggestion = "the change holds while this bridge runs, but a restart would not know it: do not restart the bridge; " +
			fix + " (GET /readyz says when the store takes writes again) and repeat the request to confirm it is recorded"
	}
	return c
}

// pressEStop latches the e-stop on behalf of by. Stopping is always safe,
// so it is never refused. The stop goes out first (inside the
// supervisor's EStop, before any disk write); it returns once the latch's
// record is on the disk, or says that it is not.
func (b *Bridge) pressEStop(ctx context.Context, by, reason string) latchChange {
	stopErr := b.sup.EStop(ctx, by, reason)
	c := b.latchSettled(ctx, "the e-stop is latched and in force")
	if stopErr != nil {
		c.stopWarning = stopErr.Error()
	}
	return c
}

// resetEStop clears the e-stop latch on behalf of the operator by; a
// refusal (the robot's own e-stop still engaged) changes nothing.
func (b *Bridge) resetEStop(ctx context.Context, by string) (latchChange, error) {
	if err := b.sup.ResetEStop(by); err != nil {
		return latchChange{}, err
	}
	return b.latchSettled(ctx, "the e-stop is reset in the supervisor"), nil
}

// clearFault clears a latched fault on behalf of the operator by.
func (b *Bridge) clearFault(ctx context.Context, by string) (latchChange, error) {
	if err := b.sup.ClearFault(by); err != nil {
		return latchChange{}, err
	}
	return b.latchSettled(ctx, "the fault is cleared in the supervisor"), nil
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
	c := b.pressEStop(r.Context(), principalName(r), reason)
	out := map[string]any{"estop": c.st.EStop, "text": c.text}
	if c.stopWarning != "" {
		// The latch is set even when the stop command could not be
		// delivered; say so.
		out["warning"] = c.stopWarning
	}
	if c.notRecorded != nil {
		writeNotRecorded(w, c.notRecorded, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (b *Bridge) handleEStopReset(w http.ResponseWriter, r *http.Request) {
	if _, err := decodeReason(r); err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	c, err := b.resetEStop(r.Context(), principalName(r))
	if err != nil {
		writeError(w, http.StatusConflict, toolerr.As(err))
		return
	}
	out := map[string]any{"estop": c.st.EStop, "text": c.text}
	if c.notRecorded != nil {
		writeNotRecorded(w, c.notRecorded, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (b *Bridge) handleFaultClear(w http.ResponseWriter, r *http.Request) {
	if _, err := decodeReason(r); err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	c, err := b.clearFault(r.Context(), principalName(r))
	if err != nil {
		writeError(w, http.StatusConflict, toolerr.As(err))
		return
	}
	out := map[string]any{"fault": c.st.Fault, "text": c.text}
	if c.notRecorded != nil {
		writeNotRecorded(w, c.notRecorded, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (b *Bridge) handleSafety(w http.ResponseWriter, _ *http.Request) {
	st := b.sup.Status()
	writeJSON(w, http.StatusOK, map[string]any{"status": st, "text": describeSafety(st)})
}

// describeSafety says the supervisor's state in short sentences.
func describeSafety(st safety.Status) string {
	var parts []string
	if st.EStop.Active {
		parts = append(parts, fmt.Sprintf("The e-stop is latched, pressed by %s (%s); an operator must reset it.", st.EStop.By, st.EStop.Reason))
	} else {
		parts = append(parts, "The e-stop is not pressed.")
	}
	if st.Fault.Latched {
		parts = append(parts, fmt.Sprintf("A fault is latched: %s; an operator must clear it.", toolerr.Clause(st.Fault.Reason)))
	} else {
		parts = append(parts, "No fault is latched.")
	}
	stale := st.HaveState && st.LastStateAge > st.Monitors.StateTimeout
	if !st.HardwareEStop {
		parts = append(parts, "The robot reports no hardware e-stop; the bridge's e-stop is the only one.")
	}
	if st.RobotEStop {
		if stale {
			parts = append(parts, "The robot's own e-stop was engaged as last reported.")
		} else {
			parts = append(parts, "The robot's own e-stop is engaged.")
		}
	}
	if st.LinkUp {
		parts = append(parts, "The robot link is up.")
	} else {
		parts = append(parts, "The robot link is down.")
	}
	switch {
	case !st.HaveState:
		parts = append(parts, "There has been no robot state yet.")
	case stale:
		parts = append(parts, fmt.Sprintf("There has been no robot state for %s (state timeout %s).", robot.FormatAge(st.LastStateAge), robot.FormatAge(st.Monitors.StateTimeout)))
	}
	if st.Active != nil {
		parts = append(parts, fmt.Sprintf("Task %s (%s) is %s under supervision.", st.Active.TaskID, st.Active.Tool, st.Active.Phase))
	}
	return strings.Join(parts, " ")
}
