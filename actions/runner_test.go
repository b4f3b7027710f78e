package actions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestSubmit_RejectsBadArgumentsWithoutATask(t *testing.T) {
	tests := []struct {
		name  string
		tool  string
		args  map[string]any
		want  toolerr.Type
		field string
		text  string
	}{
		{"missing y", "move_base_to", map[string]any{"x": 1.0}, toolerr.InvalidParams, "y", "needs both x and y"},
		{"location and x", "move_base_to", map[string]any{"x": 1.0, "location": "table"}, toolerr.InvalidParams, "location", "not both"},
		{"x not a number", "move_base_to", map[string]any{"x": "far", "y": 1.0}, toolerr.InvalidParams, "x", "must be a number"},
		{"unknown argument", "move_base_to", map[string]any{"x": 1.0, "y": 1.0, "speed": 9.0}, toolerr.InvalidParams, "speed", "allowed: x, y, theta_deg, location"},
		{"unknown location", "move_base_to", map[string]any{"location": "kitchen"}, toolerr.NotFound, "location", "known locations: dock, home, table"},
		{"unknown pose", "move_arm_to", map[string]any{"pose": "wave"}, toolerr.NotFound, "pose", "known poses: reach_table, ready, stowed"},
		{"unknown joint", "move_arm_to", map[string]any{"joints": map[string]any{"knee": 1.0}}, toolerr.InvalidParams, "joints.knee", "no joint \"knee\""},
		{"joints not an object", "move_arm_to", map[string]any{"joints": 3.0}, toolerr.InvalidParams, "joints", "mapping joint names"},
		{"pose and joints", "move_arm_to", map[string]any{"pose": "ready", "joints": map[string]any{"elbow": 1.0}}, toolerr.InvalidParams, "pose", "not both"},
		{"grasp without object", "grasp", map[string]any{}, toolerr.InvalidParams, "object_id", "needs object_id"},
		{"release takes no arguments", "release", map[string]any{"force": 3.0}, toolerr.InvalidParams, "force", "takes no arguments"},
		{"not an action tool", "fly", map[string]any{}, toolerr.UnknownTool, "", "not an action tool"},
		{"cancel without task id", "cancel_task", map[string]any{}, toolerr.InvalidParams, "task_id", "needs task_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, benchOpt{})
			_, err := b.submit(tc.tool, tc.args)
			te := toolerr.As(err)
			require.Equal(t, tc.want, te.Type, "%v", err)
			require.Contains(t, te.Message, tc.text)
			if tc.field != "" {
				require.Equal(t, tc.field, te.Details["field"])
			}
			require.Empty(t, b.run.List(), "no task is created for a refused call")
			require.Zero(t, b.appr.requestCount(), "no operator is asked")
		})
	}
}

func TestSubmit_LimitsCheckedBeforeAnyOperatorIsAsked(t *testing.T) {
	b := newBench(t, benchOpt{})
	// When the target is outside the workspace
	_, err := b.submit("move_base_to", map[string]any{"x": 7.0, "y": 0.0})
	// Then it is a SAFETY_VIOLATION naming x and the range, and no one is asked
	te := toolerr.As(err)
	require.Equal(t, toolerr.SafetyViolation, te.Type)
	require.Equal(t, "x", te.Details["field"])
	require.Contains(t, te.Message, "x in [-4.5, 4.5]")
	require.Contains(t, te.Message, "nothing moved")
	var le *safety.LimitError
	require.ErrorAs(t, err, &le)
	require.Zero(t, b.appr.requestCount())
	require.Empty(t, b.run.List())
}

func TestSubmit_ApprovalFlowToSuccess(t *testing.T) {
	b := newBench(t, benchOpt{})
	// Given a call that needs approval
	v, err := b.submit("move_base_to", map[string]any{"x": 2.0, "y": -1.0})
	require.NoError(t, err)
	require.Equal(t, fsm.AwaitingApproval, v.Status)
	req := b.appr.lastRequest()
	require.Equal(t, v.ID, req.TaskID)
	require.Contains(t, req.Preview, "move the base 2.2 m to (2.00, -1.00)")
	require.Contains(t, req.Preview, "about")
	require.Equal(t, safety.ArgsHash("move_base_to", v.Arguments), req.ArgsHash)
	require.NotNil(t, req.Target)
	require.Empty(t, b.bot.commands(), "nothing moves before approval")
	// When the operator approves
	b.approve(v)
	v = b.finish(v.ID)
	// Then it succeeds with a result, and every transition was recorded
	// before the command it implies
	require.Equal(t, fsm.Succeeded, v.Status, v.Text)
	require.Nil(t, v.Error)
	require.InDelta(t, 1.0, v.Progress.Fraction, 1e-9)
	require.InDelta(t, 2.0, v.Result["x"], 1e-9)
	cmds := b.bot.commands()
	require.Len(t, cmds, 1)
	require.Equal(t, robot.CmdMoveBase, cmds[0].Kind)
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	var events []fsm.Event
	for i, r := range b.rec.recs {
		events = append(events, r.Event)
		if r.Event == fsm.EvStart {
			require.Zero(t, b.rec.sentAt[i], "executing recorded before the first command")
			require.Equal(t, "grant-"+v.ID, r.GrantID)
		}
	}
	require.Equal(t, []fsm.Event{"", fsm.EvNeedApproval, fsm.EvApprove, fsm.EvStart, fsm.EvSucceed}, events)
}

// TestSubmit_GrantCoveredCallAnswersApprovedNamingTheGrant is issue 12
// item 4: a call an operator's scoped grant covered answered "waiting for
// an operator to approve" while its motion was starting.
func TestSubmit_GrantCoveredCallAnswersApprovedNamingTheGrant(t *testing.T) {
	// Given a scoped grant that covers the call when it is filed
	b := newBench(t, benchOpt{})
	until := time.Date(2026, 1, 2, 14, 5, 30, 0, time.UTC)
	b.appr.Covering = func(r actions.ApprovalRequest) actions.Decision {
		return actions.Decision{
			Approved: true, By: "alice", GrantID: "grant-" + r.TaskID,
			GrantScope: "move_arm_to the named poses ready, stowed", GrantExpires: until,
		}
	}
	// When the agent calls the action
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	// Then the answer is the status the task really has, approved, and
	// says by whose grant, for what, until when
	require.Equal(t, fsm.Approved, v.Status, v.Text)
	require.Equal(t, "Approved by alice's grant grant-"+v.ID+" (move_arm_to the named poses ready, stowed), valid until 14:05 UTC; starting: move the arm to pose ready, about 3 s.", v.Text)
	require.NotContains(t, v.Text, "waiting")
	// And the motion runs on that grant
	v = b.finish(v.ID)
	require.Equal(t, fsm.Succeeded, v.Status, v.Text)
	require.Len(t, b.bot.commands(), 1)
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	var events []fsm.Event
	for _, r := range b.rec.recs {
		events = append(events, r.Event)
		if r.Event == fsm.EvStart {
			require.Equal(t, "grant-"+v.ID, r.GrantID)
		}
	}
	require.Equal(t, []fsm.Event{"", fsm.EvNeedApproval, fsm.EvApprove, fsm.EvStart, fsm.EvSucceed}, events)
}

func TestSubmit_DeniedCarriesOperatorReasonVerbatim(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	b.appr.Decide(v.ApprovalID, actions.Decision{Reason: "Not while I'm loading the tray!", By: "carol"})
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Terminal() })
	require.Equal(t, fsm.Denied, v.Status)
	require.Equal(t, toolerr.ApprovalDenied, v.Error.Type)
	require.Contains(t, v.Error.Message, `"Not while I'm loading the tray!"`)
	require.Contains(t, v.Error.Message, "carol")
	require.Contains(t, v.Error.Message, "nothing moved")
	require.Empty(t, b.bot.commands())
}

func TestSubmit_ExpiredApproval(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	b.appr.Decide(v.ApprovalID, actions.Decision{Expired: true})
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Terminal() })
	require.Equal(t, fsm.Expired, v.Status)
	require.Equal(t, toolerr.ApprovalExpired, v.Error.Type)
	require.Empty(t, b.bot.commands())
}

func TestSubmit_ApproverThatNeverAnswersExpiresInTheRunner(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	for i := 0; i < 100 && !v.Terminal(); i++ {
		b.fc.Advance(time.Second)
		time.Sleep(100 * time.Microsecond)
		v, _ = b.run.Get(v.ID)
	}
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Terminal() })
	require.Equal(t, fsm.Expired, v.Status)
	require.Contains(t, b.appr.withdrawn, v.ApprovalID)
}

func TestSubmit_NoApproverOnlyApprovalNeverTools(t *testing.T) {
	b := newBench(t, benchOpt{noApprover: true, mutate: func(c *hwconfig.Config) {
		c.Actions["return_to_safe_pose"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
	}})
	_, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.Equal(t, toolerr.PermissionDenied, typeOf(err))
	require.Contains(t, err.Error(), "no approval service")
	require.Empty(t, b.run.List())
	// A tool the config authorizes runs without anyone asked.
	v, err := b.submit("return_to_safe_pose", map[string]any{})
	require.NoError(t, err)
	v = b.finish(v.ID)
	require.Equal(t, fsm.Succeeded, v.Status, v.Text)
}

func TestSubmit_SecondMotionIsBusyNamingTheTask(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	_, err = b.submit("move_base_to", map[string]any{"location": "table"})
	te := toolerr.As(err)
	require.Equal(t, toolerr.RobotBusy, te.Type)
	require.Contains(t, te.Message, v.ID)
	require.Contains(t, te.Message, "move_arm_to")
	require.Equal(t, v.ID, te.Details["task_id"])
	require.Equal(t, "move_arm_to", te.Details["tool"])
	active, ok := b.run.Active()
	require.True(t, ok)
	require.Equal(t, v.ID, active.ID)
}

func TestSubmit_RefusedWhileLatched(t *testing.T) {
	b := newBench(t, benchOpt{})
	require.NoError(t, b.sup.EStop(context.Background(), "op", "test"))
	_, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.Equal(t, toolerr.EStopActive, typeOf(err))
	require.NoError(t, b.sup.ResetEStop("op"))
	_, err = b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
}

// TestSubmit_LinkDownFailsFastWithoutAskingAnOperator is the regression
// test for motions filed for approval while the robot was unreachable.
func TestSubmit_LinkDownFailsFastWithoutAskingAnOperator(t *testing.T) {
	b := newBench(t, benchOpt{})
	// Given the robot link is down
	b.bot.setLinkDown(true)
	// When the agent asks for a motion
	_, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	// Then it fails fast as UNAVAILABLE with a retry hint, and no operator is asked
	require.Equal(t, toolerr.Unavailable, typeOf(err))
	require.Positive(t, toolerr.As(err).RetryAfter)
	b.appr.mu.Lock()
	require.Empty(t, b.appr.requests)
	b.appr.mu.Unlock()
	require.Empty(t, b.bot.commands())
	// And once the link is back the same call is accepted
	b.bot.setLinkDown(false)
	_, err = b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
}

func TestCancel_AwaitingApprovalWithdrawsAndSendsNothing(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_base_to", map[string]any{"location": "table"})
	require.NoError(t, err)
	v, err = b.run.Cancel(context.Background(), v.ID, "agent")
	require.NoError(t, err)
	require.Equal(t, fsm.Cancelled, v.Status)
	require.Contains(t, v.Error.Message, "nothing moved")
	require.Contains(t, b.appr.withdrawn, v.ApprovalID)
	require.Empty(t, b.bot.commands())
	_, ok := b.run.Active()
	require.False(t, ok)
	// cancel_task through Submit on an ended task returns it unchanged
	v2, err := b.submit("cancel_task", map[string]any{"task_id": v.ID})
	require.NoError(t, err)
	require.Equal(t, fsm.Cancelled, v2.Status)
	_, err = b.run.Cancel(context.Background(), "nope", "agent")
	require.Equal(t, toolerr.NotFound, typeOf(err))
}

func TestCancel_ExecutingReportsCancelledOnlyWhenStopped(t *testing.T) {
	b := newBench(t, benchOpt{})
	// A robot that took the goal but has not moved yet: its cancel is
	// "cancelled before it moved" whenever the cancel lands.
	b.bot.Hold, b.bot.HoldStill = true, true
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	b.approve(v)
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Status == fsm.Executing })
	done := make(chan actions.TaskView, 1)
	go func() {
		v, _ := b.run.Cancel(context.Background(), v.ID, "agent")
		done <- v
	}()
	waitFor(t, func() bool { return b.bot.stopCount() > 0 })
	// The robot has not reported itself at rest after the stop yet.
	require.Empty(t, done)
	// Then it does: a state after the stop (published until the cancel
	// answers, since the first may reach the supervisor before it noted
	// the stop's time, and count as a state from before it).
	v = func() actions.TaskView {
		for {
			b.fc.Advance(20 * time.Millisecond)
			b.bot.publish()
			select {
			case v := <-done:
				return v
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	require.Equal(t, fsm.Cancelled, v.Status)
	// The held robot never moved: it was cancelled before it moved, no
	// failure (issue 14).
	require.Nil(t, v.Error)
	require.Contains(t, v.Text, "move_arm_to was cancelled before it moved: the agent cancelled it; robot stopped.")
	require.Len(t, b.bot.commands(), 1, "a cancel never starts recovery")
}

// TestReturnToSafePose_BaseOnlyRobotStops is the regression test for a
// base-only robot answering INVALID_PARAMS to return_to_safe_pose although
// its documented safe pose is "base stopped".
func TestReturnToSafePose_BaseOnlyRobotStops(t *testing.T) {
	b := newBench(t, benchOpt{config: "../hw-configs/ros-base-only.yaml"})
	before := b.bot.stopCount()
	v, err := b.submit("return_to_safe_pose", map[string]any{})
	require.NoError(t, err)
	require.Equal(t, fsm.Succeeded, v.Status)
	require.Equal(t, "return_to_safe_pose", v.Tool)
	require.Contains(t, v.Text, "base stopped")
	require.Greater(t, b.bot.stopCount(), before, "a stop reached the robot")
	require.Empty(t, b.bot.commands(), "no motion command")
	b.appr.mu.Lock()
	require.Empty(t, b.appr.requests, "stopping needs no operator")
	b.appr.mu.Unlock()
}

func TestStop_CancelsLiveTaskWithoutApproval(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_base_to", map[string]any{"location": "table"})
	require.NoError(t, err)
	view, err := b.submit("stop", map[string]any{})
	require.NoError(t, err)
	require.Equal(t, fsm.Succeeded, view.Status)
	require.Contains(t, view.Text, v.ID)
	require.Equal(t, 1, b.bot.stopCount())
	got, _ := b.run.Get(v.ID)
	require.Equal(t, fsm.Cancelled, got.Status)
	rep, err := b.run.Stop(context.Background(), "agent", "")
	require.NoError(t, err)
	require.Contains(t, rep.Text, "No task was running.")
	require.Equal(t, 2, b.bot.stopCount())
}

func TestTimeout_ErrorSaysWhatRecoveryDidAndWhereTheRobotIs(t *testing.T) {
	b := newBench(t, benchOpt{mutate: func(c *hwconfig.Config) {
		c.Actions["move_base_to"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalRequired, Timeout: hwconfig.Duration(time.Second)}
	}})
	b.bot.Hold = true
	v, err := b.submit("move_base_to", map[string]any{"location": "table"})
	require.NoError(t, err)
	b.approve(v)
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Status == fsm.Executing })
	v = b.finish(v.ID)
	require.Equal(t, fsm.Recovered, v.Status)
	require.Equal(t, toolerr.Timeout, v.Error.Type)
	msg := v.Error.Message
	require.Contains(t, msg, "timed out")
	require.Contains(t, msg, "arm already in stowed")
	require.Contains(t, msg, "short of table,")
	require.Contains(t, msg, "no task running")
}

func TestRecorderFailureSendsNothing(t *testing.T) {
	b := newBench(t, benchOpt{})
	b.rec.FailOn = string(fsm.EvStart)
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	b.approve(v)
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Terminal() })
	require.Equal(t, fsm.Failed, v.Status)
	require.Equal(t, toolerr.Internal, v.Error.Type)
	require.Empty(t, b.bot.commands(), "an unrecorded transition sends nothing")
}

func TestGrasp_NeedsPerceptionAndReach(t *testing.T) {
	b := newBench(t, benchOpt{})
	_, err := b.submit("grasp", map[string]any{"object_id": "red_cup"})
	te := toolerr.As(err)
	require.Equal(t, toolerr.NotFound, te.Type)
	require.Contains(t, te.SuggestionText(), "describe_scene")

	objs := objectsFunc(func(id string) (actions.ObjectInfo, error) {
		switch id {
		case "far_cup":
			return actions.ObjectInfo{ID: id, Label: "cup", Position: robot.Vec3{X: 3, Y: 3, Z: 0.8}}, nil
		case "old_cup":
			return actions.ObjectInfo{ID: id, Label: "cup", Position: robot.Vec3{X: 0.6, Z: 0.6}, Stale: true}, nil
		case "near_cup":
			return actions.ObjectInfo{ID: id, Label: "cup", Position: robot.Vec3{X: 0.75, Z: 0.5}}, nil
		}
		return actions.ObjectInfo{}, toolerr.New(toolerr.NotFound, "no object %q", id)
	})
	b = newBench(t, benchOpt{objects: objs})
	_, err = b.submit("grasp", map[string]any{"object_id": "far_cup"})
	te = toolerr.As(err)
	require.Equal(t, toolerr.ActionFailed, te.Type)
	require.Contains(t, te.Message, "cannot be reached")
	require.Contains(t, te.SuggestionText(), "move the base closer")
	_, err = b.submit("grasp", map[string]any{"object_id": "old_cup"})
	require.Equal(t, toolerr.NotFound, typeOf(err))
	_, err = b.submit("grasp", map[string]any{"object_id": "ghost"})
	require.Equal(t, toolerr.NotFound, typeOf(err))
	v, err := b.submit("grasp", map[string]any{"object_id": "near_cup"})
	require.NoError(t, err)
	require.Contains(t, b.appr.lastRequest().Preview, "grasp near_cup")
	b.approve(v)
	v = b.finish(v.ID)
	// The instant robot closes on nothing: success requires holding it.
	require.Equal(t, fsm.Recovered, v.Status)
	require.Equal(t, toolerr.ActionFailed, v.Error.Type)
	require.Contains(t, v.Error.Message, "holds nothing, not near_cup")
	cmds := b.bot.commands()
	require.GreaterOrEqual(t, len(cmds), 4, "open, above, approach, close")
	require.Equal(t, robot.CmdGripper, cmds[0].Kind)
}

type objectsFunc func(string) (actions.ObjectInfo, error)

func (f objectsFunc) Lookup(_ context.Context, id string) (actions.ObjectInfo, error) { return f(id) }

func TestWait_ReturnsAtMaxOrTerminal(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	got := make(chan actions.TaskView, 1)
	go func() {
		v, _ := b.run.Wait(context.Background(), v.ID, 2*time.Second)
		got <- v
	}()
	waitFor(t, func() bool { b.fc.Advance(100 * time.Millisecond); return len(got) == 1 })
	require.Equal(t, fsm.AwaitingApproval, (<-got).Status)
	_, err = b.run.Wait(context.Background(), "nope", time.Second)
	require.Equal(t, toolerr.NotFound, typeOf(err))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w, err := b.run.Wait(ctx, v.ID, time.Hour)
	require.NoError(t, err)
	require.Equal(t, v.ID, w.ID)
}

func TestObserverSeesEveryChange(t *testing.T) {
	b := newBench(t, benchOpt{})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	b.approve(v)
	b.finish(v.ID)
	var seen []fsm.State
	for len(b.obs) > 0 {
		tv := <-b.obs
		if len(seen) == 0 || seen[len(seen)-1] != tv.Status {
			seen = append(seen, tv.Status)
		}
	}
	require.Equal(t, []fsm.State{fsm.AwaitingApproval, fsm.Approved, fsm.Executing, fsm.Succeeded}, seen)
}

func TestApprovalRequestFailureIsUnavailable(t *testing.T) {
	b := newBench(t, benchOpt{})
	b.appr.RequestFunc = func(actions.ApprovalRequest) error { return errors.New("console down") }
	_, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	te := toolerr.As(err)
	require.Equal(t, toolerr.Unavailable, te.Type)
	require.Positive(t, te.RetryAfter)
	_, ok := b.run.Active()
	require.False(t, ok, "the failed task is not left live")
}

// Regression (found by the conformance suite): an e-stop pressed while
// the approval request was being filed made the approval service refuse
// it, and the agent was told UNAVAILABLE, retry in a second, though the
// message said the e-stop was latched.
func TestApprovalRequestRefusedByALatchThatEngagedMeanwhileIsTheLatch(t *testing.T) {
	b := newBench(t, benchOpt{})
	b.appr.RequestFunc = func(actions.ApprovalRequest) error {
		require.NoError(t, b.sup.EStop(context.Background(), "operator", "pressed while filing"))
		return errors.New("the e-stop is latched")
	}
	_, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	te := toolerr.As(err)
	require.Equal(t, toolerr.EStopActive, te.Type, "%v", te)
	require.False(t, te.Retryable())
	_, ok := b.run.Active()
	require.False(t, ok, "the refused task is not left live")
}

func TestNewRunner_ValidatesConf(t *testing.T) {
	_, err := actions.NewRunner(actions.RunnerConf{})
	require.ErrorContains(t, err, "Config")
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	_, err = actions.NewRunner(actions.RunnerConf{Config: cfg})
	require.ErrorContains(t, err, "Supervisor")
}

// TestSubmit_LatchDuringPlanningFilesNothing is issue 11 item 4: a grasp
// planned while the e-stop was pressed was filed for approval, survived
// the reset and ran once approved. A latch that engages while a call is
// planned — even one released again before planning ends — ends the call:
// no approval request is filed and nothing moves.
func TestSubmit_LatchDuringPlanningFilesNothing(t *testing.T) {
	tests := []struct {
		name     string
		resetToo bool
	}{
		{"e-stop pressed while the grasp is planned", false},
		{"e-stop pressed and reset while the grasp is planned", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b *bench
			objs := objectsFunc(func(id string) (actions.ObjectInfo, error) {
				// Given the planner looking the object up, When the e-stop
				// is pressed now (and maybe reset)
				require.NoError(t, b.sup.EStop(context.Background(), "operator-1", "person in the cell"))
				if tc.resetToo {
					require.NoError(t, b.sup.ResetEStop("operator-1"))
				}
				return actions.ObjectInfo{ID: id, Label: "cup", Position: robot.Vec3{X: 0.75, Z: 0.5}}, nil
			})
			b = newBench(t, benchOpt{objects: objs})
			_, err := b.submit("grasp", map[string]any{"object_id": "near_cup"})
			// Then the call fails with ESTOP_ACTIVE, nothing is filed and
			// nothing moves
			require.Equal(t, toolerr.EStopActive, typeOf(err), "%v", err)
			require.Contains(t, toolerr.As(err).Message, "nothing moved")
			require.Zero(t, b.appr.requestCount(), "an approval request was filed for a call planned across an e-stop")
			require.Empty(t, b.bot.commands())
			for _, v := range b.run.List() {
				require.True(t, v.Terminal(), "task %s left %s", v.ID, v.Status)
				require.Equal(t, fsm.EStopped, v.Status)
			}
		})
	}
}
