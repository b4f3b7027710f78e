package safety_test

// Invariant 13 (nothing moves while paused), checked on the simulator's
// own command log, odometer and ground truth: once an operator's pause is
// accepted no command of the task reaches the robot until it is resumed,
// the robot stays where it came to rest, a robot that moves anyway
// latches a fault, and a pause ends only by a resume (the same task goes
// on to its target), an abort or the pause limit (the failed-motion path),
// or whatever ends any live task (cancel, stop, e-stop).

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func withMaxPause(d time.Duration) rigOpt {
	return func(c *hwconfig.Config) { c.Safety.MaxPause = hwconfig.Duration(d) }
}

type taskAnswer struct {
	v   actions.TaskView
	err error
}

// answer lets robot time pass until call answers (it needs the robot to
// be seen at rest, or the motion loop to take it), at most 15 s.
func (r *rig) answer(what string, call func() (actions.TaskView, error)) (actions.TaskView, error) {
	r.t.Helper()
	ch := make(chan taskAnswer, 1)
	go func() { v, err := call(); ch <- taskAnswer{v, err} }()
	var got taskAnswer
	ok := r.stepUntil(15*time.Second, func() bool {
		select {
		case got = <-ch:
			return true
		default:
			return false
		}
	})
	require.True(r.t, ok, "%s never answered", what)
	return got.v, got.err
}

// pause pauses task id as operator-1. The pause is taken before robot
// time moves on: its stop has left (or it was refused at once) before the
// world is stepped, so a fault the test injected first meets the pause,
// not a motion loop that a loaded machine let run ahead of it.
func (r *rig) pause(id, reason string) (actions.TaskView, error) {
	r.t.Helper()
	stops := func() int {
		n := 0
		for _, e := range r.eventsOf(safety.EventStopSent) {
			if e.TaskID == id && strings.HasPrefix(e.Reason, "paused by ") {
				n++
			}
		}
		return n
	}
	before := stops()
	ch := make(chan taskAnswer, 1)
	go func() {
		v, err := r.run.Pause(context.Background(), id, "operator-1", reason)
		ch <- taskAnswer{v, err}
	}()
	var got taskAnswer
	answered := false
	waitUntil(r.t, func() bool {
		select {
		case got = <-ch:
			answered = true
			return true
		default:
			return stops() > before
		}
	}, "the pause neither sent its stop nor answered")
	if answered {
		return got.v, got.err
	}
	return r.answer("the pause", func() (actions.TaskView, error) {
		a := <-ch
		return a.v, a.err
	})
}

func (r *rig) resume(id string) (actions.TaskView, error) {
	return r.answer("the resume", func() (actions.TaskView, error) {
		return r.run.Resume(context.Background(), id, "operator-1")
	})
}

// moving starts a base motion to (x, 0) and lets it drive for a second.
func (r *rig) moving(x float64) actions.TaskView {
	r.t.Helper()
	v := r.mustSubmit("move_base_to", map[string]any{"x": x, "y": 0.0})
	r.approve(v)
	r.stepFor(time.Second)
	require.Equal(r.t, fsm.Executing, r.get(v.ID).Status)
	return v
}

// requireHeld checks invariant 13 over d of robot time: no command of the
// task reached the robot since at, and the robot did not move at all.
func (r *rig) requireHeld(id string, at logIndex, d time.Duration) {
	r.t.Helper()
	// The last of the braking, below the rest thresholds the pause was
	// confirmed on, dies out within a millimetre first.
	answered := r.sim.Truth().Base
	require.True(r.t, r.stepUntil(2*time.Second, func() bool {
		v := r.sim.Truth().Velocity
		return v.V == 0 && v.W == 0
	}), "the base never came to a full stop")
	tr := r.sim.Truth().Base
	require.Less(r.t, math.Hypot(tr.X-answered.X, tr.Y-answered.Y), 0.001, "the base rolled on after the pause answered")
	odo, pose := r.sim.Odometer(), r.sim.Truth().Base
	r.stepFor(d)
	require.Empty(r.t, r.commandsOfTaskSince(id, at), "a command of the paused task reached the robot")
	require.Equal(r.t, odo, r.sim.Odometer(), "the robot moved while paused")
	require.Equal(r.t, pose, r.sim.Truth().Base)
	require.Equal(r.t, fsm.Paused, r.get(id).Status)
}

func TestInvariant13_NothingMovesWhilePausedThenResumeSucceeds(t *testing.T) {
	invariant13NothingMovesWhilePausedThenResumeSucceeds(t, newRig)
}

func TestROS_Invariant13_NothingMovesWhilePausedThenResumeSucceeds(t *testing.T) {
	invariant13NothingMovesWhilePausedThenResumeSucceeds(t, newROSEnv(t).newRig)
}

func invariant13NothingMovesWhilePausedThenResumeSucceeds(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	// Given a base motion under way
	v := r.moving(3.0)
	before := r.logLen()

	// When an operator pauses it
	pv, err := r.pause(v.ID, "a person walked into the aisle")

	// Then it answers paused once the robot is at rest, saying why
	require.NoError(t, err)
	require.Equal(t, fsm.Paused, pv.Status)
	require.NotNil(t, pv.Paused)
	require.Equal(t, "operator-1", pv.Paused.By)
	require.Equal(t, "a person walked into the aisle", pv.Paused.Reason)
	require.Equal(t, 5*time.Minute, pv.Paused.EndsAt.Sub(pv.Paused.Since))
	require.Contains(t, pv.Text, "Paused by the operator: a person walked into the aisle.")
	require.True(t, r.atRest())
	require.NotEmpty(t, r.stopsAfter(time.Time{}), "the pause sent no stop")
	require.Empty(t, r.commandsOfTaskSince(v.ID, before), "the pause sent a motion command")

	// And nothing moves for far longer than the stall timeout and the
	// motion's deadline
	at := r.logLen()
	hold := 15 * time.Second
	if r.world.wire() {
		hold = 5 * time.Second // real time over ROS: still past the stall timeout
	}
	r.requireHeld(v.ID, at, hold)

	// And the gate refuses the task's commands, and a new call is busy
	// naming the paused task
	err = r.sup.Admit(safety.Authorization{TaskID: v.ID, Tool: "move_base_to", Args: v.Arguments},
		robot.Command{Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 3}}})
	require.ErrorIs(t, err, safety.ErrPaused)
	_, err = r.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.Error(t, err)
	te := toolerr.As(err)
	require.Equal(t, toolerr.RobotBusy, te.Type)
	require.Contains(t, te.Message, v.ID)
	require.Contains(t, te.Message, "paused")

	// When the operator resumes it
	rv, err := r.resume(v.ID)

	// Then the same task goes on and reaches its target
	require.NoError(t, err)
	require.Equal(t, fsm.Executing, rv.Status)
	require.Nil(t, rv.Paused)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Succeeded, v.Status, "%v", v.Error)
	tr := r.sim.Truth().Base
	require.InDelta(t, 3.0, tr.X, 0.06)
	require.InDelta(t, 0.0, tr.Y, 0.06)
	// And the pause and the resume were recorded with who did them, the
	// resume before its command was sent
	var evs []fsm.Event
	for _, rec := range r.rec.recorded(v.ID) {
		evs = append(evs, rec.Event)
		if rec.Event == fsm.EvPause {
			require.Equal(t, "operator-1", rec.By)
			require.Equal(t, "a person walked into the aisle", rec.Reason)
		}
		if rec.Event == fsm.EvResume {
			require.Equal(t, "operator-1", rec.By)
		}
	}
	require.Equal(t, []fsm.Event{"", fsm.EvNeedApproval, fsm.EvApprove, fsm.EvStart, fsm.EvPause, fsm.EvResume, fsm.EvSucceed}, evs, "the creation, then every transition")
	require.NoError(t, r.checkEveryCommandAuthorized())
}

func TestInvariant13_PauseThenAbortRecovers(t *testing.T) {
	invariant13PauseThenAbortRecovers(t, newRig)
}

func TestROS_Invariant13_PauseThenAbortRecovers(t *testing.T) {
	invariant13PauseThenAbortRecovers(t, newROSEnv(t).newRig)
}

func invariant13PauseThenAbortRecovers(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	armReady(r)
	v := r.moving(3.0)
	_, err := r.pause(v.ID, "check the load")
	require.NoError(t, err)
	at := r.logLen()

	// When the operator aborts the paused task
	av, err := r.answer("the abort", func() (actions.TaskView, error) {
		return r.run.Abort(context.Background(), v.ID, "operator-1", "load is loose")
	})

	// Then it leaves paused at once and ends recovered: the arm back in
	// its safe pose, no command of the task itself sent after the pause
	require.NoError(t, err)
	require.NotEqual(t, fsm.Paused, av.Status)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Recovered, v.Status, "%v", v.Error)
	require.Contains(t, v.Error.Message, "move_base_to was aborted by operator operator-1 (load is loose); robot stopped")
	for _, e := range r.commandsOfTaskSince(v.ID, at) {
		_, rec := taskOfCommand(e.ID)
		require.True(t, rec, "command %s of the aborted task is not the supervisor's recovery", e.ID)
	}
	require.NotEmpty(t, r.commandsOfTaskSince(v.ID, at), "no recovery motion")
	require.False(t, r.sup.Status().Fault.Latched)
}

func TestInvariant13_PauseLimitEndsThroughRecovery(t *testing.T) {
	invariant13PauseLimitEndsThroughRecovery(t, newRig)
}

func TestROS_Invariant13_PauseLimitEndsThroughRecovery(t *testing.T) {
	invariant13PauseLimitEndsThroughRecovery(t, newROSEnv(t).newRig)
}

func invariant13PauseLimitEndsThroughRecovery(t *testing.T, newRig newRigFunc) {
	r := newRig(t, withMaxPause(2*time.Second))
	armReady(r)
	v := r.moving(3.0)
	pv, err := r.pause(v.ID, "waiting for the lift")
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, pv.Paused.EndsAt.Sub(pv.Paused.Since))
	at := r.logLen()

	// When the pause outlasts safety.max_pause
	v = r.waitTerminal(v.ID, 20*time.Second)

	// Then the task ends through the recovery path, saying why
	require.Equal(t, fsm.Recovered, v.Status, "%v", v.Error)
	require.Contains(t, v.Error.Message, "move_base_to ended: it was paused for longer than 2.0 s; robot stopped; arm returned to")
	for _, e := range r.commandsOfTaskSince(v.ID, at) {
		_, rec := taskOfCommand(e.ID)
		require.True(t, rec, "command %s after the pause is not the supervisor's recovery", e.ID)
	}
}

func TestInvariant13_RobotMovedWhilePausedLatchesFault(t *testing.T) {
	r := newRig(t)
	w, ok := r.world.(*inprocWorld)
	require.True(t, ok)
	v := r.moving(3.0)
	_, err := r.pause(v.ID, "inspect")
	require.NoError(t, err)
	at := r.logLen()

	// When something other than the bridge drives the held robot
	require.NoError(t, w.s.Command(robot.Command{ID: "rogue-1", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 0.5, Y: 1.0}}}))

	// Then the supervisor stops it and latches a fault
	v = r.waitTerminal(v.ID, 10*time.Second)
	require.Equal(t, fsm.Fault, v.Status, "%v", v.Error)
	st := r.sup.Status()
	require.True(t, st.Fault.Latched)
	require.Contains(t, st.Fault.Reason, "the robot moved while it was paused")
	// And the operator reads it in words
	require.Equal(t, "The robot moved while move_base_to was paused and the robot was meant to be held still.", st.Fault.What)
	require.True(t, strings.HasPrefix(st.Fault.RobotDid, "The bridge commanded a stop at once"), st.Fault.RobotDid)
	require.Equal(t, "Find out who or what moved the robot, check that it is at rest and the area is clear, then clear the fault.", st.Fault.Check)
	require.Empty(t, r.commandsOfTaskSince(v.ID, at), "the bridge sent a command of the task after the pause")
	require.NotEmpty(t, r.stopsAfter(r.sim.CommandLog()[at].Time), "no stop after the robot moved")
}

func TestInvariant13_PauseWinsOverACommandInFlight(t *testing.T) {
	r := newRig(t)
	v := r.mustSubmit("move_base_to", map[string]any{"x": 2.5, "y": 0.0})
	release := make(chan struct{})
	held := make(chan error, 1)
	paused := make(chan taskAnswer, 1)
	var once sync.Once
	r.drv.setFailSend(func(robot.Command) error {
		once.Do(func() {
			// Given the first command in the driver's hands, When the
			// operator pauses the task now
			go func() {
				pv, err := r.run.Pause(context.Background(), v.ID, "operator-1", "hold on")
				paused <- taskAnswer{pv, err}
			}()
			// The command is held until the pause is recorded at the gate
			// and its stop has been sent (the pause itself answers only
			// once the robot is held, which needs the command released).
			var err error
			if !pollFor(10*time.Second, func() bool {
				if !errors.Is(r.sup.Admit(safety.Authorization{TaskID: v.ID, Tool: "move_base_to"}, robot.Command{Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{}}), safety.ErrPaused) {
					return false
				}
				for _, e := range r.eventsOf(safety.EventStopSent) {
					if strings.HasPrefix(e.Reason, "paused by operator-1") {
						return true
					}
				}
				return false
			}) {
				err = errTimeout
			}
			held <- err
			close(release)
		})
		<-release
		return nil
	})
	r.approve(v)
	require.NoError(t, receive(t, held, 15*time.Second, "the first command never reached the driver"))
	var got taskAnswer
	require.True(t, r.stepUntil(15*time.Second, func() bool {
		select {
		case got = <-paused:
			return true
		default:
			return false
		}
	}), "the pause never answered")
	require.NoError(t, got.err)
	require.Equal(t, fsm.Paused, got.v.Status)

	// Then the command in flight was followed by a stop, and nothing of
	// the task follows while paused
	var ops []string
	for _, e := range r.sim.CommandLog() {
		ops = append(ops, e.Op)
	}
	require.GreaterOrEqual(t, len(ops), 3, "%v", ops)
	require.Equal(t, []string{"stop", "command", "stop"}, ops[:3], "the pause's stop went out before the command, another right after it")
	r.requireStopAfterLastCommand(v.ID)
	r.requireHeld(v.ID, r.logLen(), 5*time.Second)
	require.Len(t, r.commandsOfTaskSince(v.ID, 0), 1)

	// And a resume takes it to its target
	_, err := r.resume(v.ID)
	require.NoError(t, err)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Succeeded, v.Status, "%v", v.Error)
}

func TestInvariant13_TwoResumesAtOnceMoveOnce(t *testing.T) {
	r := newRig(t)
	v := r.moving(3.0)
	_, err := r.pause(v.ID, "hold")
	require.NoError(t, err)
	at := r.logLen()

	// Given a resume being recorded (under the gate's lock, before its
	// command leaves), When a second resume arrives right then
	second := make(chan error, 1)
	r.rec.when(fsm.EvResume, func(actions.TransitionRecord) {
		res := make(chan error, 1)
		go func() { _, err := r.run.Resume(context.Background(), v.ID, "operator-2"); res <- err }()
		select {
		case err := <-res:
			second <- err
		case <-time.After(2 * time.Second):
			second <- errors.New("the second resume was not refused at once: it waits to be taken as well")
		}
	})
	_, err = r.resume(v.ID)
	require.NoError(t, err)

	// Then the second is refused, and the robot got exactly one command
	err = receive(t, second, 15*time.Second, "the second resume never ran")
	require.Error(t, err)
	require.Equal(t, toolerr.Conflict, toolerr.As(err).Type, "%v", err)
	require.Contains(t, toolerr.As(err).Message, "already being resumed")
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Succeeded, v.Status, "%v", v.Error)
	require.Len(t, r.commandsOfTaskSince(v.ID, at), 1, "one resume, one command")
}

func TestInvariant13_RefusedResumeLeavesItPaused(t *testing.T) {
	r := newRig(t)
	v := r.moving(3.0)
	_, err := r.pause(v.ID, "hold")
	require.NoError(t, err)
	at := r.logLen()

	// Given a store that refuses to record the resume
	r.rec.failOn(fsm.EvResume, errors.New("disk full"))
	// When the operator resumes
	rv, err := r.resume(v.ID)
	// Then nothing is sent and the task stays paused
	require.Error(t, err)
	require.Contains(t, toolerr.As(err).Message, "The task stays paused")
	require.Equal(t, fsm.Paused, rv.Status)
	r.requireHeld(v.ID, at, 2*time.Second)

	// When the store records again, Then the resume goes through
	r.rec.failOn(fsm.EvResume, nil)
	_, err = r.resume(v.ID)
	require.NoError(t, err)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Succeeded, v.Status, "%v", v.Error)
}

func TestInvariant13_WhatEndsALiveTaskEndsAPausedOne(t *testing.T) {
	invariant13WhatEndsALiveTaskEndsAPausedOne(t, newRig)
}

func TestROS_Invariant13_WhatEndsALiveTaskEndsAPausedOne(t *testing.T) {
	invariant13WhatEndsALiveTaskEndsAPausedOne(t, newROSEnv(t).newRig)
}

func invariant13WhatEndsALiveTaskEndsAPausedOne(t *testing.T, newRig newRigFunc) {
	tests := []struct {
		name string
		end  func(r *rig, v actions.TaskView)
		want fsm.State
	}{
		{"cancel_task", func(r *rig, v actions.TaskView) {
			_, err := r.answer("the cancel", func() (actions.TaskView, error) { return r.run.Cancel(context.Background(), v.ID, "agent-1") })
			require.NoError(r.t, err)
		}, fsm.Cancelled},
		{"stop tool", func(r *rig, _ actions.TaskView) {
			_, err := r.run.Stop(context.Background(), "agent-1", "the user said stop")
			require.NoError(r.t, err)
		}, fsm.Cancelled},
		{"e-stop", func(r *rig, _ actions.TaskView) {
			require.NoError(r.t, r.sup.EStop(context.Background(), "operator-2", "test"))
		}, fsm.EStopped},
		{"grant revoked", func(r *rig, v actions.TaskView) {
			a, err := r.appr.Get(v.ApprovalID)
			require.NoError(r.t, err)
			_, err = r.appr.Revoke(context.Background(), a.GrantID, "operator-2")
			require.NoError(r.t, err)
		}, fsm.Cancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			v := r.moving(3.0)
			_, err := r.pause(v.ID, "hold")
			require.NoError(t, err)
			at := r.logLen()
			// When it ends the paused task
			tc.end(r, v)
			// Then the task ends as any live task would, nothing moved,
			// and no fault latched
			v = r.waitTerminal(v.ID, 15*time.Second)
			require.Equal(t, tc.want, v.Status, "%v", v.Error)
			require.Empty(t, r.commandsOfTaskSince(v.ID, at))
			require.False(t, r.sup.Status().Fault.Latched, "%+v", r.sup.Status().Fault)
			require.Less(t, math.Abs(r.sim.Truth().Velocity.V), 1e-9)
		})
	}
}

func TestPause_RefusedWhenNotExecuting(t *testing.T) {
	r := newRig(t)
	// Given a task that already succeeded
	v := r.runTask("move_base_to", map[string]any{"x": 1.0, "y": 0.0})
	// When an operator pauses, resumes or aborts it
	for name, call := range map[string]func() (actions.TaskView, error){
		"pause":  func() (actions.TaskView, error) { return r.run.Pause(context.Background(), v.ID, "operator-1", "x") },
		"resume": func() (actions.TaskView, error) { return r.run.Resume(context.Background(), v.ID, "operator-1") },
		"abort":  func() (actions.TaskView, error) { return r.run.Abort(context.Background(), v.ID, "operator-1", "x") },
	} {
		got, err := call()
		// Then it is a CONFLICT naming the status, and nothing changed
		require.Error(t, err, name)
		te := toolerr.As(err)
		require.Equal(t, toolerr.Conflict, te.Type, name)
		require.Contains(t, te.Message, "it succeeded", name)
		require.Equal(t, fsm.Succeeded, got.Status, name)
	}
	// And an unknown task is NOT_FOUND
	_, err := r.run.Pause(context.Background(), "task-nope", "operator-1", "x")
	require.Equal(t, toolerr.NotFound, toolerr.As(err).Type)
}

func TestPause_WaitReturnsWhenPausedAndWhenResumed(t *testing.T) {
	r := newRig(t)
	v := r.moving(3.0)
	// Given an agent waiting a minute for the task
	waited := make(chan actions.TaskView, 1)
	go func() { w, _ := r.run.Wait(context.Background(), v.ID, time.Minute); waited <- w }()
	// When an operator pauses it (the pause takes far less than a minute
	// of robot time)
	_, err := r.pause(v.ID, "hold")
	require.NoError(t, err)
	// Then the wait returns at once, saying paused
	w := receive(t, waited, 10*time.Second, "the wait did not return when the task was paused")
	require.Equal(t, fsm.Paused, w.Status)
	require.Contains(t, w.Text, "Paused by the operator: hold.")

	// Given a wait that begins on the paused task, When time passes, Then
	// it keeps waiting (no spinning on a held task)
	go func() { w, _ := r.run.Wait(context.Background(), v.ID, time.Minute); waited <- w }()
	r.stepFor(2 * time.Second)
	require.Empty(t, waited)
	// When the operator resumes, Then it returns, executing
	_, err = r.resume(v.ID)
	require.NoError(t, err)
	w = receive(t, waited, 10*time.Second, "the wait did not return when the task was resumed")
	require.Equal(t, fsm.Executing, w.Status)
	r.waitTerminal(v.ID, 30*time.Second)
}

func TestPause_RacingTheNaturalSuccessAnswersItSucceeded(t *testing.T) {
	r := newRig(t)
	v := r.mustSubmit("move_base_to", map[string]any{"x": 1.0, "y": 0.0})
	id := v.ID
	answered := make(chan taskAnswer, 1)
	// Given the success being recorded, When an operator pauses right then
	r.rec.when(fsm.EvSucceed, func(actions.TransitionRecord) {
		go func() {
			pv, err := r.run.Pause(context.Background(), id, "operator-1", "too late")
			answered <- taskAnswer{pv, err}
		}()
	})
	r.approve(v)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Succeeded, v.Status)
	// Then the pause is a conflict saying it already succeeded
	got := receive(t, answered, 10*time.Second, "the pause never answered")
	require.Error(t, got.err)
	require.Equal(t, toolerr.Conflict, toolerr.As(got.err).Type)
	require.Contains(t, toolerr.As(got.err).Message, "it succeeded")
	require.Equal(t, fsm.Succeeded, got.v.Status)
}

func TestPause_AStopAtTheSameMomentWins(t *testing.T) {
	r := newRig(t)
	v := r.moving(3.0)
	at := r.logLen()
	// When a pause and a stop arrive together
	id := v.ID
	go func() { _, _ = r.run.Pause(context.Background(), id, "operator-1", "hold") }()
	_, err := r.run.Stop(context.Background(), "agent-1", "the user said stop")
	require.NoError(t, err)
	// Then the task ends cancelled, never paused and forgotten, and no
	// command of it follows
	v = r.waitTerminal(v.ID, 15*time.Second)
	require.Equal(t, fsm.Cancelled, v.Status, "%v", v.Error)
	require.Empty(t, r.commandsOfTaskSince(v.ID, at))
	require.Nil(t, r.sup.Status().Active)
	require.False(t, r.sup.Status().Fault.Latched)
}

func TestPause_ARevokeRightAfterTheResumeStopsTheMotion(t *testing.T) {
	r := newRig(t)
	v := r.moving(3.0)
	_, err := r.pause(v.ID, "hold")
	require.NoError(t, err)
	_, err = r.resume(v.ID)
	require.NoError(t, err)
	// When the grant is revoked right after the resume
	a, err := r.appr.Get(v.ApprovalID)
	require.NoError(t, err)
	_, err = r.appr.Revoke(context.Background(), a.GrantID, "operator-2")
	require.NoError(t, err)
	at := r.logLen()
	// Then the motion stops, as any revoke stops it
	v = r.waitTerminal(v.ID, 15*time.Second)
	require.Equal(t, fsm.Cancelled, v.Status)
	require.Equal(t, toolerr.ApprovalDenied, v.Error.Type, "%v", v.Error)
	require.Empty(t, r.commandsOfTaskSince(v.ID, at))
	require.True(t, r.atRest())
}

func TestPause_UnconfirmedStopLatchesAFaultAndSaysSo(t *testing.T) {
	r := newRig(t)
	v := r.moving(3.0)
	// Given a robot whose state stops arriving, When an operator pauses
	r.inject(sim.Fault{Kind: sim.FaultDropState})
	pv, err := r.pause(v.ID, "hold")
	// Then the pause is not confirmed: the answer says so, a fault is
	// latched, and the task ends in it — never paused
	require.Error(t, err)
	te := toolerr.As(err)
	require.Equal(t, toolerr.SafetyViolation, te.Type)
	require.Contains(t, te.Message, "operator-1 paused the motion, but the robot was not confirmed stopped within")
	require.ErrorIs(t, err, safety.ErrPauseUnconfirmed)
	require.Equal(t, fsm.Fault, pv.Status)
	st := r.sup.Status().Fault
	require.True(t, st.Latched)
	require.Equal(t, "An operator paused move_base_to, but the robot did not confirm it had come to rest.", st.What)
	require.True(t, strings.HasPrefix(st.RobotDid, "The bridge commanded a stop; the robot did not confirm it was at rest within"), st.RobotDid)
}

func TestAbort_ExecutingTaskTakesTheFailedMotionPath(t *testing.T) {
	r := newRig(t)
	armReady(r)
	v := r.moving(3.0)
	at := r.logLen()
	// When an operator aborts the task while it drives
	av, err := r.answer("the abort", func() (actions.TaskView, error) {
		return r.run.Abort(context.Background(), v.ID, "operator-1", "wrong room")
	})
	// Then it leaves executing at once and ends recovered, with only the
	// supervisor's recovery sent after the abort
	require.NoError(t, err)
	require.NotEqual(t, fsm.Executing, av.Status)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, fsm.Recovered, v.Status, "%v", v.Error)
	require.Contains(t, v.Error.Message, "move_base_to was aborted by operator operator-1 (wrong room); robot stopped")
	cmds := r.commandsOfTaskSince(v.ID, at)
	require.NotEmpty(t, cmds, "no recovery motion")
	for _, e := range cmds {
		_, rec := taskOfCommand(e.ID)
		require.True(t, rec, "command %s after the abort is not the supervisor's recovery", e.ID)
	}
	// And a second abort is a conflict naming the status
	_, err = r.run.Abort(context.Background(), v.ID, "operator-1", "again")
	require.Equal(t, toolerr.Conflict, toolerr.As(err).Type)
}

// Regression (found by the conformance suite's timing races, e.g.
// timing_races/resume-racing-agent-stop and -estop): a resume that came
// after, or raced, an operator's abort, the agent's stop or an e-stop of
// a paused task was answered INTERNAL "the task stays paused: internal
// error", "stays paused: the e-stop is latched" or "already being
// resumed", while the task was ending through what came first. It is a
// conflict saying the task is ending, the task ends as that end says,
// and no command of the task but its recovery follows a refused resume.
func TestResume_AfterOrRacingWhatEndsThePausedTaskIsAConflict(t *testing.T) {
	ends := []struct {
		name string
		end  func(r *rig, id string)
		want fsm.State
	}{
		{"abort", func(r *rig, id string) {
			_, err := r.answer("the abort", func() (actions.TaskView, error) {
				return r.run.Abort(context.Background(), id, "operator-1", "wrong room")
			})
			require.NoError(r.t, err)
		}, fsm.Recovered},
		{"stop", func(r *rig, _ string) {
			_, err := r.run.Stop(context.Background(), "agent-1", "the user said stop")
			require.NoError(r.t, err)
		}, fsm.Cancelled},
		{"estop", func(r *rig, _ string) {
			require.NoError(r.t, r.sup.EStop(context.Background(), "agent-1", "the agent presses"))
		}, fsm.EStopped},
	}
	for _, tc := range ends {
		for _, race := range []bool{false, true} {
			t.Run(tc.name+"/"+map[bool]string{false: "after", true: "racing"}[race], func(t *testing.T) {
				r := newRig(t)
				v := r.moving(3.0)
				_, err := r.pause(v.ID, "hold")
				require.NoError(t, err)
				at := r.logLen()
				id := v.ID
				resumed := make(chan taskAnswer, 1)
				resume := func() {
					rv, err := r.run.Resume(context.Background(), id, "operator-2")
					resumed <- taskAnswer{rv, err}
				}
				if race {
					go resume()
				}
				tc.end(r, id)
				if !race {
					go resume()
				}
				v = r.waitTerminal(id, 30*time.Second)
				got := receive(t, resumed, 10*time.Second, "the resume never answered")
				if got.err == nil {
					// The resume came first: what ended the task then
					// ended the resumed motion.
					require.True(t, race, "a resume after the %s was taken", tc.name)
				} else {
					te := toolerr.As(got.err)
					require.Equal(t, toolerr.Conflict, te.Type, "%v", te)
					require.NotContains(t, te.Message, "stays paused")
					require.NotContains(t, te.Message, "already being resumed")
					require.NotContains(t, te.Message, "internal error")
				}
				require.Equal(t, tc.want, v.Status, "%v", v.Error)
				for _, e := range r.commandsOfTaskSince(id, at) {
					_, rec := taskOfCommand(e.ID)
					if !rec {
						require.NoError(t, got.err, "command %s of the task after a refused resume", e.ID)
					}
				}
			})
		}
	}
}
