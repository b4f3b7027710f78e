package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"

	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// maxReasonBody bounds the body of the e-stop routes.
const maxReasonBody = 4 << 10

// maxReasonLen is how many characters of a reason are kept.
const maxReasonLen = 200

// reasonBody is the optional body of the e-stop and fault routes.
type reasonBody struct {
	Reason string `json:"reason"`
	// RobotID names the robot, or AllRobots for every robot. Without it
	// the e-stop presses every robot's (its safe default); a reset or a
	// clear needs it when the bridge serves more than one robot.
	RobotID string `json:"robot_id"`
}

// decodeReason reads an optional {"reason": "...", "robot_id": "..."}
// body strictly.
func decodeReason(r *http.Request) (reasonBody, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxReasonBody+1))
	if err != nil {
		return reasonBody{}, fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxReasonBody {
		return reasonBody{}, fmt.Errorf("body larger than %d bytes", maxReasonBody)
	}
	if strings.TrimSpace(string(b)) == "" {
		return reasonBody{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var body reasonBody
	if err := dec.Decode(&body); err != nil {
		return reasonBody{}, fmt.Errorf("body must be {\"reason\": \"...\", \"robot_id\": \"...\"}: %w", err)
	}
	// The reason reaches the operator (console, audit, /v1/safety) as
	// text to read: no bidi override or control character of the
	// caller's survives into it.
	body.Reason = escalation.CleanText(body.Reason, maxReasonLen)
	body.RobotID = strings.TrimSpace(body.RobotID)
	return body, nil
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

// latchSettled reads robot s's supervisor after a latch change whose
// record the store was asked to write (recErr is the wait for it), and
// says whether it is on the disk.
func (b *Bridge) latchSettled(s *robotStack, recErr error, what string) latchChange {
	st := s.sup.Status()
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

// pressEStop latches the e-stop of every robot in ss on behalf of by, all
// at once. Stopping is always safe, so it is never refused. Each stop goes
// out first (inside the supervisor's EStop, before any disk write); it
// returns once the latches' records are on the disk, or says that they
// are not.
func (b *Bridge) pressEStop(ctx context.Context, ss []*robotStack, by, reason string) []latchChange {
	stopErrs := make([]error, len(ss))
	_ = eachRobotIndexed(ss, func(i int, s *robotStack) error {
		stopErrs[i] = s.sup.EStop(ctx, by, reason)
		return nil
	})
	recErr := b.dur.latchRecorded(ctx)
	out := make([]latchChange, len(ss))
	for i, s := range ss {
		out[i] = b.latchSettled(s, recErr, "the e-stop is latched and in force")
		if stopErrs[i] != nil {
			out[i].stopWarning = stopErrs[i].Error()
		}
	}
	return out
}

// latchRefusal is one robot's refused reset or clear.
type latchRefusal struct {
	robot string
	err   error
}

// changeLatch runs an operator's reset or clear (change) on every robot
// in ss and waits for the records: the robots it changed, and those that
// refused (a robot's own e-stop still engaged) — those change nothing.
func (b *Bridge) changeLatch(ctx context.Context, ss []*robotStack, what string, change func(*robotStack) error) ([]latchChange, []latchRefusal) {
	var done []*robotStack
	var refused []latchRefusal
	for _, s := range ss {
		if err := change(s); err != nil {
			refused = append(refused, latchRefusal{s.id, err})
			continue
		}
		done = append(done, s)
	}
	if len(done) == 0 {
		return nil, refused
	}
	recErr := b.dur.latchRecorded(ctx)
	out := make([]latchChange, len(done))
	for i, s := range done {
		out[i] = b.latchSettled(s, recErr, what)
	}
	return out, refused
}

// resetEStop clears the e-stop latch of the robots in ss on behalf of the
// operator by.
func (b *Bridge) resetEStop(ctx context.Context, ss []*robotStack, by string) ([]latchChange, []latchRefusal) {
	return b.changeLatch(ctx, ss, "the e-stop is reset in the supervisor", func(s *robotStack) error {
		if err := b.mayRelease(s, "its e-stop is reset"); err != nil {
			return err
		}
		return s.sup.ResetEStop(by)
	})
}

// clearFault clears a latched fault of the robots in ss on behalf of the
// operator by.
func (b *Bridge) clearFault(ctx context.Context, ss []*robotStack, by string) ([]latchChange, []latchRefusal) {
	return b.changeLatch(ctx, ss, "the fault is cleared in the supervisor", func(s *robotStack) error {
		if err := b.mayRelease(s, "its fault is cleared"); err != nil {
			return err
		}
		return s.sup.ClearFault(by)
	})
}

// handleEStop latches the e-stop: of the robot the body names, or of
// every robot. Any authenticated role may press it: stopping is always
// safe, so it is never gated on anything — not on a malformed body, and
// not on a missing robot_id.
func (b *Bridge) handleEStop(w http.ResponseWriter, r *http.Request) {
	body, err := decodeReason(r)
	if err != nil {
		// A malformed body must not keep the robot moving: every robot
		// is stopped.
		body = reasonBody{Reason: "e-stop pressed (body ignored: " + err.Error() + ")"}
	}
	if body.Reason == "" {
		body.Reason = "e-stop pressed"
	}
	ss, te := b.targets(body.RobotID, true)
	if te != nil {
		// An unknown robot: stopping every robot is the safe reading of
		// an e-stop nobody can place.
		ss = b.robots
		body.Reason += fmt.Sprintf(" (robot_id %q is not served here: every robot is stopped)", body.RobotID)
	}
	cs := b.pressEStop(r.Context(), ss, principalName(r), body.Reason)
	b.writeLatchAnswer(w, cs, nil, func(c latchChange) (string, any) { return "estop", c.st.EStop })
}

func (b *Bridge) handleEStopReset(w http.ResponseWriter, r *http.Request) {
	b.handleLatchChange(w, r, b.resetEStop, func(c latchChange) (string, any) { return "estop", c.st.EStop })
}

func (b *Bridge) handleFaultClear(w http.ResponseWriter, r *http.Request) {
	b.handleLatchChange(w, r, b.clearFault, func(c latchChange) (string, any) { return "fault", c.st.Fault })
}

// handleLatchChange is the reset and the clear: a strict body, a robot_id
// (required when the bridge serves several robots), the change, the answer.
func (b *Bridge) handleLatchChange(w http.ResponseWriter, r *http.Request,
	change func(context.Context, []*robotStack, string) ([]latchChange, []latchRefusal), field func(latchChange) (string, any),
) {
	body, err := decodeReason(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	ss, te := b.targets(body.RobotID, false)
	if te != nil {
		writeError(w, http.StatusBadRequest, te)
		return
	}
	cs, refused := change(r.Context(), ss, principalName(r))
	b.writeLatchAnswer(w, cs, refused, field)
}

// writeLatchAnswer answers an operator's latch change. One robot (the
// only one, or the one named) keeps the single-robot answer, with its
// robot_id; several robots answer per robot, with a sentence over all.
// A change in force but not recorded is 503, a refusal 409 — never "ok".
func (b *Bridge) writeLatchAnswer(w http.ResponseWriter, cs []latchChange, refused []latchRefusal, field func(latchChange) (string, any)) {
	if len(cs)+len(refused) == 1 {
		if len(refused) == 1 {
			writeError(w, http.StatusConflict, toolerr.As(refused[0].err))
			return
		}
		c := cs[0]
		k, v := field(c)
		out := map[string]any{k: v, "text": c.text}
		if b.fleet() {
			out["robot_id"] = c.st.RobotID
		}
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
		return
	}
	robots := make([]map[string]any, 0, len(cs)+len(refused))
	var notRecorded *toolerr.Error
	var warned []string
	for _, c := range cs {
		k, v := field(c)
		one := map[string]any{"robot_id": c.st.RobotID, k: v, "text": c.text}
		if c.stopWarning != "" {
			one["warning"] = c.stopWarning
			warned = append(warned, c.st.RobotID)
		}
		if c.notRecorded != nil {
			notRecorded = c.notRecorded
		}
		robots = append(robots, one)
	}
	for _, f := range refused {
		te := toolerr.As(f.err)
		robots = append(robots, map[string]any{"robot_id": f.robot, "error": map[string]any{
			"type": te.Type, "message": te.Message, "retryable": te.Retryable(), "suggestion": te.SuggestionText(),
		}})
	}
	text := fmt.Sprintf("%d of %d robots changed.", len(cs), len(cs)+len(refused))
	if len(refused) > 0 {
		text += fmt.Sprintf(" %d refused; each refusal says why, and those robots are as they were.", len(refused))
	}
	if len(warned) > 0 {
		text += fmt.Sprintf(" The stop command could not be delivered to %d robots (%s); their e-stop is latched all the same.", len(warned), strings.Join(firstN(warned, maxListedIDs), ", "))
	}
	out := map[string]any{"robots": robots, "count": len(cs), "text": text}
	switch {
	case notRecorded != nil:
		writeNotRecorded(w, notRecorded, out)
	case len(refused) > 0:
		writeJSON(w, http.StatusConflict, out)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// firstN is at most n of xs.
func firstN(xs []string, n int) []string { return xs[:min(len(xs), n)] }

// handleSafety is GET /v1/safety: the robot's safety status, or with
// ?robot=<id> that robot's; a fleet without ?robot= answers every robot's.
func (b *Bridge) handleSafety(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("robot")
	if id == "" && b.fleet() {
		out := make([]map[string]any, len(b.robots))
		latched := 0
		for i, s := range b.robots {
			st := s.sup.Status()
			if st.EStop.Active || st.Fault.Latched {
				latched++
			}
			out[i] = map[string]any{"robot_id": s.id, "status": st, "text": describeSafety(st)}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"robots": out, "count": len(out),
			"text": fmt.Sprintf("%d robots; %d with an e-stop or a fault latched. Name one with ?robot=<id>.", len(out), latched),
		})
		return
	}
	ss, te := b.targets(id, false)
	if te != nil {
		writeError(w, http.StatusNotFound, te)
		return
	}
	st := ss[0].sup.Status()
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
