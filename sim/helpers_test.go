package sim

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/kinematics"
	"github.com/robot-bridge/robot-bridge/robot"
)

// loadConfig loads the default simulated robot's hw-config.
func loadConfig(t testing.TB) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	require.NotNil(t, cfg.Sim)
	return cfg
}

// newSim builds a simulator from the default config after applying muts.
func newSim(t testing.TB, muts ...func(*hwconfig.Config)) *Sim {
	t.Helper()
	cfg := loadConfig(t)
	for _, m := range muts {
		m(cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// startAt puts the robot at a named location of the config.
func startAt(name string) func(*hwconfig.Config) {
	return func(c *hwconfig.Config) { c.Sim.Start = c.Locations[name] }
}

// supervise steps d of sim time one physics period at a time, refreshing
// the command watchdog every step as a supervising bridge does, and calls
// each (if non-nil) after every step.
func supervise(s *Sim, d time.Duration, each func()) {
	for t := time.Duration(0); t < d; t += s.PhysicsPeriod() {
		s.Refresh()
		s.Step(s.PhysicsPeriod())
		if each != nil {
			each()
		}
	}
}

// superviseUntil steps like supervise until done returns true or limit
// passes, and reports whether done became true.
func superviseUntil(s *Sim, limit time.Duration, done func() bool) bool {
	for t := time.Duration(0); t < limit; t += s.PhysicsPeriod() {
		if done() {
			return true
		}
		s.Refresh()
		s.Step(s.PhysicsPeriod())
	}
	return done()
}

func baseCmd(id string, x, y, thetaDeg float64) robot.Command {
	return robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: x, Y: y, Theta: robot.Radians(thetaDeg)}}}
}

func armCmd(id string, scale float64, q ...float64) robot.Command {
	return robot.Command{ID: id, Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: q, VelocityScale: scale}}
}

func gripCmd(id string, closeIt bool, force float64) robot.Command {
	return robot.Command{ID: id, Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{Close: closeIt, Force: force}}
}

// armTo returns an arm command that puts the fingertip on a room-frame
// point for a base at pose.
func armTo(t testing.TB, s *Sim, id string, pose robot.Pose2D, p robot.Vec3) robot.Command {
	t.Helper()
	q, err := kinematics.IK(s.Config().Arm, kinematics.RoomToBase(pose, p))
	require.NoError(t, err)
	return armCmd(id, 1, q...)
}

func objTruth(t testing.TB, tr Truth, id string) ObjectTruth {
	t.Helper()
	for _, o := range tr.Objects {
		if o.ID == id {
			return o
		}
	}
	require.FailNow(t, "no object "+id)
	return ObjectTruth{}
}

func hasEvent(s *Sim, kind string) bool {
	for _, e := range s.Events() {
		if e.Kind == kind {
			return true
		}
	}
	return false
}
