package safety

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Sentinels of the pause, resume and abort of a supervised motion.
var (
	// ErrPaused: an operator paused the task; the gate refuses its
	// commands until it is resumed (invariant 13: nothing moves while
	// paused).
	ErrPaused = errors.New("task paused by an operator")
	// ErrAborted: an operator aborted the task; the gate refuses its
	// commands, and only the supervisor's own recovery may move the
	// robot for it.
	ErrAborted = errors.New("task aborted by an operator")
	// ErrNotHeld: the task is not in the phase the request needs (not
	// executing for a pause, not paused for a resume).
	ErrNotHeld = errors.New("task not in a state that allows this")
	// ErrMotionEnded: the motion ended (succeeded, stopped, failed)
	// before the request took effect.
	ErrMotionEnded = errors.New("the motion ended before the request took effect")
	// ErrPauseUnconfirmed: the robot was not confirmed at rest after the
	// pause's stop; a fault is latched.
	ErrPauseUnconfirmed = errors.New("the robot was not confirmed at rest after the pause")
)

// PhasePaused is the phase of a motion an operator paused: the robot is held at rest
// and the motion keeps the robot until it is resumed or ends.
const PhasePaused Phase = "paused"

// Trips of a paused or aborted motion.
const (
	// TripAborted: an operator aborted the task; it ends through the
	// usual stop and recovery path.
	TripAborted TripKind = "aborted"
	// TripPauseLimit: the task stayed paused for longer than
	// safety.max_pause; it ends through the recovery path.
	TripPauseLimit TripKind = "pause_limit"
	// TripMovedWhilePaused: the robot moved while it was held (pushed, or
	// a controller other than the bridge); a fault latches, as for a stop
	// the robot does not confirm.
	TripMovedWhilePaused TripKind = "moved_while_paused"
	// TripPauseUnconfirmed: the robot was not seen at rest within the
	// stop timeout after the pause's stop; a fault latches.
	TripPauseUnconfirmed TripKind = "pause_unconfirmed"
)

// DefaultMaxPause is how long a pause may hold a task when the config
// leaves safety.max_pause unset.
const DefaultMaxPause = 5 * time.Minute

// Held-pose tolerances: a held robot farther than this from where it came
// to rest has moved.
const (
	heldLinear  = 0.02 // m
	heldAngular = 0.05 // rad
)

// PauseInfo is an operator's pause of a task.
type PauseInfo struct {
	TaskID string
	By     string
	Reason string
	// Step is the index of the step the pause held, StepName its name.
	Step     int
	StepName string
	// Since is when the pause was requested (the stop was sent at once);
	// EndsAt is when the pause limit ends the task.
	Since  time.Time
	EndsAt time.Time
}

// holdKind is what holds a task's commands at the gate.
type holdKind int

const (
	holdPause holdKind = iota + 1
	holdAbort
)

// holdRequest holds a task's commands at the gate: a pause until it is
// resumed, an abort until the motion ends (its recovery, an Authorization
// of the supervisor's own, passes).
type holdRequest struct {
	kind   holdKind
	by     string
	reason string
	at     time.Time
}

// refusal is the gate's answer to a command of a held task.
func (h holdRequest) refusal(taskID string) *toolerr.Error {
	if h.kind == holdAbort {
		e := toolerr.New(toolerr.ActionFailed, "task %s was aborted by %s: no further command of it is sent", taskID, operatorWho(h.by)).
			Wrap(ErrAborted).With("task_id", taskID)
		e.Suggestion = "wait for the task to end (its recovery may return the arm to the safe pose); do not retry"
		return e
	}
	e := toolerr.New(toolerr.RobotBusy, "task %s is paused by %s (%s): nothing moves until an operator resumes or aborts it",
		taskID, operatorWho(h.by), orDash(h.reason)).Wrap(ErrPaused).With("task_id", taskID)
	e.Suggestion = "tell the user the task is paused by an operator; do not retry the motion"
	return e
}

type pauseCall struct {
	info PauseInfo
	done chan error
}

type resumeCall struct {
	by   string
	done chan error
}

type abortCall struct {
	by, reason string
	at         time.Time
}

// reply hands err to a waiting caller without blocking (done has room
// for one answer and gets exactly one).
func reply(done chan error, err error) {
	select {
	case done <- err:
	default:
	}
}

// drainLocked answers every request the motion loop has not taken with
// err. Caller holds s.mu.
func (a *activeMotion) drainLocked(err error) {
	for {
		select {
		case pc := <-a.pauseCh:
			reply(pc.done, err)
		case rc := <-a.resumeCh:
			reply(rc.done, err)
		case <-a.abortCh:
		default:
			return
		}
	}
}

// endingLocked says what ends the motion of task taskID when something
// already recorded does — an operator's abort, a stop request (the
// agent's, an operator's, a revoked or expired grant), the e-stop or a
// latched fault — as a clause for "task <id> …"; "" when nothing does.
// A pause's resume must never race one of these: the motion loop takes
// it at its next wake and the task ends through it. s.mu is held.
func (s *Supervisor) endingLocked(taskID string) string {
	if h, held := s.holdReq[taskID]; held && h.kind == holdAbort {
		return "is being aborted"
	}
	if req, ok := s.stopRequestedLocked(taskID); ok {
		return "is being stopped (" + req.detail() + ")"
	}
	if s.estop.Active {
		return "was e-stopped"
	}
	if s.fault.Latched {
		return "is being ended by a latched fault"
	}
	return ""
}

func notHeld(taskID, what string) *toolerr.Error {
	return toolerr.New(toolerr.Conflict, "task %s %s", taskID, what).Wrap(ErrNotHeld).With("task_id", taskID)
}

// notHeldEnded is notHeld for a motion that ended (or is ending) before
// the request took effect: both ErrNotHeld and ErrMotionEnded.
func notHeldEnded(taskID, what string) *toolerr.Error {
	return toolerr.New(toolerr.Conflict, "task %s %s", taskID, what).Wrap(errors.Join(ErrNotHeld, ErrMotionEnded)).With("task_id", taskID)
}

// PauseTask pauses the supervised motion of task taskID: a protective
// stop. From the moment it is recorded the gate refuses every command of
// the task (a command that was in flight is followed by a stop, as for a
// requested stop), the stop leaves at once, and PauseTask returns once
// the robot is confirmed at rest and the motion's Paused hook has run.
// The robot is then held: while paused the supervisor keeps checking it
// is at rest, and a robot that moves is a monitor trip that latches a
// fault. A pause longer than safety.max_pause ends the motion through
// the recovery path. A robot that does not confirm the pause's stop
// latches a fault (ErrPauseUnconfirmed).
//
// It refuses (CONFLICT, ErrNotHeld) a task whose motion is not executing
// and answers ErrMotionEnded when the motion ended before the pause took
// effect (it succeeded meanwhile, or a stop came first).
func (s *Supervisor) PauseTask(ctx context.Context, taskID, by, reason string) (PauseInfo, error) {
	at := s.clock.Now()
	s.mu.Lock()
	a := s.active
	switch {
	case a == nil || taskID == "" || a.view.TaskID != taskID:
		s.mu.Unlock()
		return PauseInfo{}, notHeldEnded(taskID, "has no supervised motion to pause")
	case a.view.Phase == PhasePaused:
		s.mu.Unlock()
		return PauseInfo{}, notHeld(taskID, "is already paused")
	case a.view.Phase != PhaseExecuting:
		ph := a.view.Phase
		s.mu.Unlock()
		return PauseInfo{}, notHeld(taskID, "is "+string(ph)+", not executing, so it cannot be paused")
	}
	if _, stopped := s.stopReq[taskID]; stopped {
		s.mu.Unlock()
		return PauseInfo{}, notHeldEnded(taskID, "is already being stopped")
	}
	if h, held := s.holdReq[taskID]; held {
		s.mu.Unlock()
		if h.kind == holdAbort {
			return PauseInfo{}, notHeld(taskID, "is being aborted")
		}
		return PauseInfo{}, notHeld(taskID, "is already being paused")
	}
	info := PauseInfo{TaskID: taskID, By: by, Reason: reason, Since: at, EndsAt: at.Add(s.set.maxPause)}
	s.holdReq[taskID] = holdRequest{kind: holdPause, by: by, reason: reason, at: at}
	pc := &pauseCall{info: info, done: make(chan error, 1)}
	a.pauseCh <- pc // room for one: no hold was recorded before
	s.mu.Unlock()
	// The stop leaves at once, as for a requested stop: nothing waits for
	// the motion loop or for a command in flight.
	err := s.stopNow(ctx)
	s.emit(Event{Kind: EventStopSent, At: at, TaskID: taskID, By: by, Reason: "paused by " + by + ": " + orDash(reason), Latency: s.clock.Since(at), Err: err})
	a.poke()
	select {
	case err := <-pc.done:
		return info, err
	case <-ctx.Done():
		return info, toolerr.New(toolerr.Timeout, "the pause of task %s was requested and its stop sent, but the answer did not come before the request ended", taskID).Wrap(ctx.Err())
	}
}

// ResumeTask resumes the paused motion of task taskID under the same
// authorization: its current step's command is sent again through the
// gate, which checks everything it checks for a new call (e-stop, fault,
// link, state age, the limits from the robot's current pose, the grant),
// and the motion's deadline and stall monitors start again from now. A
// refusal leaves the task paused. Only one resume is taken at a time: a
// second one while the first is under way is refused (CONFLICT), so one
// call never moves the robot twice.
func (s *Supervisor) ResumeTask(ctx context.Context, taskID, by string) error {
	s.mu.Lock()
	a := s.active
	switch {
	case a == nil || taskID == "" || a.view.TaskID != taskID:
		s.mu.Unlock()
		return notHeldEnded(taskID, "has no paused motion to resume")
	case a.resuming:
		s.mu.Unlock()
		return notHeld(taskID, "is already being resumed")
	case s.endingLocked(taskID) != "":
		// An abort, a stop, the e-stop or a latched fault is recorded and
		// ends the motion: a resume now would only race it.
		why := s.endingLocked(taskID)
		s.mu.Unlock()
		return notHeldEnded(taskID, why)
	case a.view.Phase != PhasePaused:
		ph := a.view.Phase
		s.mu.Unlock()
		return notHeld(taskID, "is "+string(ph)+", not paused, so it cannot be resumed")
	}
	a.resuming = true
	rc := &resumeCall{by: by, done: make(chan error, 1)}
	a.resumeCh <- rc // room for one: resuming was false
	s.mu.Unlock()
	a.poke()
	select {
	case err := <-rc.done:
		return err
	case <-ctx.Done():
		return toolerr.New(toolerr.Timeout, "the resume of task %s did not complete before the request ended", taskID).Wrap(ctx.Err())
	}
}

// AbortTask ends the supervised motion of task taskID, executing or
// paused, the way a failed motion ends: the stop leaves at once, the gate
// refuses every further command of the task, and once the robot is
// confirmed at rest the supervisor returns the arm to the safe pose when
// the config pre-authorizes it (else a fault latches). It returns once
// the abort is recorded and the stop sent; the motion ends on its own.
func (s *Supervisor) AbortTask(ctx context.Context, taskID, by, reason string) error {
	at := s.clock.Now()
	s.mu.Lock()
	a := s.active
	switch {
	case a == nil || taskID == "" || a.view.TaskID != taskID:
		s.mu.Unlock()
		return notHeldEnded(taskID, "has no supervised motion to abort")
	case a.view.Phase != PhaseExecuting && a.view.Phase != PhasePaused:
		ph := a.view.Phase
		s.mu.Unlock()
		return notHeld(taskID, "is already "+string(ph))
	}
	if _, stopped := s.stopReq[taskID]; stopped {
		s.mu.Unlock()
		return notHeldEnded(taskID, "is already being stopped")
	}
	if h, held := s.holdReq[taskID]; held && h.kind == holdAbort {
		s.mu.Unlock()
		return notHeld(taskID, "is already being aborted")
	}
	s.holdReq[taskID] = holdRequest{kind: holdAbort, by: by, reason: reason, at: at}
	a.abortCh <- abortCall{by: by, reason: reason, at: at} // room for one: no abort before
	s.mu.Unlock()
	err := s.stopNow(ctx)
	s.emit(Event{Kind: EventStopSent, At: at, TaskID: taskID, By: by, Reason: "aborted by " + by + ": " + orDash(reason), Latency: s.clock.Since(at), Err: err})
	a.poke()
	return nil
}

// Paused returns the pause holding task taskID, false when it is not
// paused.
func (s *Supervisor) Paused(taskID string) (PauseInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.active
	if a == nil || a.view.TaskID != taskID || a.paused == nil {
		return PauseInfo{}, false
	}
	return *a.paused, true
}

// operatorWho names the operator credential by, without doubling the word
// when the credential is itself called "operator".
func operatorWho(by string) string {
	switch by {
	case "":
		return "an operator"
	case "operator":
		return "the operator"
	}
	return "operator " + by
}

func abortDetail(by, reason string) string {
	d := "aborted by " + operatorWho(by)
	if reason != "" {
		d += " (" + reason + ")"
	}
	return d
}

// moved says how a held robot is no longer where (and as) it came to
// rest, "" while it is held.
func movedFrom(held, st robot.State, jointTol float64) string {
	if st.Moving(RestLinear, RestAngular) {
		return fmt.Sprintf("it was moving at %s m/s, %s rad/s", robot.Fixed(math.Abs(st.Velocity.V), 2), robot.Fixed(math.Abs(st.Velocity.W), 2))
	}
	if d := math.Hypot(st.Base.X-held.Base.X, st.Base.Y-held.Base.Y); d > heldLinear {
		return fmt.Sprintf("the base was %s m from where it was held", robot.Fixed(d, 2))
	}
	if e := math.Abs(robot.NormalizeAngle(st.Base.Theta - held.Base.Theta)); e > heldAngular {
		return fmt.Sprintf("the base had turned %s from where it was held", robot.Heading(e))
	}
	for i, j := range held.Joints {
		if i < len(st.Joints) && math.Abs(st.Joints[i].Position-j.Position) > jointTol {
			return fmt.Sprintf("joint %s had moved %s rad from where it was held", j.Name, robot.Fixed(math.Abs(st.Joints[i].Position-j.Position), 2))
		}
	}
	return ""
}

// hold is the paused motion of step i: it waits for the robot to be
// confirmed at rest after the pause's stop, tells the runner (Paused),
// then keeps it at rest until a resume sends the step's command again
// (returned, with its id) or something ends the motion (the trip).
func (r *run) hold(ctx context.Context, pc *pauseCall, auth Authorization, step Step, i int, hooks Hooks,
	mkTrip func(TripKind, int, string, error) *Trip,
) (robot.Command, *Trip) {
	s := r.s
	confirmed := r.waitStopped(pc.info.Since)
	// Whatever came while the robot was stopping wins over the pause: a
	// stop, cancel or e-stop ends the task as it would any live task.
	select {
	case <-ctx.Done():
		reply(pc.done, notHeldEnded(auth.TaskID, "was cancelled before the pause took effect"))
		return robot.Command{}, r.trip(mkTrip(TripCancelled, i, "cancelled", ctx.Err()))
	case <-r.a.stop:
		req := r.a.stopped
		reply(pc.done, notHeldEnded(auth.TaskID, "was stopped before the pause took effect: "+req.detail()))
		t := mkTrip(req.tripKind(), i, req.detail(), nil)
		t.By = req.By
		return robot.Command{}, r.trip(t)
	case <-r.sctx.Done():
		reply(pc.done, notHeldEnded(auth.TaskID, "was interrupted: the bridge is shutting down"))
		return robot.Command{}, r.trip(mkTrip(TripShutdown, i, "the bridge is shutting down", nil))
	default:
	}
	if s.eStopped() {
		reply(pc.done, notHeldEnded(auth.TaskID, "was e-stopped before the pause took effect"))
		return robot.Command{}, r.trip(mkTrip(TripEStop, i, "the e-stop is latched", ErrEStopActive))
	}
	if !confirmed {
		detail := fmt.Sprintf("%s paused the motion, but the robot was not confirmed stopped within %s", operatorWho(pc.info.By), robot.FormatAge(s.set.stopTimeout))
		t := r.trip(mkTrip(TripPauseUnconfirmed, i, detail, ErrPauseUnconfirmed))
		reply(pc.done, toolerr.New(toolerr.SafetyViolation, "%s; a fault is latched", detail).Wrap(ErrPauseUnconfirmed))
		return robot.Command{}, t
	}
	held, _, _ := s.Latest()
	info := pc.info
	info.Step, info.StepName = i, step.Name
	s.mu.Lock()
	r.a.view.Phase = PhasePaused
	r.a.paused = &info
	s.mu.Unlock()
	s.log.Info("motion paused", "task", auth.TaskID, "by", info.By, "reason", info.Reason, "step", i)
	if hooks.Paused != nil {
		hooks.Paused(info)
	}
	reply(pc.done, nil)
	// unhold leaves the paused phase before a trip ends the motion.
	unhold := func() {
		s.mu.Lock()
		r.a.paused = nil
		r.a.drainLocked(ErrMotionEnded)
		s.mu.Unlock()
	}
	timer := s.clock.NewTimer(s.set.controlPeriod)
	defer timer.Stop()
	armed := true
	nextTick := s.clock.Now().Add(s.set.controlPeriod)
	for {
		now := s.clock.Now()
		st, at, have := s.Latest()
		if c := r.check(now, at, have, st); c != nil {
			unhold()
			t := mkTrip(c.kind, i, c.detail+" while the task was paused", c.err)
			t.age = c.age
			return robot.Command{}, r.trip(t)
		}
		if have && at.After(pc.info.Since) {
			if how := movedFrom(held, st, s.set.jointTol); how != "" {
				unhold()
				return robot.Command{}, r.trip(mkTrip(TripMovedWhilePaused, i, "the robot moved while it was paused: "+how, nil))
			}
		}
		if req := r.authorityEnded(auth); req != nil {
			unhold()
			_ = s.requestStop(context.WithoutCancel(ctx), *req, false)
			t := mkTrip(req.tripKind(), i, req.detail(), nil)
			t.By = req.By
			return robot.Command{}, r.trip(t)
		}
		if now.Sub(info.Since) > s.set.maxPause {
			unhold()
			t := mkTrip(TripPauseLimit, i, "paused for longer than "+robot.FormatAge(s.set.maxPause), nil)
			t.limit = s.set.maxPause
			return robot.Command{}, r.trip(t)
		}
		if !armed {
			timer.Reset(s.set.controlPeriod)
			armed, nextTick = true, s.clock.Now().Add(s.set.controlPeriod)
		}
		r.idle(nextTick)
		select {
		case <-timer.Chan():
			armed = false
		case <-r.a.wake:
		case <-ctx.Done():
			r.busy()
			unhold()
			return robot.Command{}, r.trip(mkTrip(TripCancelled, i, "cancelled", ctx.Err()))
		case <-r.a.stop:
			r.busy()
			unhold()
			req := r.a.stopped
			t := mkTrip(req.tripKind(), i, req.detail(), nil)
			t.By = req.By
			return robot.Command{}, r.trip(t)
		case <-r.sctx.Done():
			r.busy()
			unhold()
			return robot.Command{}, r.trip(mkTrip(TripShutdown, i, "the bridge is shutting down", nil))
		case ab := <-r.a.abortCh:
			r.busy()
			unhold()
			t := mkTrip(TripAborted, i, abortDetail(ab.by, ab.reason), nil)
			t.By = ab.by
			return robot.Command{}, r.trip(t)
		case rc := <-r.a.resumeCh:
			r.busy()
			cmd := step.Command
			cmd.ID = s.commandID(auth)
			var before func() error
			if hooks.BeforeResume != nil {
				by := rc.by
				before = func() error { return hooks.BeforeResume(by) }
			}
			err := s.sendResume(ctx, auth, cmd, before)
			var se *sendError
			switch {
			case err == nil:
				reply(rc.done, nil)
				s.log.Info("motion resumed", "task", auth.TaskID, "by", rc.by, "step", i)
				return cmd, nil
			case errors.As(err, &se):
				// Admitted and recorded: the task is executing again, and
				// the failed send ends it as any failed send does.
				reply(rc.done, nil)
				if !s.drv.LinkUp() {
					return robot.Command{}, r.trip(mkTrip(TripLinkDown, i, "the robot link went down while resuming "+step.Name+": "+se.err.Error(), err))
				}
				return robot.Command{}, r.trip(mkTrip(TripDriverError, i, "the driver failed to send "+step.Name+" on resume: "+se.err.Error(), err))
			case errors.As(err, new(*refusedAfterStartError)):
				// Recorded as resumed, but the grant ended meanwhile:
				// nothing was sent, the resume is refused, and the task
				// ends as a motion whose grant ends does.
				t, req := r.grantEndedOnRecord(ctx, auth, err, i, mkTrip)
				reply(rc.done, notHeldEnded(auth.TaskID, "was not resumed, and nothing was sent: "+req.detail()))
				return robot.Command{}, t
			default:
				// Refused: nothing was sent. When an abort, a stop, the
				// e-stop or a fault came first (the refusal may be the
				// gate's ESTOP_ACTIVE, or the resume's record refused
				// because the task left paused), the loop takes it next
				// and the task ends through it: the answer says so, never
				// "stays paused". Otherwise the task stays paused and the
				// operator may try again or abort.
				s.mu.Lock()
				r.a.resuming = false
				why := s.endingLocked(auth.TaskID)
				s.mu.Unlock()
				if why != "" {
					err = notHeldEnded(auth.TaskID, why)
				}
				reply(rc.done, err)
			}
		}
		r.busy()
	}
}

// sendResume is the gate for the command that resumes a paused task: the
// pause's hold is the one check it skips, and it is lifted (and the
// motion's phase set back to executing) under the gate's lock, after
// every other check passed and the resume was recorded, right before the
// command leaves. An abort recorded meanwhile wins: nothing is sent.
func (s *Supervisor) sendResume(ctx context.Context, a Authorization, cmd robot.Command, before func() error) error {
	a.resume = true
	ending := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if why := s.endingLocked(a.TaskID); why != "" {
			return notHeldEnded(a.TaskID, why)
		}
		return nil
	}
	wrapped := func() error {
		// An abort, stop, e-stop or fault recorded before the resume is
		// recorded wins before the resume's record is written.
		if err := ending(); err != nil {
			return err
		}
		if before != nil {
			if err := before(); err != nil {
				if eerr := ending(); eerr != nil {
					return eerr // the ending's transition came between
				}
				return err
			}
		}
		s.mu.Lock()
		if why := s.endingLocked(a.TaskID); why != "" {
			// Recorded as resumed, but the motion's end came first: the
			// motion loop takes it next and ends the task through it.
			s.mu.Unlock()
			return notHeldEnded(a.TaskID, why)
		}
		delete(s.holdReq, a.TaskID)
		if s.active != nil && s.active.view.TaskID == a.TaskID {
			s.active.view.Phase = PhaseExecuting
			s.active.paused = nil
			s.active.resuming = false
		}
		s.mu.Unlock()
		return nil
	}
	return s.send(ctx, a, cmd, wrapped)
}
