package robot

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHub_LatestValueNeverBlocks(t *testing.T) {
	var h Hub
	_, ok := h.Latest()
	require.False(t, ok)
	ch, cancel := h.Subscribe()
	// Given a subscriber that does not read
	for i := 1; i <= 5; i++ {
		h.Publish(State{Battery: Battery{Percent: float64(i), Known: true}})
	}
	// Then it finds only the newest state, and the publisher never blocked
	got := <-ch
	require.InDelta(t, 5.0, got.Battery.Percent, 1e-9)
	latest, ok := h.Latest()
	require.True(t, ok)
	require.InDelta(t, 5.0, latest.Battery.Percent, 1e-9)
	cancel()
	cancel() // idempotent
	_, open := <-ch
	require.False(t, open, "cancel closes the channel")
	h.Publish(State{}) // no subscriber left: must not panic
}

func TestSummaryAndAngles(t *testing.T) {
	s := State{
		Base: Pose2D{X: 1.2, Y: 0.4, Theta: math.Pi / 2}, Battery: Battery{Percent: 87, Known: true},
		Gripper: &Gripper{Holding: "red_cup", Closed: true},
	}
	require.Equal(t, "stopped at (1.20, 0.40) facing 90°, holding red_cup, battery 87%", s.Summary())
	s.Velocity.V = 0.3
	s.EStop = true
	s.Faults = []string{"motor_stall"}
	require.Equal(t, "moving at (1.20, 0.40) facing 90°, holding red_cup, battery 87%, robot e-stop engaged, robot faults: motor_stall", s.Summary())

	tests := []struct{ rad, deg float64 }{{0, 0}, {math.Pi, 180}, {-math.Pi, 180}, {3 * math.Pi / 2, -90}, {-math.Pi / 2, -90}}
	for _, tc := range tests {
		require.InDelta(t, tc.deg, Degrees(tc.rad), 1e-9, "Degrees(%v)", tc.rad)
	}
	require.InDelta(t, -math.Pi/2, NormalizeAngle(3*math.Pi/2), 1e-12)
	require.InDelta(t, math.Pi, NormalizeAngle(-math.Pi), 1e-12)
}

func TestCloneIsDeep(t *testing.T) {
	s := State{Stamp: time.Unix(1, 0), Joints: []Joint{{Name: "a"}}, Gripper: &Gripper{}, Faults: []string{"x"}}
	c := s.Clone()
	c.Joints[0].Name = "b"
	c.Gripper.Holding = "cup"
	c.Faults[0] = "y"
	require.Equal(t, "a", s.Joints[0].Name)
	require.Empty(t, s.Gripper.Holding)
	require.Equal(t, "x", s.Faults[0])
}

func TestCommandValidate(t *testing.T) {
	tests := []struct {
		name string
		cmd  Command
		ok   bool
	}{
		{"base", Command{ID: "1", Kind: CmdMoveBase, Base: &BaseGoal{}}, true},
		{"arm", Command{ID: "2", Kind: CmdMoveArm, Arm: &ArmGoal{}}, true},
		{"gripper", Command{ID: "3", Kind: CmdGripper, Gripper: &GripperGoal{}}, true},
		{"no goal", Command{ID: "4", Kind: CmdMoveBase}, false},
		{"two goals", Command{ID: "5", Kind: CmdMoveBase, Base: &BaseGoal{}, Arm: &ArmGoal{}}, false},
		{"kind mismatch", Command{ID: "6", Kind: CmdMoveArm, Base: &BaseGoal{}}, false},
		{"unknown kind", Command{ID: "7", Kind: 99, Base: &BaseGoal{}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cmd.Validate()
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
	require.Equal(t, "move_arm", CmdMoveArm.String())
}
