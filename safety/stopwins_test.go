package safety_test

// Invariants 10 (a stop wins at every moment) and 11 (authority ends at
// once), checked on the simulator's own command log: once a stop, cancel,
// e-stop or the end of a grant has been requested, no command of that
// task reaches the robot — not the next step, not a recovery motion — and
// a requested stop ends the task cancelled, never with a latched fault.
// Each scenario runs in process (TestInvariant10_..., TestInvariant11_...)
// and over ROS (TestROS_Invariant10_..., TestROS_Invariant11_...).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// logIndex is a position in the simulator's command log.
type logIndex int

func (r *rig) logLen() logIndex { return logIndex(len(r.sim.CommandLog())) }

// commandsOfTaskSince returns the commands of task (its own and the
// supervisor's recovery for it) the simulator received at or after i.
func (r *rig) commandsOfTaskSince(task string, i logIndex) []sim.LogEntry {
	var out []sim.LogEntry
	for _, e := range r.sim.CommandLog()[i:] {
		if e.Op != "command" {
			continue
		}
		if tk, _ := taskOfCommand(e.ID); tk == task {
			out = append(out, e)
		}
	}
	return out
}

// requireStopAfterLastCommand checks that every command of task that
// reached the simulator was followed by a stop.
func (r *rig) requireStopAfterLastCommand(task string) {
	r.t.Helper()
	log := r.sim.CommandLog()
	last := -1
	for i, e := range log {
		if tk, _ := taskOfCommand(e.ID); e.Op == "command" && tk == task {
			last = i
		}
	}
	if last < 0 {
		return
	}
	for _, e := range log[last+1:] {
		if e.Op == "stop" {
			return
		}
	}
	r.t.Fatalf("command %s of task %s was the last thing the robot received: no stop after it", log[last].ID, task)
}

// stopPoint is where a stop request stands: the length of the robot's
// command log and the rig's mark (rig.mark) once the request has been
// made.
type stopPoint struct {
	at   logIndex
	mark uint64
}

// stopped returns the stop point now; call it once the stop call returned.
func (r *rig) stopped() stopPoint { return stopPoint{at: r.logLen(), mark: r.mark()} }

// requireStopWon is invariant 10 after a stop was requested at p: nothing
// of the task reached the robot since (see lateCommandsOf for a command
// still on the wire), it ends as want with the robot at rest, and no
// fault latched.
func (r *rig) requireStopWon(v actions.TaskView, p stopPoint, want fsm.State) actions.TaskView {
	r.t.Helper()
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Empty(r.t, r.lateCommandsOf(v.ID, p.at, p.mark), "a command of task %s reached the robot after its stop was requested", v.ID)
	r.requireStopAfterLastCommand(v.ID)
	require.Equal(r.t, want, v.Status, "%v", v.Error)
	require.False(r.t, r.sup.Status().Fault.Latched, "a requested stop latched a fault: %s", r.sup.Status().Fault.Reason)
	require.True(r.t, r.stepUntil(3*time.Second, r.atRest), "the robot is still moving")
	return v
}

// armReady puts the arm out of its safe pose, so that a failed base motion
// would be followed by a recovery arm motion.
func armReady(r *rig) {
	r.t.Helper()
	r.runTask("move_arm_to", map[string]any{"pose": "ready"})
}

// stopKinds are the ways of requesting a stop that must all win.
var stopKinds = []struct {
	name string
	stop func(r *rig, v actions.TaskView)
	want fsm.State
}{
	{"stop tool", func(r *rig, _ actions.TaskView) {
		_, err := r.run.Stop(context.Background(), "agent-1", "the user said stop")
		require.NoError(r.t, err)
	}, fsm.Cancelled},
	{"cancel_task", func(r *rig, v actions.TaskView) {
		// Cancel waits for the task to end; the robot's time only moves
		// when the test steps it, so it runs aside.
		go func() { _, _ = r.run.Cancel(context.Background(), v.ID, "agent-1") }()
		waitUntil(r.t, func() bool { _, ok := r.sup.StopRequested(v.ID); return ok || r.get(v.ID).Terminal() }, "cancel not recorded")
	}, fsm.Cancelled},
	{"operator's stop button", func(r *rig, _ actions.TaskView) {
		// The console's stop button is the stop tool on the operator's
		// credential.
		_, err := r.run.Stop(context.Background(), "operator-1", "console stop button")
		require.NoError(r.t, err)
	}, fsm.Cancelled},
	{"e-stop", func(r *rig, _ actions.TaskView) {
		require.NoError(r.t, r.sup.EStop(context.Background(), "operator-1", "someone walked in"))
	}, fsm.EStopped},
}

func TestInvariant10_StopWinsAtEveryMoment(t *testing.T) {
	invariant10StopWinsAtEveryMoment(t, newRig)
}

func TestROS_Invariant10_StopWinsAtEveryMoment(t *testing.T) {
	invariant10StopWinsAtEveryMoment(t, newROSEnv(t).newRig)
}

func invariant10StopWinsAtEveryMoment(t *testing.T, newRig newRigFunc) {
	type moment struct {
		name string
		// timeout, when set, is move_base_to's action timeout, so a base
		// motion fails part-way and reaches stopping and recovering.
		timeout time.Duration
		// reach brings a fresh task to the moment and returns it.
		reach func(r *rig) actions.TaskView
	}
	moments := []moment{
		{"awaiting approval", 0, func(r *rig) actions.TaskView {
			return r.mustSubmit("move_base_to", map[string]any{"x": 2.0, "y": 0.0})
		}},
		{"while the base drives", 0, func(r *rig) actions.TaskView {
			v := r.mustSubmit("move_base_to", map[string]any{"x": 3.0, "y": 0.0})
			r.approve(v)
			r.stepFor(time.Second)
			require.Equal(r.t, fsm.Executing, r.get(v.ID).Status)
			return v
		}},
		{"between the steps of a grasp", 0, func(r *rig) actions.TaskView {
			r.runTask("move_base_to", map[string]any{"location": "table"})
			v := r.mustSubmit("grasp", map[string]any{"object_id": "red_cup"})
			r.approve(v)
			first := r.logLen() - 1
			// Stop as soon as the first step is done and the second sent.
			require.True(r.t, r.stepUntil(20*time.Second, func() bool {
				return len(r.commandsOfTaskSince(v.ID, first)) >= 2
			}), "the grasp never reached its second step")
			return v
		}},
		{"stopping after a timeout, before recovery", 1500 * time.Millisecond, func(r *rig) actions.TaskView {
			armReady(r)
			v := r.mustSubmit("move_base_to", map[string]any{"x": 3.5, "y": 0.0})
			r.approve(v)
			require.True(r.t, r.stepUntil(10*time.Second, func() bool { return r.get(v.ID).Status == fsm.Stopping }), "never stopping")
			return v
		}},
		{"recovering to the safe pose", 1500 * time.Millisecond, func(r *rig) actions.TaskView {
			armReady(r)
			v := r.mustSubmit("move_base_to", map[string]any{"x": 3.5, "y": 0.0})
			r.approve(v)
			require.True(r.t, r.stepUntil(15*time.Second, func() bool {
				return len(r.commandsOfTaskSince(v.ID, 0)) > 1 && r.get(v.ID).Status == fsm.Recovering
			}), "recovery never started")
			r.stepFor(200 * time.Millisecond) // the arm is on its way to the safe pose
			return v
		}},
	}
	for _, m := range moments {
		for _, k := range stopKinds {
			t.Run(m.name+"/"+k.name, func(t *testing.T) {
				// Given a task at the moment
				var opts []rigOpt
				if m.timeout > 0 {
					opts = append(opts, withActionTimeout("move_base_to", m.timeout))
				}
				r := newRig(t, opts...)
				v := m.reach(r)
				// When the stop is requested
				k.stop(r, v)
				p := r.stopped()
				// Then nothing of the task reaches the robot any more, and
				// the task ends as the stop says, never with a fault
				v = r.requireStopWon(v, p, k.want)
				if k.want == fsm.Cancelled && v.Error != nil {
					require.NotContains(t, v.Error.Message, "fault is latched")
				}
			})
		}
	}
}

// TestInvariant10_StopRacingTheApprovalNeverMoves is the race the issue
// reproduced (a stop 1–2 ms after the operator's approval answered,
// then the whole motion ran): the stop lands while the approval is being
// recorded, before the motion registered with the supervisor. The task
// must end cancelled with nothing sent, and say so truthfully.
func TestInvariant10_StopRacingTheApprovalNeverMoves(t *testing.T) {
	invariant10StopRacingTheApprovalNeverMoves(t, newRig)
}

func TestROS_Invariant10_StopRacingTheApprovalNeverMoves(t *testing.T) {
	invariant10StopRacingTheApprovalNeverMoves(t, newROSEnv(t).newRig)
}

func invariant10StopRacingTheApprovalNeverMoves(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	v := r.mustSubmit("move_arm_to", map[string]any{"pose": "reach_table"})
	stopped := make(chan error, 1)
	hooked := make(chan error, 1)
	r.rec.when(fsm.EvApprove, func(actions.TransitionRecord) {
		// Given the approval being recorded, When a stop arrives now
		go func() {
			_, err := r.run.Stop(context.Background(), "agent-1", "changed my mind")
			stopped <- err
		}()
		// (This runs on the approval's goroutine: it reports back, the
		// test goroutine fails.)
		var err error
		if !pollFor(10*time.Second, func() bool { _, ok := r.sup.StopRequested(v.ID); return ok }) {
			err = fmt.Errorf("the stop was not recorded while the approval was: %w", errTimeout)
		}
		select {
		case hooked <- err:
		default:
		}
	})
	_, err := r.appr.Approve(context.Background(), v.ApprovalID, "operator-1", approval.ApproveOptions{})
	require.NoError(t, err)
	require.NoError(t, receive(t, hooked, 15*time.Second, "the approval was never recorded"))
	require.NoError(t, receive(t, stopped, 15*time.Second, "the stop racing the approval never returned"))
	// Then nothing was ever sent and the task says so
	v = r.requireStopWon(v, stopPoint{}, fsm.Cancelled)
	r.requireNothingMoved()
	require.Contains(t, v.Error.Message, "nothing moved")
}

// TestInvariant10_StopDuringTheFirstSendIsSentAgainAfterIt: the stop
// arrives while the first command is being handed to the driver. The stop
// goes out at once, without waiting for the command; the command lands
// after it, so the gate follows it with another stop, and nothing else of
// the task is sent.
func TestInvariant10_StopDuringTheFirstSendIsSentAgainAfterIt(t *testing.T) {
	invariant10StopDuringTheFirstSendIsSentAgainAfterIt(t, newRig)
}

func TestROS_Invariant10_StopDuringTheFirstSendIsSentAgainAfterIt(t *testing.T) {
	invariant10StopDuringTheFirstSendIsSentAgainAfterIt(t, newROSEnv(t).newRig)
}

func invariant10StopDuringTheFirstSendIsSentAgainAfterIt(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	v := r.mustSubmit("move_base_to", map[string]any{"x": 2.5, "y": 0.0})
	release := make(chan struct{})
	stopped := make(chan error, 1)
	var once sync.Once
	r.drv.setFailSend(func(cmd robot.Command) error {
		once.Do(func() {
			// Given the first command in the driver's hands, When a stop
			// for its task arrives now
			res := make(chan error, 1)
			go func() { res <- r.sup.StopTask(context.Background(), v.ID, "operator-1", "stop now") }()
			// The command is held until the stop has returned (or 10 s
			// have passed: a stop that waits for the command fails the
			// test below instead of hanging it).
			select {
			case err := <-res:
				stopped <- err
			case <-time.After(10 * time.Second):
				stopped <- fmt.Errorf("the stop waited for the command in flight: %w", errTimeout)
			}
			close(release)
		})
		<-release
		return nil
	})
	r.approve(v)
	// Then the stop does not wait for the command in flight
	require.NoError(t, receive(t, stopped, 15*time.Second, "the first command never reached the driver"))
	waitUntil(t, func() bool { return len(r.commandsOfTaskSince(v.ID, 0)) == 1 }, "the command never landed")
	// And the gate follows the command with another stop
	waitUntil(t, func() bool { l := r.sim.CommandLog(); return l[len(l)-1].Op == "stop" }, "no stop after the command that was in flight")
	// Where the bridge sent them: a stop, the command, another stop.
	cmd := r.commandsOfTaskSince(v.ID, 0)[0]
	s, ok := r.sendOf(cmd.ID)
	require.True(t, ok)
	marks := r.drv.stopMarks()
	require.NotEmpty(t, marks)
	require.Less(t, marks[0], s.Seq, "the first stop went out before the command")
	require.Greater(t, marks[len(marks)-1], s.Seq, "another stop went out after it")
	// And what the robot got.
	if r.world.wire() {
		// Over ROS the stop (a zero Twist and goal cancels) and the goal
		// travel on different TCPROS connections, which keep order per
		// topic, not across topics: the robot may get the first stop
		// before or after the goal, but a stop after it.
		log := r.sim.CommandLog()
		i := slices.IndexFunc(log, func(e sim.LogEntry) bool { return e.Op == "command" })
		require.True(t, stopFollows(log, i), "no stop reached the robot after the command")
	} else {
		var ops []string
		for _, e := range r.sim.CommandLog() {
			ops = append(ops, e.Op)
		}
		require.GreaterOrEqual(t, len(ops), 3, "%v", ops)
		require.Equal(t, []string{"stop", "command", "stop"}, ops[:3], "the first stop went out before the command, another right after it")
	}
	r.requireStopWon(v, r.stopped(), fsm.Cancelled)
	require.Len(t, r.commandsOfTaskSince(v.ID, 0), 1)
}

// TestInvariant10_CancelWhileStoppingIsHonoured: cancel_task on a task
// that is stopping after a failure is not refused; it ends the task
// cancelled with no recovery motion.
func TestInvariant10_CancelWhileStoppingIsHonoured(t *testing.T) {
	invariant10CancelWhileStoppingIsHonoured(t, newRig)
}

func TestROS_Invariant10_CancelWhileStoppingIsHonoured(t *testing.T) {
	invariant10CancelWhileStoppingIsHonoured(t, newROSEnv(t).newRig)
}

func invariant10CancelWhileStoppingIsHonoured(t *testing.T, newRig newRigFunc) {
	r := newRig(t, withActionTimeout("move_base_to", 1500*time.Millisecond))
	armReady(r)
	v := r.mustSubmit("move_base_to", map[string]any{"x": 3.5, "y": 0.0})
	r.approve(v)
	require.True(t, r.stepUntil(10*time.Second, func() bool { return r.get(v.ID).Status == fsm.Stopping }))
	done := make(chan actions.TaskView, 1)
	go func() { got, _ := r.run.Cancel(context.Background(), v.ID, "agent-1"); done <- got }()
	waitUntil(t, func() bool { _, ok := r.sup.StopRequested(v.ID); return ok }, "cancel refused")
	v = r.requireStopWon(v, r.stopped(), fsm.Cancelled)
	got := receive(t, done, 10*time.Second, "cancel_task did not return once the task had ended")
	require.Equal(t, fsm.Cancelled, got.Status)
	for _, e := range r.sim.CommandLog() {
		require.False(t, strings.HasPrefix(e.ID, safety.RecoveryCommandPrefix), "recovery command %s sent after the cancel", e.ID)
	}
}

// TestInvariant11_ARevokeWhileTheStartIsRecordedSendsNothing: found by the
// conformance suite (timing_races/revoke-racing-covered-call, seed 1):
// the gate admitted a grant-covered task's first command, the operator
// revoked the grant while the start was being committed, and the command
// left after the revocation had been answered (a stop followed it). The
// gate asks the grant again once the start is on the disk, right before
// the command leaves: nothing of the task is sent.
func TestInvariant11_ARevokeWhileTheStartIsRecordedSendsNothing(t *testing.T) {
	invariant11ARevokeWhileTheStartIsRecordedSendsNothing(t, newRig)
}

func TestROS_Invariant11_ARevokeWhileTheStartIsRecordedSendsNothing(t *testing.T) {
	invariant11ARevokeWhileTheStartIsRecordedSendsNothing(t, newROSEnv(t).newRig)
}

func invariant11ARevokeWhileTheStartIsRecordedSendsNothing(t *testing.T, newRig newRigFunc) {
	ctx := context.Background()
	r := newRig(t)
	g, err := r.appr.CreateGrant(ctx, "operator-1", approval.Scope{
		Tool: "move_base_to", Rect: &approval.Rect{MinX: -1, MinY: -1, MaxX: 4, MaxY: 1},
	}, time.Minute)
	require.NoError(t, err)
	revoked := make(chan error, 1)
	r.rec.when(fsm.EvStart, func(actions.TransitionRecord) {
		// Given the gate admitted the first command and its start is
		// being recorded, When the operator revokes the grant now (and
		// is answered)
		_, err := r.appr.RevokeWith(ctx, g.ID, "operator-2", approval.RevokeOptions{Reason: "someone walked in"})
		revoked <- err
	})
	at := r.logLen()
	v := r.mustSubmit("move_base_to", map[string]any{"x": 3.0, "y": 0.0})
	require.NoError(t, receive(t, revoked, 15*time.Second, "the start was never recorded"))
	v = r.waitTerminal(v.ID, 20*time.Second)

	// Then no command of the task reached the robot, and the agent is
	// told the operator withdrew the permission
	require.Empty(t, r.commandsOfTaskSince(v.ID, at), "a command left after the revocation was answered")
	require.NotNil(t, v.Error, "%s", v.Status)
	require.Equal(t, toolerr.ApprovalDenied, v.Error.Type, v.Error.Message)
	require.Contains(t, v.Error.Message, "operator operator-2 revoked the grant (someone walked in)")
	require.Contains(t, v.Error.Message, "before it moved")
	require.False(t, r.sup.Status().Fault.Latched, "a fault latched for a revocation")
	r.requireNothingMoved()
}

// TestInvariant11_ARevokeWhileTheResumeIsRecordedSendsNothing is the
// start's race for the command that resumes a paused task: the operator
// revokes the task's grant, and is answered, while the resume is being
// committed. The gate asks the grant again once the resume is on the
// disk: the resume is refused, nothing of the task is sent, and the task
// ends as a motion whose grant ends.
func TestInvariant11_ARevokeWhileTheResumeIsRecordedSendsNothing(t *testing.T) {
	invariant11ARevokeWhileTheResumeIsRecordedSendsNothing(t, newRig)
}

func TestROS_Invariant11_ARevokeWhileTheResumeIsRecordedSendsNothing(t *testing.T) {
	invariant11ARevokeWhileTheResumeIsRecordedSendsNothing(t, newROSEnv(t).newRig)
}

func invariant11ARevokeWhileTheResumeIsRecordedSendsNothing(t *testing.T, newRig newRigFunc) {
	// With the revocation's push the supervisor hears of it at once;
	// without it (the push is late, as from another bridge of a cluster)
	// only the gate's own question of the grant stands between the
	// answered revocation and the command.
	for _, push := range []bool{true, false} {
		t.Run(map[bool]string{true: "push", false: "no push"}[push], func(t *testing.T) {
			ctx := context.Background()
			r := newRig(t)
			r.noGrantPush.Store(!push)
			v := r.moving(3.0)
			_, err := r.pause(v.ID, "hold")
			require.NoError(t, err)
			a, err := r.appr.Get(v.ApprovalID)
			require.NoError(t, err)
			revoked := make(chan error, 1)
			r.rec.when(fsm.EvResume, func(actions.TransitionRecord) {
				// Given the gate admitted the resume's command and the
				// resume is being recorded, When the operator revokes the
				// grant now (and is answered)
				_, err := r.appr.RevokeWith(ctx, a.GrantID, "operator-2", approval.RevokeOptions{Reason: "someone walked in"})
				revoked <- err
			})
			at := r.logLen()
			_, rerr := r.resume(v.ID)
			require.NoError(t, receive(t, revoked, 15*time.Second, "the resume was never recorded"))
			v = r.waitTerminal(v.ID, 20*time.Second)

			// Then the resume is refused, saying why, no command of the
			// task reached the robot, and the task ends as a motion whose
			// grant ended
			require.Error(t, rerr, "the resume was answered as taken after its grant was revoked")
			te := toolerr.As(rerr)
			require.Equal(t, toolerr.Conflict, te.Type, "%v", te)
			require.Contains(t, te.Message, "was not resumed: it was cancelled first.")
			require.Contains(t, te.Message, "operator operator-2 revoked the grant (someone walked in)")
			require.Empty(t, r.commandsOfTaskSince(v.ID, at), "a command left after the revocation was answered")
			require.Equal(t, fsm.Cancelled, v.Status, "%v", v.Error)
			require.NotNil(t, v.Error)
			require.Equal(t, toolerr.ApprovalDenied, v.Error.Type, v.Error.Message)
			require.Contains(t, v.Error.Message, "operator operator-2 revoked the grant (someone walked in)")
			require.False(t, r.sup.Status().Fault.Latched, "a fault latched for a revocation")
			require.Nil(t, r.sup.Status().Active)
			require.True(t, r.atRest())
		})
	}
}

func TestInvariant11_AuthorityEndsAtOnce(t *testing.T) {
	invariant11AuthorityEndsAtOnce(t, newRig)
}

func TestROS_Invariant11_AuthorityEndsAtOnce(t *testing.T) {
	invariant11AuthorityEndsAtOnce(t, newROSEnv(t).newRig)
}

func invariant11AuthorityEndsAtOnce(t *testing.T, newRig newRigFunc) {
	ctx := context.Background()
	scoped := func(r *rig, ttl time.Duration) approval.Grant {
		g, err := r.appr.CreateGrant(ctx, "operator-1", approval.Scope{
			Tool: "move_base_to", Rect: &approval.Rect{MinX: -1, MinY: -1, MaxX: 4, MaxY: 1},
		}, ttl)
		require.NoError(r.t, err)
		return g
	}
	tests := []struct {
		name string
		// start returns the running task and the grant it runs on.
		start func(r *rig) (actions.TaskView, string)
		// end makes the grant stop authorizing; it returns when, on the
		// robot's clock.
		end      func(r *rig, grantID string) time.Time
		wantType toolerr.Type
		wantText string
	}{
		{
			name: "scoped grant revoked",
			start: func(r *rig) (actions.TaskView, string) {
				g := scoped(r, time.Minute)
				v := r.mustSubmit("move_base_to", map[string]any{"x": 3.0, "y": 0.0})
				return v, g.ID
			},
			end: func(r *rig, id string) time.Time {
				at := r.sim.Now()
				_, err := r.appr.RevokeWith(ctx, id, "operator-2", approval.RevokeOptions{Reason: "forklift in the aisle"})
				require.NoError(r.t, err)
				return at
			},
			// (the same words whether the revocation's push or the
			// motion's own re-check stopped it)
			wantType: toolerr.ApprovalDenied, wantText: "because operator operator-2 revoked the grant (forklift in the aisle); robot stopped",
		},
		{
			name: "approve-once grant revoked",
			start: func(r *rig) (actions.TaskView, string) {
				v := r.mustSubmit("move_base_to", map[string]any{"x": 3.0, "y": 0.0})
				r.approve(v)
				a, err := r.appr.Get(v.ApprovalID)
				require.NoError(r.t, err)
				return v, a.GrantID
			},
			end: func(r *rig, id string) time.Time {
				at := r.sim.Now()
				_, err := r.appr.Revoke(ctx, id, "operator-2")
				require.NoError(r.t, err)
				return at
			},
			wantType: toolerr.ApprovalDenied, wantText: "because operator operator-2 revoked the grant; robot stopped",
		},
		{
			name: "scoped grant expires mid-motion",
			start: func(r *rig) (actions.TaskView, string) {
				g := scoped(r, 2*time.Second)
				v := r.mustSubmit("move_base_to", map[string]any{"x": 3.5, "y": 0.0})
				return v, g.ID
			},
			end: func(r *rig, id string) time.Time {
				g, err := r.appr.Grant(id)
				require.NoError(r.t, err)
				require.True(r.t, r.stepUntil(5*time.Second, func() bool { return !r.clock.Now().Before(g.ExpiresAt) }))
				return r.world.robotTime(g.ExpiresAt)
			},
			wantType: toolerr.ApprovalExpired, wantText: "expired",
		},
	}
	for _, tc := range tests {
		for _, push := range []bool{true, false} {
			name := tc.name
			if !push {
				name += " (no push: the motion re-checks its grant)"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t)
				r.noGrantPush.Store(!push)
				// Given a motion running on a grant
				v, grantID := tc.start(r)
				// (the motion starts without the clock moving; stepping before
				// it has would eat into the grant's time)
				waitUntil(t, func() bool { return r.get(v.ID).Status == fsm.Executing }, "the task did not start")
				r.stepFor(500 * time.Millisecond)
				// (over ROS the goal reaches the robot a transport latency
				// after the task started executing)
				r.stepUntil(r.world.budget(), func() bool { return r.sim.Odometer().BaseDistance > 0.05 })
				require.Greater(t, r.sim.Odometer().BaseDistance, 0.05, "the base is driving")
				// When the grant stops authorizing it
				p := r.stopped()
				ended := tc.end(r, grantID)
				// Then a stop reaches the robot within one control period
				// (over ROS: plus the transport's budget)
				stopAfter := func() []sim.LogEntry {
					var out []sim.LogEntry
					for _, e := range r.sim.CommandLog()[p.at:] {
						if e.Op == "stop" {
							out = append(out, e)
						}
					}
					return out
				}
				require.True(t, r.stepUntil(r.within(r.sup.ControlPeriod()), func() bool { return len(stopAfter()) > 0 }),
					"no stop within one control period of the grant's end (%s world)", r.world.name())
				if r.world.wire() {
					t.Logf("the stop reached the robot %s after the grant ended (allowed %s + budget %s)", stopAfter()[0].Time.Sub(ended), r.sup.ControlPeriod(), r.world.budget())
				}
				require.LessOrEqual(t, stopAfter()[0].Time.Sub(ended), r.within(r.sup.ControlPeriod()))
				// And nothing of the task follows; it ends cancelled, the
				// agent told who ended its authority
				v = r.requireStopWon(v, p, fsm.Cancelled)
				require.Equal(t, tc.wantType, v.Error.Type, v.Error.Message)
				require.Contains(t, v.Error.Message, tc.wantText)
				require.Contains(t, v.Error.Message, "robot stopped")
				tr := r.sim.Truth()
				require.Less(t, tr.Base.X, 2.9, "the motion did not run to its target")
			})
		}
	}
}
