package safety

import (
	"context"
	"errors"
	"time"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// ErrStopRequested says that a stop, cancel or the end of the task's
// grant was requested for the task, so the gate refuses every further command of it
// — the next step and any recovery motion alike (ARCHITECTURE.md,
// invariant 10).
var ErrStopRequested = errors.New("stop requested for this task")

// StopCause says why a task's stop was requested.
type StopCause string

// Causes of a stop request.
const (
	// StopByRequest: the stop tool, cancel_task, the console's stop
	// button, or the bridge shutting down.
	StopByRequest StopCause = "requested"
	// StopGrantRevoked: an operator revoked or deleted the grant the
	// motion runs on.
	StopGrantRevoked StopCause = "grant_revoked"
	// StopGrantExpired: the grant the motion runs on ran out.
	StopGrantExpired StopCause = "grant_expired"
)

// StopRequest records a stop requested for one task.
type StopRequest struct {
	TaskID string
	Cause  StopCause
	// By names who asked (an operator, the agent principal).
	By     string
	Reason string
	// At is the supervisor's clock when the request arrived.
	At time.Time
}

// tripKind is the trip a stop request ends a motion with.
func (r StopRequest) tripKind() TripKind {
	switch r.Cause {
	case StopGrantRevoked:
		return TripGrantRevoked
	case StopGrantExpired:
		return TripGrantExpired
	}
	return TripCancelled
}

// detail says what happened, in words.
func (r StopRequest) detail() string {
	var d string
	switch r.Cause {
	case StopGrantRevoked:
		d = "the operator grant was revoked"
		if r.By != "" {
			d = "operator " + r.By + " revoked the grant"
		}
	case StopGrantExpired:
		d = "the operator grant expired"
	default:
		by := r.By
		if by == "" {
			by = "request"
		}
		d = "stopped by " + by
	}
	if r.Reason != "" {
		d += " (" + r.Reason + ")"
	}
	return d
}

// Detail says what happened, in words ("stopped by agent-1 (user said
// stop)", "operator alice revoked the grant").
func (r StopRequest) Detail() string { return r.detail() }

// StopTask commands the robot to stop at once and ends every further
// command of task taskID (and of the supervised motion, if another one is
// running): once StopTask returns, the gate refuses every command of that
// task, a running motion ends without starting recovery, and the task
// ends cancelled. It needs no authorization and never latches anything.
//
// The order is what makes a stop win at every moment: the request is
// recorded, so no command of the task passes the gate afterwards; the
// stop command leaves at once, without waiting for anything; and a
// command that was in flight meanwhile is followed by another stop, sent
// by the gate as soon as that command has left (see requestStop).
func (s *Supervisor) StopTask(ctx context.Context, taskID, by, reason string) error {
	return s.requestStop(ctx, StopRequest{TaskID: taskID, Cause: StopByRequest, By: by, Reason: reason}, true)
}

// CancelTask is StopTask for cancel_task: it ends task taskID exactly as
// StopTask does, but leaves a supervised motion of another task alone.
func (s *Supervisor) CancelTask(ctx context.Context, taskID, by, reason string) error {
	return s.requestStop(ctx, StopRequest{TaskID: taskID, Cause: StopByRequest, By: by, Reason: reason}, false)
}

// GrantEnded stops the supervised motion that runs on grant grantID, if
// any, because an operator revoked or deleted it (expired false) or it
// ran out (expired true). The approval service calls it the moment a
// grant ends; the motion loop also re-checks its grant every control
// period, so a grant that ends without a call still stops its motion
// within one period (ARCHITECTURE.md, invariant 11).
func (s *Supervisor) GrantEnded(ctx context.Context, grantID, by, reason string, expired bool) {
	if grantID == "" {
		return
	}
	s.mu.Lock()
	a := s.active
	s.mu.Unlock()
	if a == nil || a.grantID != grantID {
		return
	}
	cause := StopGrantRevoked
	if expired {
		cause = StopGrantExpired
	}
	// No caller to hand a failed stop to: it is logged and reported in
	// its EventStopSent, and the motion's own trip sends another.
	_ = s.requestStop(ctx, StopRequest{TaskID: a.view.TaskID, Cause: cause, By: by, Reason: reason}, false)
}

// requestStop implements StopTask and GrantEnded. With stopActive, the
// supervised motion is stopped whatever task it belongs to (the stop
// button stops whatever moves); otherwise only when it is req.TaskID's.
//
// The request is recorded first, then the stop is sent. A command that
// passed the gate before the record is being sent now or has just been:
// the gate looks again once its Send returns and, seeing the record,
// sends the stop right after it; if the gate looked before the record
// existed, the command had already landed and the stop below follows it.
// Either way the robot's last command is a stop, and the stopper never
// waits for a command in flight.
func (s *Supervisor) requestStop(ctx context.Context, req StopRequest, stopActive bool) error {
	req.At = s.clock.Now()
	s.mu.Lock()
	a := s.active
	if a != nil && !stopActive && a.view.TaskID != req.TaskID {
		a = nil
	}
	if req.TaskID != "" {
		if _, dup := s.stopReq[req.TaskID]; !dup {
			s.stopReq[req.TaskID] = req
		}
	}
	if a != nil && a.view.TaskID != req.TaskID && a.view.TaskID != "" {
		if _, dup := s.stopReq[a.view.TaskID]; !dup {
			r := req
			r.TaskID = a.view.TaskID
			s.stopReq[a.view.TaskID] = r
		}
	}
	s.mu.Unlock()
	err := s.stopNow(ctx)
	lat := s.clock.Since(req.At)
	if a != nil {
		a.requestStop(req)
	}
	s.emit(Event{Kind: EventStopSent, At: req.At, TaskID: req.TaskID, By: req.By, Reason: req.detail(), Latency: lat, Err: err})
	if err != nil {
		return toolerr.New(toolerr.Unavailable, "the stop command could not be delivered: %v", err).Wrap(err)
	}
	return nil
}

// stopRequested returns the stop requested for taskID, if any. Caller
// holds mu.
func (s *Supervisor) stopRequestedLocked(taskID string) (StopRequest, bool) {
	if taskID == "" {
		return StopRequest{}, false
	}
	r, ok := s.stopReq[taskID]
	return r, ok
}

// StopRequested reports the stop requested for taskID, if any.
func (s *Supervisor) StopRequested(taskID string) (StopRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopRequestedLocked(taskID)
}

// ForgetTask drops what the supervisor remembers of a task that has ended
// and will never present another command (its stop request). The action
// runner calls it when it forgets the task itself.
func (s *Supervisor) ForgetTask(taskID string) {
	s.mu.Lock()
	delete(s.stopReq, taskID)
	s.mu.Unlock()
}

func stopRefusal(r StopRequest) *toolerr.Error {
	return toolerr.New(toolerr.ActionFailed, "%s: no further command of this task is sent", r.detail()).
		Wrap(ErrStopRequested).With("stopped_by", r.By)
}

// latchedError is the refusal while the e-stop or a fault is latched, the
// same words at the gate, before an operator is asked, and when an
// operator approves; nil when nothing is latched.
func latchedError(estop EStopStatus, fault FaultStatus) *toolerr.Error {
	if estop.Active {
		e := toolerr.New(toolerr.EStopActive, "the e-stop is latched (pressed by %s: %s); nothing moves until an operator resets it",
			estop.By, orDash(estop.Reason)).Wrap(ErrEStopActive).With("estop_by", estop.By)
		e.Suggestion = "tell the user the e-stop is engaged; an operator must reset it before anything can move; do not retry"
		return e
	}
	if fault.Latched {
		e := toolerr.New(toolerr.SafetyViolation, "a fault is latched (%s); nothing moves until an operator clears it",
			fault.Reason).Wrap(ErrFaultLatched).With("fault", fault.Reason)
		e.Suggestion = "tell the user that an operator must inspect the robot and clear the fault; do not retry"
		return e
	}
	return nil
}

// RefuseLatched returns the ESTOP_ACTIVE or SAFETY_VIOLATION refusal
// while the e-stop or a fault is latched, nil otherwise. The action
// runner asks it before an operator is asked, and the approval service
// when an operator approves.
func (s *Supervisor) RefuseLatched() error {
	s.mu.Lock()
	e := latchedError(s.estop, s.fault)
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	return e
}

// LatchGeneration counts the e-stop and fault latches so far. A caller
// that checked RefuseLatched, then did work, compares generations to learn
// whether a latch came and went in between.
func (s *Supervisor) LatchGeneration() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latchGen
}
