package actions

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
	toTable := &plan{goal: "the table", target: &robot.Pose2D{X: 2.5, Y: 0.2}}
	atTarget := st
	atTarget.Base = *toTable.target
	deadline := &safety.Trip{Kind: safety.TripDeadline, Detail: "drive to the table did not finish within its 8.0 s deadline"}
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
	p := &plan{goal: "the dock", target: &robot.Pose2D{X: -3, Y: 2}}
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
