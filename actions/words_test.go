package actions

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

var update = flag.Bool("update", false, "rewrite testdata/words.golden from the current output")

// TestWords_Golden pins what the agent is told about the robot when a task
// ends, for every kind of ending. The words are pure functions of the
// outcome, so the file shows at a glance that "robot stopped" appears only
// where the stop was confirmed. Run with -update to rewrite it after an
// intended change, and read the diff.
func TestWords_Golden(t *testing.T) {
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	stowed, err := cfg.PoseJoints("stowed")
	require.NoError(t, err)
	st := robot.State{Base: robot.Pose2D{X: 1.25, Y: -0.5, Theta: 1.5708}, Gripper: &robot.Gripper{Opening: 0.08}}
	for i, n := range cfg.JointNames() {
		st.Joints = append(st.Joints, robot.Joint{Name: n, Position: stowed[i]})
	}
	toTable := &plan{goal: "table", target: &robot.Pose2D{X: 2.5, Y: 0.2}}
	atTarget := st
	atTarget.Base = *toTable.target
	deadline := &safety.Trip{Kind: safety.TripDeadline, Detail: "drive to table did not finish within its 8.0 s deadline"}
	silence := &safety.Trip{Kind: safety.TripSilence, Detail: "the robot sent no state for 0.52 s (limit 0.50 s)"}
	revoked := &safety.StopRequest{Cause: safety.StopGrantRevoked, By: "alice", Reason: "forklift in the aisle"}
	expired := &safety.StopRequest{Cause: safety.StopGrantExpired, Reason: "its time limit ran out"}
	stopped := &safety.StopRequest{Cause: safety.StopByRequest, By: "agent-1", Reason: "the user said stop"}

	lines := []struct {
		name string
		text func() string
	}{
		{"where: at rest at the goal", func() string { return whereNow(cfg, toTable, atTarget, atRest) }},
		{"where: at rest short of the goal", func() string { return whereNow(cfg, toTable, st, atRest) }},
		{"where: stop not confirmed", func() string { return whereNow(cfg, toTable, st, stopUnconfirmed) }},
		{"where: nothing was sent", func() string { return whereNow(cfg, toTable, st, untouched) }},
		{"timeout, recovered", func() string {
			return failureError("move_base_to", safety.Outcome{
				Kind: safety.OutcomeRecovered, Trip: deadline, StopConfirmed: true,
				Recovery: safety.Recovery{Succeeded: true, Text: "arm already in stowed, base stopped"},
			}, whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"link down, recovered", func() string {
			down := &safety.Trip{Kind: safety.TripLinkDown, Detail: "the robot link went down"}
			return failureError("move_base_to", safety.Outcome{Kind: safety.OutcomeRecovered, Trip: down, StopConfirmed: true},
				whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"silent robot, stop not confirmed, fault", func() string {
			return failureError("move_base_to", safety.Outcome{Kind: safety.OutcomeFault, Trip: silence, StopConfirmed: false},
				whereNow(cfg, toTable, st, stopUnconfirmed)).Message
		}},
		{"cancelled on request", func() string {
			return cancelledError("move_base_to", safety.Outcome{Kind: safety.OutcomeCancelled, Stop: stopped, StopConfirmed: true}, "40% of it", whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"grant revoked", func() string {
			return cancelledError("move_base_to", safety.Outcome{Kind: safety.OutcomeCancelled, Stop: revoked, StopConfirmed: true}, "40% of it", whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"grant expired", func() string {
			return cancelledError("move_base_to", safety.Outcome{Kind: safety.OutcomeCancelled, Stop: expired, StopConfirmed: true}, "40% of it", whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"cancelled with cancel_task, barely started", func() string {
			return cancelledError("move_base_to", safety.Outcome{Kind: safety.OutcomeCancelled, Stop: &safety.StopRequest{By: "agent", Reason: cancelReason}, StopConfirmed: true},
				progressWords(TaskView{}), whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"stopped by the stop tool without a reason, stop not confirmed", func() string {
			return cancelledError("move_base_to", safety.Outcome{Kind: safety.OutcomeCancelled, Stop: &safety.StopRequest{By: "agent", Reason: defaultStopReason}},
				"40% of it", whereNow(cfg, toTable, st, stopUnconfirmed)).Message
		}},
		{"cancelled before it started", func() string {
			return beforeStartError("move_arm_to", safety.StopRequest{By: "agent", Reason: cancelReason}, whereNow(cfg, nil, st, untouched)).Message
		}},
		{"stopped before it started", func() string {
			return beforeStartError("move_arm_to", safety.StopRequest{By: "operator", Reason: "the user said stop"}, whereNow(cfg, nil, st, untouched)).Message
		}},
		{"grant revoked before it started", func() string {
			return beforeStartError("move_base_to", *revoked, whereNow(cfg, nil, st, untouched)).Message
		}},
		{"bridge shutting down before it started", func() string {
			return beforeStartError("move_arm_to", safety.StopRequest{By: "bridge"}, whereNow(cfg, nil, st, untouched)).Message
		}},
		{"e-stop before it started", func() string {
			return estopBeforeStartError("move_arm_to", "alice", "child near the robot", whereNow(cfg, nil, st, untouched)).Message
		}},
		{"e-stop during the motion", func() string {
			return estopDuringError("move_base_to", "agent", "", true, whereNow(cfg, toTable, st, atRest)).Message
		}},
		{"bridge shut down during the motion", func() string {
			return shutdownError("move_base_to", whereNow(cfg, toTable, st, stopUnconfirmed)).Message
		}},
		{"denied", func() string {
			return deniedError("move_arm_to", Decision{By: "carol", Reason: "Not while I'm loading the tray!"}, st.Summary()).Message
		}},
		{"denied by the operator credential", func() string {
			return deniedError("move_arm_to", Decision{By: "operator", Reason: "someone is standing next to the arm"}, st.Summary()).Message
		}},
		{"expired", func() string { return expiredError("move_arm_to", st.Summary()).Message }},
		{"withdrawn", func() string { return withdrawnError("task cancelled by the agent").Message }},
		{"busy", func() string { return busyError("task-1", "move_arm_to", fsm.AwaitingApproval).Message }},
		{"refused before asking", func() string {
			return refusedBeforeAskingError("move_base_to", toolerr.New(toolerr.SafetyViolation, "x=7 is outside the workspace (x in [-4.5, 4.5])")).Message
		}},
		{"latched while planning, still latched", func() string {
			return latchedWhilePlanningError("move_arm_to", toolerr.New(toolerr.EStopActive, "the e-stop is latched (pressed by alice: test); nothing moves until an operator resets it")).Message
		}},
		{"latched while planning, released", func() string { return latchedWhilePlanningError("move_arm_to", nil).Message }},
		{"text: requested", func() string { return requestedText("move the arm to pose ready, about 3 s") }},
		{"text: waiting", func() string { return waitingText("move the base 1.7 m to table (1.35, 1.00), facing 0°, about 6 s") }},
		{"text: preauthorized", func() string { return preauthorizedText("open the gripper (it holds nothing), about 1 s") }},
		{"text: approved", func() string { return approvedText("alice", "move the arm to pose ready, about 3 s") }},
		{"text: covered by a grant", func() string {
			d := Decision{
				Approved: true, By: "operator", GrantID: "grt_1", GrantScope: "move_arm_to the named poses ready, stowed",
				GrantExpires: time.Date(2026, 1, 2, 14, 5, 59, 0, time.UTC),
			}
			return grantText(d, "move the arm to pose ready, about 3 s")
		}},
		{"text: started", func() string { return startedText("driving to table") }},
		{"text: stopping on request", func() string { return stoppingText(safety.Trip{Kind: safety.TripCancelled}, "agent") }},
		{"text: stopping on a monitor", func() string { return stoppingText(*silence, "supervisor") }},
		{"text: recovering", func() string { return recoveringText("stowed") }},
		{"text: succeeded", func() string { return succeededText("reached table", whereNow(cfg, toTable, atTarget, atRest)) }},
		{"progress: driving", func() string { return progressText("driving to table", 1.2049, true, 0.4) }},
		{"progress: arm", func() string { return progressText("moving the arm to pose ready", 0, false, 0.4) }},
		{"stop: no task", func() string { return stopText(st.Summary(), "", "", true) }},
		{"stop: a task, not delivered", func() string { return stopText(st.Summary(), "task-1", "move_base_to", false) }},
		{"stop: base-only safe pose", func() string { return baseOnlySafePoseText(stopText(st.Summary(), "", "", true)) }},
	}
	statuses := []fsm.State{
		fsm.Requested, fsm.AwaitingApproval, fsm.Approved, fsm.Executing, fsm.Stopping, fsm.Recovering,
		fsm.Succeeded, fsm.Failed, fsm.Cancelled, fsm.Denied, fsm.Expired, fsm.Recovered, fsm.Fault, fsm.EStopped, fsm.Interrupted,
	}
	for _, s := range statuses {
		lines = append(lines, struct {
			name string
			text func() string
		}{"status " + string(s), func() string { return "task-1 (move_arm_to) " + StatusWords(s) }})
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s:\n  %s\n", l.name, l.text())
	}
	got := b.String()
	path := filepath.Join("testdata", "words.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./actions -run TestWords_Golden -update to create it")
	require.Equal(t, string(want), got)
}

// TestWords_StopNotConfirmedIsNeverCalledStopped is issue 11 item 8: a
// robot that went silent mid-motion was reported "robot stopped" in the
// same sentence that said it was not confirmed stopped.
func TestWords_StopNotConfirmedIsNeverCalledStopped(t *testing.T) {
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	st := robot.State{Base: robot.Pose2D{X: 1, Y: 0}}
	p := &plan{goal: "dock", target: &robot.Pose2D{X: -3, Y: 2}}
	trip := &safety.Trip{Kind: safety.TripSilence, Detail: "the robot sent no state for 0.52 s (limit 0.50 s)", Err: errors.New("silent")}
	tests := []struct {
		name string
		out  safety.Outcome
	}{
		{"fault after silence", safety.Outcome{Kind: safety.OutcomeFault, Trip: trip}},
		{"cancelled, stop unconfirmed", safety.Outcome{Kind: safety.OutcomeCancelled, Trip: trip, Stop: &safety.StopRequest{By: "agent-1"}}},
		{"recovered claims nothing it did not see", safety.Outcome{Kind: safety.OutcomeRecovered, Trip: trip, Recovery: safety.Recovery{Text: "base stopped"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given an outcome whose stop no state confirmed
			where := whereNow(cfg, p, st, stopUnconfirmed)
			var e *toolerr.Error
			// When the agent is told
			if tc.out.Kind == safety.OutcomeCancelled {
				e = cancelledError("move_base_to", tc.out, "half of it", where)
			} else {
				e = failureError("move_base_to", tc.out, where)
			}
			// Then it hears the stop was sent, not that the robot stopped
			require.Contains(t, e.Message, "stop sent, not confirmed")
			require.NotContains(t, e.Message, "robot stopped")
			require.NotContains(t, e.Message, "base stopped at")
			require.Equal(t, false, e.Details["stop_confirmed"])
		})
	}
}
