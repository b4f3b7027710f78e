package safety

import (
	"context"
	"errors"
	"fmt"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Authorization is what a motion presents at the gate: whose task it is,
// which tool call, and the operator grant it holds.
type Authorization struct {
	TaskID  string
	Tool    string
	Args    map[string]any
	GrantID string
	// ArgsHash is ArgsHash(Tool, Args); computed when empty.
	ArgsHash string

	// recovery marks the supervisor's own return to the safe pose; only
	// this package can set it, so no caller can claim pre-authorization.
	recovery bool
	// resume marks the command that resumes a paused task (sendResume):
	// the pause's hold is the one check it skips.
	resume bool
}

// admit runs every check of the gate, in order, without sending: shut
// down, e-stop, fault, a stop requested for the task, link, limits,
// authorization. Deny wins: the latches are checked before any grant.
func (s *Supervisor) admit(a Authorization, cmd robot.Command) error {
	s.mu.Lock()
	estop, fault, last, have, lastAt, closed := s.estop, s.fault, s.last, s.haveState, s.lastAt, s.closed
	stopped, isStopped := s.stopRequestedLocked(a.TaskID)
	hold, isHeld := s.holdReq[a.TaskID]
	s.mu.Unlock()
	if closed {
		return toolerr.New(toolerr.Unavailable, "the safety supervisor has shut down; nothing was sent").Wrap(ErrNotStarted)
	}
	if e := latchedError(estop, fault); e != nil {
		return e
	}
	if isStopped {
		return stopRefusal(stopped)
	}
	// A paused task sends nothing until it is resumed, an aborted one
	// nothing at all; only the supervisor's own recovery passes an abort.
	if isHeld && a.TaskID != "" && !a.recovery && (hold.kind == holdAbort || !a.resume) {
		return hold.refusal(a.TaskID)
	}
	if err := s.fenceErr(); err != nil {
		return err
	}
	if !s.drv.LinkUp() {
		return unavailable("the robot link is down", s.set.stateTimeout*2)
	}
	if !have {
		return unavailable("no robot state has been received yet", s.set.stateTimeout*2)
	}
	if age := s.clock.Since(lastAt); age > s.set.stateTimeout {
		return unavailable(fmt.Sprintf("the robot has sent no state for %.1f s", age.Seconds()), s.set.stateTimeout*2)
	}
	from := last.Base
	if err := s.limits.Check(cmd, &from); err != nil {
		if le, ok := errors.AsType[*LimitError](err); ok {
			return le.ToolError()
		}
		return toolerr.New(toolerr.InvalidParams, "%v", err).Wrap(err)
	}
	return s.authorize(a)
}

// reserveTraffic claims the corridor of a task's base motion among the
// other robots of the room (Traffic), after every other check passed:
// only a motion that may go holds one, and a dry run (Admit) holds none.
func (s *Supervisor) reserveTraffic(a Authorization, cmd robot.Command) error {
	if s.traffic == nil || cmd.Base == nil || a.TaskID == "" || a.recovery {
		return nil
	}
	from, ok := s.basePose()
	if !ok {
		return nil // admit refused a robot without state already
	}
	return s.traffic.reserve(s.cfg.Robot.ID, from, cmd.Base.Target)
}

func orDash(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func unavailable(msg string, retry time.Duration) *toolerr.Error {
	e := toolerr.New(toolerr.Unavailable, "%s; nothing was sent", msg).Wrap(ErrLinkDown)
	e.RetryAfter = retry
	return e
}

// authorize is the last check of the gate.
func (s *Supervisor) authorize(a Authorization) error {
	if a.recovery {
		if s.set.preauthorized {
			return nil
		}
		return toolerr.New(toolerr.PermissionDenied, "recovery to the safe pose is not pre-authorized by the config").Wrap(ErrNotAuthorized)
	}
	if ac, ok := s.cfg.Actions[a.Tool]; ok && ac.Approval == hwconfig.ApprovalNever {
		return nil
	}
	if a.GrantID == "" {
		return toolerr.New(toolerr.PermissionDenied, "%s needs an operator's approval and the task holds no grant", a.Tool).Wrap(ErrNotAuthorized)
	}
	if s.grants == nil {
		return toolerr.New(toolerr.PermissionDenied, "no grant service is configured, so grant %s cannot be checked", a.GrantID).Wrap(ErrNotAuthorized)
	}
	hash := a.ArgsHash
	if hash == "" {
		hash = ArgsHash(a.Tool, a.Args)
	}
	err := s.grants.Authorize(Use{
		GrantID: a.GrantID, TaskID: a.TaskID, Tool: a.Tool, Args: a.Args, ArgsHash: hash,
		RobotID: s.cfg.Robot.ID, Now: s.clock.Now(),
	})
	if err != nil {
		if !errors.Is(err, ErrNotAuthorized) {
			err = fmt.Errorf("%w: %w", ErrNotAuthorized, err)
		}
		return toolerr.New(toolerr.PermissionDenied, "grant %s does not authorize this motion: %v", a.GrantID, err).Wrap(err)
	}
	return nil
}

// send is the gate: the only call of Driver.Send in the bridge. before,
// when set, runs after every check passed and before the command leaves,
// under the same lock an e-stop synchronises on; an error from it means
// nothing is sent (the action runner records the transition there).
func (s *Supervisor) send(ctx context.Context, a Authorization, cmd robot.Command, before func() error) error {
	err := s.sendLocked(ctx, a, cmd, before)
	if err != nil {
		s.emit(Event{Kind: EventCommandRefused, TaskID: a.TaskID, Reason: cmd.Kind.String(), Err: err})
		return err
	}
	s.emit(Event{Kind: EventCommandSent, TaskID: a.TaskID, Reason: cmd.Kind.String()})
	return nil
}

func (s *Supervisor) sendLocked(ctx context.Context, a Authorization, cmd robot.Command, before func() error) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := s.admit(a, cmd); err != nil {
		return err
	}
	if err := s.reserveTraffic(a, cmd); err != nil {
		return err
	}
	if before != nil {
		if err := before(); err != nil {
			if errors.Is(err, ErrAborted) || errors.Is(err, ErrMotionEnded) {
				// Not a failed record: the motion is ending (an abort, a
				// stop or the e-stop came first), and the error says so.
				return err
			}
			return toolerr.New(toolerr.Internal, "the transition could not be recorded, so the command was not sent").Wrap(err)
		}
	}
	// The lease may have lapsed, and the grant been revoked or run out,
	// while the transition was committed: ask both again right before the
	// command leaves. (A stop, an e-stop or a pause that arrived meanwhile
	// is seen once Send returns, and a stop follows the command; a grant
	// that ended must not let it leave at all: its revocation may already
	// have been answered.)
	if err := s.fenceErr(); err != nil {
		return err
	}
	if before != nil {
		if err := s.authorize(a); err != nil {
			return &refusedAfterStartError{err}
		}
	}
	if cmd.ID == "" {
		// Transports that may deliver twice drop duplicates by id, so
		// every command gets a unique one.
		s.cmdSeq++
		owner := a.TaskID
		if owner == "" {
			owner = "cmd"
		}
		if a.recovery {
			owner = RecoveryCommandPrefix + owner
		}
		cmd.ID = fmt.Sprintf("%s-%d", owner, s.cmdSeq)
	}
	err := s.drv.Send(ctx, cmd)
	// A stop, e-stop or shutdown requested while the command was on its
	// way may have reached the robot before it: follow it with a stop,
	// right now, so the stop is the last thing the robot received.
	if why := s.stoppedSinceAdmit(a); why != "" {
		start := s.clock.Now()
		serr := s.stopNow(ctx)
		s.emit(Event{Kind: EventStopSent, At: start, TaskID: a.TaskID, By: "supervisor", Reason: why + " while a command was being sent; stopped again after it", Latency: s.clock.Since(start), Err: serr})
	}
	if err != nil {
		return &sendError{err}
	}
	return nil
}

// refusedAfterStartError is the gate's refusal of a first command whose
// start (or a resume) was already recorded (its before hook ran): the
// grant ended while the transition was committed. Nothing was sent; the
// task, executing by its record, ends as a motion whose grant ends does
// (supervise, hold).
type refusedAfterStartError struct{ err error }

func (e *refusedAfterStartError) Error() string { return e.err.Error() }
func (e *refusedAfterStartError) Unwrap() error { return e.err }

// stoppedSinceAdmit says why the command of a that the gate just sent
// must be followed by a stop ("" when nothing asked for one): it was
// admitted, so whatever is set now was set while it was on its way.
func (s *Supervisor) stoppedSinceAdmit(a Authorization) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, held := s.holdReq[a.TaskID]
	switch _, stopped := s.stopRequestedLocked(a.TaskID); {
	case s.estop.Active:
		return "the e-stop latched"
	case stopped:
		return "a stop was requested"
	case held && a.TaskID != "" && !a.recovery && h.kind == holdPause:
		return "an operator paused the task"
	case held && a.TaskID != "" && !a.recovery && h.kind == holdAbort:
		return "an operator aborted the task"
	case s.closed:
		return "the bridge began shutting down"
	}
	return ""
}

// RecoveryCommandPrefix starts the id of every command of the
// supervisor's own pre-authorized recovery, so a command log tells them
// from commands sent on a task's grant.
const RecoveryCommandPrefix = "recover-"

// sendError is a failure of Driver.Send after the gate admitted the
// command: the robot may or may not have started moving.
type sendError struct{ err error }

func (e *sendError) Error() string { return "driver send: " + e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// Admit runs the gate's checks for cmd under a without sending anything:
// what Execute would refuse it with, or nil. Tests and the tool API's dry
// runs use it.
func (s *Supervisor) Admit(a Authorization, cmd robot.Command) error {
	a.recovery = false
	return s.admit(a, cmd)
}
