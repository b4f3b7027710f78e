package safety

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Step is one command of a motion and how to tell that it is done.
type Step struct {
	// Name says what the step does, in words ("pre-grasp above red_cup").
	Name    string
	Command robot.Command
	// Done reports whether the robot has reached the step's goal.
	// Required.
	Done func(robot.State) bool
	// Remaining measures what is left to do (metres, radians: any unit
	// that shrinks as the robot progresses). The stall monitor trips when
	// it has not shrunk for safety.stall_timeout. Optional: without it the
	// step is only bounded by the deadline.
	Remaining func(robot.State) float64
	// Verify, when set, checks the state once Done holds (a grasp that
	// must hold the object); an error fails the motion.
	Verify func(robot.State) error
	// Miss says how a state misses the step's goal, one clause per
	// tolerance it is outside of ("heading 27° off the requested 0°,
	// outside the 10° tolerance"). It is the bridge's second opinion when
	// the robot's own controller reports the goal reached but Done does
	// not hold. Optional: a base step without it is judged against the
	// command's target and the config's base tolerances (BaseMisses).
	Miss func(robot.State) []string
}

// GoalReporter is implemented by drivers whose robot runs its own
// controller to a goal and says when that controller judged the goal
// reached: a ROS move_base action server's SUCCEEDED. The supervisor
// takes that verdict as the end of the step, as ROS does: the robot
// planned and drove by its own tolerances, and a stall monitor has no
// business stopping a robot that is done. The bridge's own check of the
// pose becomes a second opinion, reported as a GoalWarning when it
// disagrees, never a failure. Drivers without such a controller (the
// simulator, cmd_vel mode, where the bridge itself drives) do not
// implement it, and Done alone ends a step.
type GoalReporter interface {
	// GoalSucceeded reports whether the robot's controller reported the
	// goal of command cmdID reached, with its own words (often empty).
	GoalSucceeded(cmdID string) (text string, ok bool)
}

// GoalWarning is the bridge's second opinion on a step the robot's
// controller reported finished while the bridge's own check disagrees.
// The step succeeded; the warning says, with the measured error and the
// tolerance, where the robot ended up instead.
type GoalWarning struct {
	// Step is the step's index, StepName its name ("drive to table").
	Step     int    `json:"step"`
	StepName string `json:"step_name"`
	// Robot is what the robot's controller said with its verdict, often
	// empty.
	Robot string `json:"robot,omitempty"`
	// Misses are the clauses of Step.Miss: "heading 27° off the requested
	// 0°, outside the 10° tolerance".
	Misses []string `json:"misses"`
	// State is the state the check was made on.
	State robot.State `json:"-"`
}

// Text says the warning in one clause for a model or an operator:
// "the robot's controller reported drive to table finished, but the
// bridge's own check finds heading 27° off the requested 0°, outside the
// 10° tolerance".
func (w GoalWarning) Text() string {
	said := ""
	if t := strings.TrimSpace(w.Robot); t != "" {
		said = fmt.Sprintf(" (%q)", strings.TrimRight(t, ". "))
	}
	misses := "the goal not reached"
	if len(w.Misses) > 0 {
		misses = strings.Join(w.Misses, "; ")
	}
	return fmt.Sprintf("the robot's controller reported %s finished%s, but the bridge's own check finds %s", w.StepName, said, misses)
}

// Slack of a base goal's check over its tolerances, for odometry noise.
const (
	goalSlack = 0.005 // m
	yawSlack  = 0.005 // rad
)

// BaseMisses says how the base at pose misses target: its distance when
// it is more than tol metres from (target.X, target.Y), and its heading
// when it is more than yawTol radians off target.Theta (unless
// ignoreTheta), each with the slack BaseStep's Done allows. Each clause states the measured error and the tolerance,
// as a model can act on it: "0.42 m from the requested (1.35, 1.00),
// outside the 0.05 m tolerance", "heading 27° off the requested 0°,
// outside the 10° tolerance". It is empty when the pose is within both.
func BaseMisses(pose, target robot.Pose2D, ignoreTheta bool, tol, yawTol float64) []string {
	var out []string
	if d := math.Hypot(target.X-pose.X, target.Y-pose.Y); d > tol+goalSlack {
		out = append(out, fmt.Sprintf("%s m from the requested %s, outside the %s m tolerance",
			robot.Fixed(d, 2), robot.FormatPoint(target.X, target.Y), trimNum(tol)))
	}
	if !ignoreTheta {
		if e := math.Abs(robot.NormalizeAngle(target.Theta - pose.Theta)); e > yawTol+yawSlack {
			out = append(out, fmt.Sprintf("heading %s off the requested %s, outside the %s° tolerance",
				robot.Heading(e), robot.Heading(target.Theta), trimNum(robot.Degrees(yawTol))))
		}
	}
	return out
}

// trimNum writes a tolerance as the config would: 0.05, 10, 2.5.
func trimNum(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

// BaseStep is a step that drives the base to goal: done when the base is
// within tol metres of the target and, unless goal.IgnoreTheta, within
// yawTol radians of its heading (each with 5 mm / 5 mrad of slack for
// odometry noise, as the move_base_to plan has always allowed), and at
// rest. Its Remaining shrinks as the base closes
// in and turns, and its Miss is BaseMisses with the same tolerances, so a
// location's own goal_tolerance and yaw_tolerance_deg decide both.
func BaseStep(name string, goal robot.BaseGoal, tol, yawTol float64) Step {
	target := goal.Target
	hasTh := !goal.IgnoreTheta
	return Step{
		Name:    name,
		Command: robot.Command{Kind: robot.CmdMoveBase, Base: &goal},
		Done: func(s robot.State) bool {
			if math.Hypot(target.X-s.Base.X, target.Y-s.Base.Y) > tol+goalSlack {
				return false
			}
			if hasTh && math.Abs(robot.NormalizeAngle(target.Theta-s.Base.Theta)) > yawTol+yawSlack {
				return false
			}
			return math.Abs(s.Velocity.V) < RestLinear && math.Abs(s.Velocity.W) < RestAngular
		},
		Remaining: func(s robot.State) float64 {
			d := math.Hypot(target.X-s.Base.X, target.Y-s.Base.Y)
			var e float64
			if d > tol {
				e = robot.NormalizeAngle(math.Atan2(target.Y-s.Base.Y, target.X-s.Base.X) - s.Base.Theta)
			} else if hasTh {
				e = robot.NormalizeAngle(target.Theta - s.Base.Theta)
			}
			return d + 0.2*math.Abs(e)
		},
		Miss: func(s robot.State) []string {
			return BaseMisses(s.Base, target, goal.IgnoreTheta, tol, yawTol)
		},
	}
}

// Hooks let the action runner record the task's transitions at the right
// moments. Every hook is optional.
type Hooks struct {
	// BeforeStart runs once the gate has admitted the first command and
	// before it is sent; an error means nothing is sent and the motion is
	// rejected. It runs under the gate's lock, so it must not call back
	// into the supervisor.
	BeforeStart func() error
	// Progress is called with each new state while the motion executes.
	Progress func(step int, st robot.State)
	// Stopped is called right after the stop command of a trip has been
	// sent, before anything else happens.
	Stopped func(Trip)
	// BeforeRecovery runs before the first recovery command is sent; an
	// error means no recovery motion and a latched fault.
	BeforeRecovery func() error
	// Paused runs once an operator's pause has stopped the robot and it
	// is confirmed at rest, before PauseTask returns.
	Paused func(PauseInfo)
	// BeforeResume runs once the gate has admitted the command that
	// resumes a paused motion and before it is sent; an error means
	// nothing is sent and the motion stays paused. Like BeforeStart it
	// runs under the gate's lock.
	BeforeResume func(by string) error
}

// Motion is one supervised motion of a task.
type Motion struct {
	Auth  Authorization
	Steps []Step
	// Deadline bounds the whole motion from its first command.
	Deadline time.Duration
	Hooks    Hooks
}

// OutcomeKind is how a supervised motion ended.
type OutcomeKind string

// Outcomes of Execute.
const (
	// OutcomeSucceeded: every step reached its goal.
	OutcomeSucceeded OutcomeKind = "succeeded"
	// OutcomeRejected: the gate refused the first command; nothing was sent.
	OutcomeRejected OutcomeKind = "rejected"
	// OutcomeCancelled: cancelled or stopped on request (or its grant
	// ended), robot confirmed stopped; no recovery motion was started
	// after the request.
	OutcomeCancelled OutcomeKind = "cancelled"
	// OutcomeRecovered: a monitor tripped, the robot stopped and returned
	// to the safe pose.
	OutcomeRecovered OutcomeKind = "recovered"
	// OutcomeFault: stopping or recovery failed or was not allowed; a
	// fault is latched.
	OutcomeFault OutcomeKind = "fault"
	// OutcomeEStopped: the e-stop latched during the motion.
	OutcomeEStopped OutcomeKind = "estopped"
	// OutcomeInterrupted: the supervisor closed during the motion.
	OutcomeInterrupted OutcomeKind = "interrupted"
)

// Trip is what ended a motion early.
type Trip struct {
	Kind TripKind
	// Detail says what happened in words.
	Detail string
	// Step is the index of the step that was running, StepName its name.
	Step     int
	StepName string
	// At is the supervisor's clock at detection; Elapsed is since the
	// motion's first command.
	At      time.Time
	Elapsed time.Duration
	Err     error
	// By names who stopped or cancelled (TripCancelled).
	By string
	// State is the latest robot state at detection.
	State robot.State

	// age is how long the robot had been silent (TripSilence); limit is
	// the bound that tripped (deadline, stall timeout, pause limit).
	age, limit time.Duration
}

// Recovery reports what the supervisor did after a trip.
type Recovery struct {
	// Attempted is true when a recovery motion was started.
	Attempted bool
	// Succeeded is true when the robot is stopped and in the safe pose.
	Succeeded bool
	// Text says what recovery did, in words ("arm returned to stowed").
	Text string
	// Trip is what ended a failed recovery motion.
	Trip *Trip
}

// Outcome is how Execute ended.
type Outcome struct {
	Kind OutcomeKind
	// Err is the gate's refusal (OutcomeRejected), a *toolerr.Error.
	Err  error
	Trip *Trip
	// StepsDone counts the steps that reached their goal.
	StepsDone int
	// StopConfirmed is true when the robot was seen at rest after the stop.
	StopConfirmed bool
	Recovery      Recovery
	// FaultReason is the latched fault (OutcomeFault).
	FaultReason string
	// Stop is the stop request that ended the motion (OutcomeCancelled,
	// and OutcomeFault when the robot did not confirm that stop); nil
	// when the motion ended by itself or by a monitor.
	Stop *StopRequest
	// State is the latest robot state when Execute returned.
	State robot.State
	// Warnings are the bridge's second opinions on steps the robot's
	// controller reported finished where the bridge's own check disagreed
	// (see GoalReporter), in step order. They do not change Kind.
	Warnings []GoalWarning
}

// Execute runs m under supervision and returns when it has succeeded,
// been refused, or ended in a stop (and recovery, or a latched fault).
// Only one motion runs at a time; a second concurrent call is rejected
// with ROBOT_BUSY. Cancelling ctx cancels the motion: the robot is
// stopped and Execute returns OutcomeCancelled only once it is confirmed
// at rest.
func (s *Supervisor) Execute(ctx context.Context, m Motion) Outcome {
	if len(m.Steps) == 0 {
		return Outcome{Kind: OutcomeRejected, Err: toolerr.New(toolerr.Internal, "motion has no steps")}
	}
	for i, st := range m.Steps {
		if st.Done == nil {
			return Outcome{Kind: OutcomeRejected, Err: toolerr.New(toolerr.Internal, "step %d (%s) has no Done predicate", i, st.Name)}
		}
	}
	if m.Deadline <= 0 {
		return Outcome{Kind: OutcomeRejected, Err: toolerr.New(toolerr.Internal, "motion has no deadline")}
	}
	if m.Auth.ArgsHash == "" {
		m.Auth.ArgsHash = ArgsHash(m.Auth.Tool, m.Auth.Args)
	}
	m.Auth.recovery = false
	s.mu.Lock()
	if !s.running || s.closed {
		s.mu.Unlock()
		return Outcome{Kind: OutcomeRejected, Err: toolerr.New(toolerr.Unavailable, "the safety supervisor is not running").Wrap(ErrNotStarted)}
	}
	if s.active != nil && s.active.view.Phase == PhasePaused {
		other := s.active.view
		s.mu.Unlock()
		return Outcome{Kind: OutcomeRejected, Err: toolerr.New(toolerr.RobotBusy, "task %s (%s) is paused by an operator and holds the robot until it is resumed or ends", other.TaskID, other.Tool).
			Wrap(ErrBusy).With("task_id", other.TaskID).With("tool", other.Tool)}
	}
	if s.active != nil {
		other := s.active.view
		s.mu.Unlock()
		return Outcome{Kind: OutcomeRejected, Err: toolerr.New(toolerr.RobotBusy, "task %s (%s) is already moving the robot", other.TaskID, other.Tool).
			Wrap(ErrBusy).With("task_id", other.TaskID).With("tool", other.Tool)}
	}
	if req, ok := s.stopRequestedLocked(m.Auth.TaskID); ok {
		// Stopped before its motion began (a stop racing an approval):
		// nothing is sent, ever.
		delete(s.stopReq, m.Auth.TaskID)
		s.mu.Unlock()
		st, _, _ := s.Latest()
		return Outcome{Kind: OutcomeRejected, Err: stopRefusal(req), Stop: &req, State: st}
	}
	a := &activeMotion{
		view:    ActiveMotion{TaskID: m.Auth.TaskID, Tool: m.Auth.Tool, Phase: PhaseExecuting, Since: s.clock.Now()},
		grantID: m.Auth.GrantID,
		wake:    make(chan struct{}, 1), stop: make(chan struct{}),
		pauseCh: make(chan *pauseCall, 1), resumeCh: make(chan *resumeCall, 1), abortCh: make(chan abortCall, 1),
	}
	s.active = a
	sctx := s.ctx
	s.mu.Unlock()
	defer func() {
		if s.traffic != nil {
			// The motion is over: the others keep clear of where the
			// robot is from now on, not of its corridor.
			s.traffic.release(s.cfg.Robot.ID)
		}
		s.mu.Lock()
		s.active = nil
		// Execute runs once per task, so once it returns no command of
		// the task can reach the gate again: its stop request has served,
		// and so has a pause or abort; one the loop never took is told so.
		delete(s.stopReq, m.Auth.TaskID)
		delete(s.holdReq, m.Auth.TaskID)
		a.paused = nil
		a.drainLocked(notHeldEnded(m.Auth.TaskID, "finished its motion before the request took effect"))
		s.mu.Unlock()
	}()
	r := &run{s: s, a: a, sctx: sctx}
	return r.execute(ctx, m)
}

type run struct {
	s    *Supervisor
	a    *activeMotion
	sctx context.Context
	// warnings collects the motion's GoalWarnings (the loop's own).
	warnings []GoalWarning
}

// idle records that the loop has processed everything up to now and is
// about to block until next (its next tick); busy records that it woke.
// Test harnesses stepping a fake clock wait on them.
func (r *run) idle(next time.Time) {
	r.s.mu.Lock()
	r.a.blocked, r.a.nextTick = true, next
	r.s.mu.Unlock()
}

func (r *run) busy() {
	r.s.mu.Lock()
	r.a.blocked = false
	r.s.mu.Unlock()
}

// setPhase moves the motion to p. Leaving execution (stopping,
// recovering) answers any pause, resume or abort the loop has not taken:
// the motion is ending by itself, and a pause's hold must not refuse the
// supervisor's recovery (an abort's never does).
func (r *run) setPhase(p Phase) {
	r.s.mu.Lock()
	r.a.view.Phase = p
	if p == PhaseStopping || p == PhaseRecovering {
		r.a.paused = nil
		if h, ok := r.s.holdReq[r.a.view.TaskID]; ok && h.kind == holdPause {
			delete(r.s.holdReq, r.a.view.TaskID)
		}
		r.a.drainLocked(notHeldEnded(r.a.view.TaskID, "is already "+string(p)))
	}
	r.s.mu.Unlock()
}

func (r *run) execute(ctx context.Context, m Motion) Outcome {
	out := r.execute1(ctx, m)
	out.Warnings = r.warnings
	return out
}

func (r *run) execute1(ctx context.Context, m Motion) Outcome {
	hooks := m.Hooks
	trip, done, err := r.supervise(ctx, m.Auth, m.Steps, m.Deadline, &hooks, false)
	if err != nil {
		st, _, _ := r.s.Latest()
		out := Outcome{Kind: OutcomeRejected, Err: err, State: st}
		if req, ok := r.s.StopRequested(m.Auth.TaskID); ok && errors.Is(err, ErrStopRequested) {
			out.Stop = &req
		}
		return out
	}
	if trip == nil {
		st, _, _ := r.s.Latest()
		return Outcome{Kind: OutcomeSucceeded, StepsDone: done, State: st}
	}
	out := Outcome{Trip: trip, StepsDone: done}
	r.setPhase(PhaseStopping)
	// The stop has been sent by supervise already; now tell the runner.
	if m.Hooks.Stopped != nil {
		m.Hooks.Stopped(*trip)
	}
	if trip.Kind == TripShutdown {
		out.Kind = OutcomeInterrupted
		out.State, _, _ = r.s.Latest()
		return out
	}
	if trip.Kind == TripPauseUnconfirmed {
		// The pause waited the whole stop timeout already.
		out.StopConfirmed = false
	} else {
		out.StopConfirmed = r.waitStopped(trip.At)
	}
	out.State, _, _ = r.s.Latest()
	req, stopReq := r.stopRequest(trip)
	switch {
	case r.sctx.Err() != nil:
		// The bridge began shutting down while the robot was stopping: its
		// final stop follows; no recovery, and no fault for a stop whose
		// confirmation the shutdown cut short.
		return r.interrupted(out)
	case r.s.eStopped():
		out.Kind = OutcomeEStopped
		out.Recovery.Text = "no recovery motion while the e-stop is latched"
		return out
	case stopReq:
		// A requested stop wins over whatever tripped first: no recovery
		// motion starts after it.
		if trip.Kind != req.tripKind() {
			out.Recovery.Text = "no recovery motion: " + req.detail() + " before recovery began"
		}
		return r.cancelled(out, m.Auth.TaskID, req)
	case trip.Kind == TripPauseUnconfirmed:
		return r.fault(out, m.Auth.TaskID, trip.Detail, causeStopUnconfirmed)
	case trip.Kind == TripMovedWhilePaused:
		// Something other than the bridge moved a held robot: nothing
		// may move it again until an operator has looked.
		return r.fault(out, m.Auth.TaskID, trip.Detail, causeMovedWhilePaused)
	case !out.StopConfirmed:
		return r.fault(out, m.Auth.TaskID, fmt.Sprintf("%s; the robot was not confirmed stopped within %s", trip.Detail, robot.FormatAge(r.s.set.stopTimeout)), causeStopUnconfirmed)
	case !r.s.set.preauthorized:
		out.Recovery.Text = "recovery to the safe pose is not pre-authorized by the config"
		return r.fault(out, m.Auth.TaskID, trip.Detail+"; "+out.Recovery.Text, causeNotPreauthorized)
	}
	return r.recover(ctx, out, m)
}

// stopRequest returns the stop request that ends the motion: one recorded
// for the task (stop tool, cancel, console, grant ended), or the cancel of
// the motion's context.
func (r *run) stopRequest(trip *Trip) (StopRequest, bool) {
	if req, ok := r.s.StopRequested(r.a.view.TaskID); ok {
		return req, true
	}
	if trip != nil && trip.Kind == TripCancelled {
		return StopRequest{TaskID: r.a.view.TaskID, Cause: StopByRequest, By: trip.By, At: trip.At}, true
	}
	return StopRequest{}, false
}

// cancelled ends a motion whose stop was requested. The robot confirmed
// at rest makes it cancelled; a robot that does not confirm the stop
// within the stop timeout (silent, or still moving) is a fault of the
// robot, not of the request, and latches like any unconfirmed stop.
func (r *run) cancelled(out Outcome, taskID string, req StopRequest) Outcome {
	out.Stop = &req
	if out.StopConfirmed {
		out.Kind = OutcomeCancelled
		return out
	}
	return r.fault(out, taskID, fmt.Sprintf("%s, but the robot was not confirmed stopped within %s", req.detail(), robot.FormatAge(r.s.set.stopTimeout)), causeStopUnconfirmed)
}

// interrupted ends a motion the shutdown cut short.
func (r *run) interrupted(out Outcome) Outcome {
	out.Kind = OutcomeInterrupted
	out.State, _, _ = r.s.Latest()
	return out
}

// fault latches a fault for taskID with the developer's reason and the
// operator's words for cause, and ends the motion with it.
func (r *run) fault(out Outcome, taskID, reason string, cause faultCause) Outcome {
	r.s.latchFault(taskID, reason, r.s.faultWords(r.a.view.Tool, cause, out))
	out.Kind = OutcomeFault
	out.FaultReason = reason
	out.State, _, _ = r.s.Latest()
	return out
}

// recover returns the arm to the safe pose, the base staying stopped.
func (r *run) recover(ctx context.Context, out Outcome, m Motion) Outcome {
	s := r.s
	st, _, _ := s.Latest()
	var steps []Step
	name := s.set.safePoseName
	if len(s.set.safePose) > 0 && !jointsAt(st, s.set.safePose, s.set.jointTol) {
		steps = append(steps, ArmStep("return the arm to "+name, s.set.safePose, s.set.speedScale, s.set.jointTol))
	}
	if s.set.gripperOpen && s.cfg.Gripper != nil && (st.Gripper == nil || st.Gripper.Closed) {
		steps = append(steps, GripperStep("open the gripper", false, 0, s.cfg.Gripper.MaxOpening))
	}
	// A stop requested while the robot was stopping ends the task here:
	// recovery never starts after it (the gate would refuse it anyway).
	if req, ok := s.StopRequested(m.Auth.TaskID); ok {
		out.Recovery.Text = "no recovery motion: " + req.detail() + " before recovery began"
		return r.cancelled(out, m.Auth.TaskID, req)
	}
	if len(steps) == 0 {
		out.Kind = OutcomeRecovered
		out.Recovery = Recovery{Succeeded: true, Text: "arm already in " + name + ", base stopped"}
		if name == "" {
			out.Recovery.Text = "base stopped"
		}
		return out
	}
	if m.Hooks.BeforeRecovery != nil {
		if err := m.Hooks.BeforeRecovery(); err != nil {
			out.Recovery.Text = "recovery was not started because its transition could not be recorded"
			return r.fault(out, m.Auth.TaskID, out.Recovery.Text+": "+err.Error(), causeRecoveryUnrecorded)
		}
	}
	if r.sctx.Err() != nil {
		return r.interrupted(out)
	}
	r.setPhase(PhaseRecovering)
	out.Recovery.Attempted = true
	s.emit(Event{Kind: EventRecoveryStarted, TaskID: m.Auth.TaskID, By: "supervisor", Reason: out.Trip.Detail})
	auth := Authorization{TaskID: m.Auth.TaskID, Tool: "recovery", recovery: true}
	trip, _, err := r.supervise(ctx, auth, steps, s.set.safePoseTimeout, nil, true)
	if err == nil && trip == nil {
		out.Kind = OutcomeRecovered
		out.Recovery.Succeeded = true
		out.Recovery.Text = "arm returned to " + name
		if name == "" {
			out.Recovery.Text = "gripper opened"
		}
		if s.set.gripperOpen && name != "" {
			out.Recovery.Text += " and gripper opened"
		}
		out.State, _, _ = s.Latest()
		s.emit(Event{Kind: EventRecoveryFinished, TaskID: m.Auth.TaskID, By: "supervisor", Reason: out.Recovery.Text})
		return out
	}
	if req, ok := r.stopRequest(trip); ok && (trip != nil || errors.Is(err, ErrStopRequested)) {
		// Stopped on request during recovery: the stop wins, never a fault.
		if trip != nil {
			out.StopConfirmed = r.waitStopped(trip.At)
			out.Recovery.Trip = trip
		}
		out.Recovery.Text = "recovery to " + name + " stopped: " + req.detail()
		out.State, _, _ = s.Latest()
		s.emit(Event{Kind: EventRecoveryFinished, TaskID: m.Auth.TaskID, By: req.By, Reason: out.Recovery.Text})
		if s.eStopped() {
			out.Kind = OutcomeEStopped
			return out
		}
		return r.cancelled(out, m.Auth.TaskID, req)
	}
	if r.sctx.Err() != nil {
		out.Recovery.Trip = trip
		out.Recovery.Text = "recovery to " + name + " cut short: the bridge is shutting down"
		s.emit(Event{Kind: EventRecoveryFinished, TaskID: m.Auth.TaskID, By: "supervisor", Reason: out.Recovery.Text})
		return r.interrupted(out)
	}
	if err != nil {
		// Refused at the gate: e-stop latched meanwhile, or link never
		// came back before the recovery deadline.
		out.Recovery.Text = "recovery could not start: " + toolerr.As(err).Message
	} else {
		out.Recovery.Trip = trip
		out.Recovery.Text = "recovery to " + name + " failed: " + trip.Detail
		r.waitStopped(trip.At)
	}
	s.emit(Event{Kind: EventRecoveryFinished, TaskID: m.Auth.TaskID, By: "supervisor", Reason: out.Recovery.Text, Err: errors.New(out.Recovery.Text)})
	if s.eStopped() {
		out.Kind = OutcomeEStopped
		out.State, _, _ = s.Latest()
		return out
	}
	return r.fault(out, m.Auth.TaskID, out.Trip.Detail+"; "+out.Recovery.Text, causeRecoveryFailed)
}

func (s *Supervisor) eStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.estop.Active
}

// supervise sends steps one by one through the gate and watches each
// until done. It returns the trip that ended it (after the stop was
// sent), or the gate's refusal of the first command (nothing sent). With
// retryUnavailable a refusal for a down link is retried every period until
// the deadline (recovery waits for a link that dropped).
func (r *run) supervise(ctx context.Context, auth Authorization, steps []Step, deadline time.Duration,
	hooks *Hooks, retryUnavailable bool,
) (*Trip, int, error) {
	s := r.s
	// hooks is nil for the supervisor's own recovery, which is never
	// paused (PauseTask refuses a motion that is not executing).
	var beforeStart func() error
	var progress func(int, robot.State)
	if hooks != nil {
		beforeStart, progress = hooks.BeforeStart, hooks.Progress
	}
	period := s.set.controlPeriod
	timer := s.clock.NewTimer(period)
	defer timer.Stop()
	armed := true
	start := s.clock.Now()
	nextTick := start.Add(period)
	mkTrip := func(kind TripKind, step int, detail string, err error) *Trip {
		st, _, _ := s.Latest()
		now := s.clock.Now()
		t := &Trip{Kind: kind, Detail: detail, Step: step, At: now, Elapsed: now.Sub(start), Err: err, State: st}
		if step < len(steps) {
			t.StepName = steps[step].Name
		}
		return t
	}
	// pending is an operator's pause that wait took; the step loop holds
	// the motion on it.
	var pending *pauseCall
	// wait blocks until the next control-period tick (tick true), a new
	// state or latch change, a pause (pending), or the end of the motion
	// (a trip).
	wait := func() (bool, *Trip) {
		// Re-arm only now, after all processing of the last tick, so a
		// fake clock's waiter count shows when the loop is idle again.
		if !armed {
			timer.Reset(period)
			armed, nextTick = true, s.clock.Now().Add(period)
		}
		r.idle(nextTick)
		defer r.busy()
		select {
		case <-timer.Chan():
			armed = false
			return true, nil
		case <-r.a.wake:
			return false, nil
		case <-ctx.Done():
			return false, mkTrip(TripCancelled, 0, "cancelled", ctx.Err())
		case <-r.a.stop:
			req := r.a.stopped
			t := mkTrip(req.tripKind(), 0, req.detail(), nil)
			t.By = req.By
			return false, t
		case <-r.sctx.Done():
			return false, mkTrip(TripShutdown, 0, "the bridge is shutting down", nil)
		case pc := <-r.a.pauseCh:
			pending = pc
			return false, nil
		case ab := <-r.a.abortCh:
			t := mkTrip(TripAborted, 0, abortDetail(ab.by, ab.reason), nil)
			t.By = ab.by
			return false, t
		}
	}
	reporter, _ := s.drv.(GoalReporter)
	for i, step := range steps {
		// Send the step through the gate, under an id of its own so the
		// driver can say when the robot's controller finished it.
		var before func() error
		if i == 0 {
			before = beforeStart
		}
		cmd := step.Command
		if cmd.ID == "" {
			cmd.ID = s.commandID(auth)
		}
	send:
		for {
			// A robot that does not accept a goal within the state timeout
			// is treated as failed: monitoring pauses while Send waits.
			// (clockwork's fake-clock context blocks in Err, so the timeout
			// is an AfterFunc on the supervisor's clock.)
			sctx, cancel := context.WithCancelCause(ctx)
			tm := s.clock.AfterFunc(s.set.stateTimeout, func() { cancel(errAcceptTimeout) })
			err := s.send(sctx, auth, cmd, before)
			tm.Stop()
			cancel(nil)
			if err == nil {
				break
			}
			var se *sendError
			switch {
			case errors.As(err, &se) && !s.drv.LinkUp():
				return r.trip(mkTrip(TripLinkDown, i, "the robot link went down while sending "+step.Name+": "+se.err.Error(), err)), i, nil
			case errors.As(err, &se):
				return r.trip(mkTrip(TripDriverError, i, "the driver failed to send "+step.Name+": "+se.err.Error(), err)), i, nil
			case errors.As(err, new(*refusedAfterStartError)):
				// The grant ended while the start was being recorded:
				// nothing was sent.
				t, _ := r.grantEndedOnRecord(ctx, auth, err, i, mkTrip)
				return t, i, nil
			case errors.Is(err, ErrLinkDown) && retryUnavailable && s.clock.Since(start) < deadline:
				if _, t := wait(); t != nil {
					return r.trip(t), i, nil
				}
				continue
			case i == 0:
				return nil, 0, err
			case errors.Is(err, ErrAborted):
				return r.trip(mkTrip(TripAborted, i, toolerr.As(err).Message, err)), i, nil
			case errors.Is(err, ErrPaused):
				// Paused between two steps: the loop takes the pause and
				// holds before this step's command is sent.
				pc := r.takePause()
				if pc == nil {
					return r.trip(mkTrip(TripDriverError, i, "the gate refused "+step.Name+": "+toolerr.As(err).Message, err)), i, nil
				}
				c, t := r.hold(ctx, pc, auth, step, i, hooksOf(hooks), mkTrip)
				if t != nil {
					return t, i, nil
				}
				// Resumed: the step's command has been sent, and the
				// deadline counts from now.
				cmd, start = c, s.clock.Now()
				break send
			case errors.Is(err, ErrEStopActive):
				return r.trip(mkTrip(TripEStop, i, "the e-stop is latched", err)), i, nil
			case errors.Is(err, ErrLinkDown):
				return r.trip(mkTrip(TripLinkDown, i, toolerr.As(err).Message, err)), i, nil
			default:
				return r.trip(mkTrip(TripDriverError, i, "the gate refused "+step.Name+": "+toolerr.As(err).Message, err)), i, nil
			}
		}
		stepStart := s.clock.Now()
		best, lastProgress := math.Inf(1), stepStart
		var lastSeen time.Time
		// finished is set once the robot's controller reported the goal
		// reached (GoalReporter), at finishedAt on the supervisor's clock.
		var (
			finished     bool
			finishedText string
			finishedAt   time.Time
		)
		for {
			now := s.clock.Now()
			st, at, have := s.Latest()
			if t := r.check(now, at, have, st); t != nil {
				t2 := mkTrip(t.kind, i, t.detail, t.err)
				t2.age = t.age
				return r.trip(t2), i, nil
			}
			// Authority ends at once: a grant revoked or run out since the
			// last look stops the motion now (invariant 11).
			if req := r.authorityEnded(auth); req != nil {
				_ = s.requestStop(context.WithoutCancel(ctx), *req, false)
				t := mkTrip(req.tripKind(), i, req.detail(), nil)
				t.By = req.By
				return r.trip(t), i, nil
			}
			if at != lastSeen && progress != nil && have {
				progress(i, st)
			}
			lastSeen = at
			if !finished && reporter != nil {
				if text, ok := reporter.GoalSucceeded(cmd.ID); ok {
					finished, finishedText, finishedAt = true, text, now
				}
			}
			// Only a state received after the command counts: one from
			// before it may show the goal "reached" while the robot is
			// about to move the last millimetres.
			if have && at.After(stepStart) && step.Done(st) {
				if step.Verify != nil {
					if err := step.Verify(st); err != nil {
						return r.trip(mkTrip(TripVerifyFailed, i, err.Error(), err)), i, nil
					}
				}
				break
			}
			// The robot's controller said the goal is reached: once a
			// state received after that shows the robot at rest, the step
			// is done, and where the bridge's own check disagrees it says
			// so, with the numbers, in a warning.
			if finished && have && at.After(finishedAt) && !st.Moving(RestLinear, RestAngular) {
				if step.Verify != nil {
					if err := step.Verify(st); err != nil {
						return r.trip(mkTrip(TripVerifyFailed, i, err.Error(), err)), i, nil
					}
				}
				// A base within every tolerance (Done missed only by a
				// rounding of the rest thresholds) is no disagreement.
				if misses := r.misses(step, cmd, st); len(misses) > 0 || cmd.Kind != robot.CmdMoveBase {
					r.warnings = append(r.warnings, GoalWarning{
						Step: i, StepName: stepLabel(step, auth), Robot: finishedText, Misses: misses, State: st,
					})
				}
				break
			}
			if el := now.Sub(start); el > deadline {
				t := mkTrip(TripDeadline, i, fmt.Sprintf("%s did not finish within its %s deadline", stepLabel(step, auth), robot.FormatAge(deadline)), nil)
				t.limit = deadline
				return r.trip(t), i, nil
			}
			// A goal the robot reported finished makes no more progress
			// by design: the stall monitor is for goals still running.
			if step.Remaining != nil && have && !finished {
				if rem := step.Remaining(st); rem < best-stallEpsilon {
					best, lastProgress = rem, now
				} else if now.Sub(lastProgress) > s.set.stallTimeout {
					t := mkTrip(TripStall, i, fmt.Sprintf("no progress on %s for %s", stepLabel(step, auth), robot.FormatAge(s.set.stallTimeout)), nil)
					t.limit = s.set.stallTimeout
					return r.trip(t), i, nil
				}
			}
			tick, t := wait()
			if t != nil {
				t.Step = i
				t.StepName = step.Name
				return r.trip(t), i, nil
			}
			if pending != nil {
				// Paused: hold until a resume sends the step's command
				// again; its monitors then start afresh — the deadline,
				// the stall timer and the controller's verdict.
				pc := pending
				pending = nil
				c, t := r.hold(ctx, pc, auth, step, i, hooksOf(hooks), mkTrip)
				if t != nil {
					return t, i, nil
				}
				cmd, start = c, s.clock.Now()
				stepStart = start
				best, lastProgress = math.Inf(1), start
				finished, finishedText, finishedAt = false, "", time.Time{}
				continue
			}
			// Keep the robot's command watchdog fed while we supervise.
			if tick {
				// A lease that lapsed since the last check ends the motion
				// as what it is, before the driver refuses the refresh.
				if err := s.fenceErr(); err != nil {
					return r.trip(mkTrip(TripLeaseLost, i, "this bridge may no longer command the robot: "+toolerr.As(err).Message, err)), i, nil
				}
				if err := s.drv.Refresh(ctx); err != nil && ctx.Err() == nil {
					if !s.drv.LinkUp() {
						return r.trip(mkTrip(TripLinkDown, i, "the robot link went down during the motion", err)), i, nil
					}
					return r.trip(mkTrip(TripDriverError, i, "the driver failed to refresh the motion: "+err.Error(), err)), i, nil
				}
			}
		}
	}
	return nil, len(steps), nil
}

// hooksOf is *h, or no hooks for the supervisor's own recovery.
func hooksOf(h *Hooks) Hooks {
	if h == nil {
		return Hooks{}
	}
	return *h
}

// takePause takes the pause whose hold made the gate refuse a step's
// command: PauseTask hands it to the loop together with the hold, so it
// is there (nil only if that ever failed to hold).
func (r *run) takePause() *pauseCall {
	select {
	case pc := <-r.a.pauseCh:
		return pc
	default:
		return nil
	}
}

// misses is the second opinion on a step whose Done does not hold: its
// own Miss, else, for a base goal, BaseMisses against the config's base
// tolerances.
func (r *run) misses(step Step, cmd robot.Command, st robot.State) []string {
	if step.Miss != nil {
		return step.Miss(st)
	}
	if cmd.Kind == robot.CmdMoveBase && cmd.Base != nil {
		tol, yawDeg := r.s.cfg.GoalTolerance("")
		return BaseMisses(st.Base, cmd.Base.Target, cmd.Base.IgnoreTheta, tol, robot.Radians(yawDeg))
	}
	return nil
}

// commandID returns a new command id for a, unique in this supervisor:
// "<task>-<n>", "recover-<task>-<n>" for the pre-authorized recovery.
// Transports that may deliver twice drop duplicates by it, and a
// GoalReporter names a goal by it.
func (s *Supervisor) commandID(a Authorization) string {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.cmdSeq++
	owner := a.TaskID
	if owner == "" {
		owner = "cmd"
	}
	if a.recovery {
		owner = RecoveryCommandPrefix + owner
	}
	return fmt.Sprintf("%s-%d", owner, s.cmdSeq)
}

// grantEndedOnRecord ends the motion whose grant ended while its start
// or resume was recorded (the gate's refusedAfterStartError: nothing was
// sent) as a motion whose grant ends does (invariant 11), in the same
// words; it returns the trip and the request that ended it.
func (r *run) grantEndedOnRecord(ctx context.Context, auth Authorization, err error, i int,
	mkTrip func(TripKind, int, string, error) *Trip,
) (*Trip, *StopRequest) {
	req := r.authorityEnded(auth)
	if req == nil {
		req = &StopRequest{TaskID: auth.TaskID, Cause: StopGrantRevoked, Reason: toolerr.As(err).Message}
	}
	_ = r.s.requestStop(context.WithoutCancel(ctx), *req, false)
	t := mkTrip(req.tripKind(), i, req.detail(), nil)
	t.By = req.By
	return r.trip(t), req
}

// authorityEnded re-checks the grant a motion runs on and returns the stop
// request its end implies, nil while it still authorizes the motion. The
// supervisor's recovery and tools the config marks "approval: never" hold
// no grant and are not checked.
func (r *run) authorityEnded(a Authorization) *StopRequest {
	if a.recovery || a.GrantID == "" {
		return nil
	}
	err := r.s.authorize(a)
	if err == nil {
		return nil
	}
	cause := StopGrantRevoked
	if errors.Is(err, ErrGrantExpired) {
		cause = StopGrantExpired
	}
	var rv Revocation
	if errors.As(err, &rv) {
		if by, reason, ok := rv.Revocation(); ok {
			return &StopRequest{TaskID: a.TaskID, Cause: StopGrantRevoked, By: by, Reason: reason}
		}
	}
	reason := err.Error()
	var te *toolerr.Error
	if errors.As(err, &te) && te.Err != nil {
		reason = te.Err.Error()
	}
	return &StopRequest{TaskID: a.TaskID, Cause: cause, Reason: reason}
}

// Rest thresholds: a step is only done once the robot is at rest, so a
// task never reports success while something still moves.
const (
	RestLinear        = 0.01 // m/s
	RestAngular       = 0.02 // rad/s
	RestJointVelocity = 0.02 // rad/s
)

// errAcceptTimeout cancels a Send the robot did not accept in time.
var errAcceptTimeout = errors.New("the robot did not accept the goal within the state timeout")

// stallEpsilon is the least decrease of Remaining that counts as progress.
const stallEpsilon = 0.002

func stepLabel(st Step, a Authorization) string {
	if st.Name != "" {
		return st.Name
	}
	return a.Tool
}

type check struct {
	kind   TripKind
	detail string
	err    error
	// age is how long the robot had been silent (TripSilence).
	age time.Duration
}

// check runs the runtime monitors that do not depend on the step.
func (r *run) check(now, at time.Time, have bool, st robot.State) *check {
	s := r.s
	if s.eStopped() {
		return &check{kind: TripEStop, detail: "the e-stop was pressed", err: ErrEStopActive}
	}
	if !s.drv.LinkUp() {
		return &check{kind: TripLinkDown, detail: "the robot link went down", err: ErrLinkDown}
	}
	if err := s.fenceErr(); err != nil {
		return &check{kind: TripLeaseLost, detail: "this bridge may no longer command the robot: " + toolerr.As(err).Message, err: err}
	}
	if !have || now.Sub(at) > s.set.stateTimeout {
		age := now.Sub(at)
		if !have {
			age = 0
		}
		return &check{kind: TripSilence, detail: fmt.Sprintf("the robot sent no state for %s (limit %s)", robot.FormatAge(age), robot.FormatAge(s.set.stateTimeout)), err: ErrLinkDown, age: age}
	}
	if st.EStop {
		return &check{kind: TripRobotEStop, detail: "the robot's own e-stop engaged", err: ErrEStopActive}
	}
	if len(st.Faults) > 0 {
		return &check{kind: TripRobotFault, detail: "the robot reported " + strings.Join(st.Faults, ", "), err: nil}
	}
	if b := s.limits.Breach(st, s.set.breachTol); b != "" {
		return &check{kind: TripLimitBreach, detail: b, err: ErrLimitExceeded}
	}
	return nil
}

// trip sends the stop first, then reports the trip.
func (r *run) trip(t *Trip) *Trip {
	s := r.s
	detected := s.clock.Now()
	err := s.stopNow(context.Background())
	lat := s.clock.Since(detected)
	if t.Kind == TripEStop || t.Kind == TripRobotEStop {
		s.mu.Lock()
		fresh := !s.estop.Active
		if fresh {
			s.estop = EStopStatus{Active: true, By: "robot", Reason: t.Detail, Since: detected}
		}
		s.mu.Unlock()
		if fresh {
			s.emit(Event{Kind: EventEStopPressed, At: detected, By: "robot", Reason: t.Detail})
		}
	}
	s.log.Warn("monitor tripped", "task", r.a.view.TaskID, "monitor", t.Kind, "detail", t.Detail, "stop_latency", lat, "stop_err", err)
	if t.Kind != TripCancelled && t.Kind != TripShutdown && t.Kind != TripAborted {
		s.emit(Event{Kind: EventMonitorTripped, At: detected, TaskID: r.a.view.TaskID, Monitor: t.Kind, Reason: t.Detail, Err: t.Err})
	}
	s.emit(Event{Kind: EventStopSent, At: detected, TaskID: r.a.view.TaskID, By: "supervisor", Monitor: t.Kind, Reason: t.Detail, Latency: lat, Err: err})
	return t
}

// waitStopped waits, one control period at a time and at most the stop
// timeout, for a state received after the stop that shows the robot at
// rest. It does not send anything itself: the stop was sent by whoever
// ended the motion.
func (r *run) waitStopped(since time.Time) bool {
	s := r.s
	timer := s.clock.NewTimer(s.set.controlPeriod)
	defer timer.Stop()
	armed := true
	start := s.clock.Now()
	nextTick := start.Add(s.set.controlPeriod)
	for {
		st, at, have := s.Latest()
		if have && s.drv.LinkUp() && at.After(since) && !st.Moving(RestLinear, RestAngular) {
			return true
		}
		if s.clock.Since(start) > s.set.stopTimeout {
			return false
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
		case <-r.sctx.Done():
			r.busy()
			return false
		}
		r.busy()
	}
}

// jointsAt reports whether every joint is within tol of q.
func jointsAt(st robot.State, q []float64, tol float64) bool {
	if len(st.Joints) < len(q) {
		return false
	}
	for i, v := range q {
		if math.Abs(st.Joints[i].Position-v) > tol {
			return false
		}
	}
	return true
}

// ArmStep is a step that moves the arm to q at the given velocity scale,
// done when every joint is within tol of q.
func ArmStep(name string, q []float64, scale, tol float64) Step {
	q = append([]float64(nil), q...)
	return Step{
		Name:    name,
		Command: robot.Command{Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: q, VelocityScale: scale}},
		Done: func(st robot.State) bool {
			if !jointsAt(st, q, tol) {
				return false
			}
			for _, j := range st.Joints {
				if math.Abs(j.Velocity) > RestJointVelocity {
					return false
				}
			}
			return true
		},
		Remaining: func(st robot.State) float64 {
			m := 0.0
			for i, v := range q {
				if i < len(st.Joints) {
					m = math.Max(m, math.Abs(st.Joints[i].Position-v))
				}
			}
			return m
		},
	}
}

// GripperStep is a step that opens or closes the gripper. Closing is done
// when the gripper reports closed (on an object or empty); opening when
// the fingers are at least 90% of maxOpening apart and not closed.
func GripperStep(name string, close bool, force, maxOpening float64) Step {
	return Step{
		Name:    name,
		Command: robot.Command{Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{Close: close, Force: force}},
		Done: func(st robot.State) bool {
			if st.Gripper == nil {
				return false
			}
			if close {
				return st.Gripper.Closed
			}
			return !st.Gripper.Closed && st.Gripper.Opening >= 0.9*maxOpening
		},
		Remaining: func(st robot.State) float64 {
			if st.Gripper == nil {
				return math.Inf(1)
			}
			if close {
				if st.Gripper.Closed {
					return 0
				}
				return st.Gripper.Opening
			}
			return math.Max(0, maxOpening-st.Gripper.Opening)
		},
	}
}
