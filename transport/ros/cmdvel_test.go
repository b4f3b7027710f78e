package ros

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// The cmd_vel controller's law on an ideal unicycle with the configured
// acceleration limits, stepped at the control rate: no network, no clock.

func TestControl_ReachesTheGoalWithinLimits(t *testing.T) {
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "ros-sim.yaml"))
	require.NoError(t, err)
	d, err := New(Conf{Config: cfg})
	require.NoError(t, err)
	bc := cfg.Base
	tests := []struct {
		name  string
		goal  robot.BaseGoal
		start robot.Pose2D
	}{
		{name: "straight ahead", goal: robot.BaseGoal{Target: robot.Pose2D{X: 1.5}}},
		{name: "behind, turn first", goal: robot.BaseGoal{Target: robot.Pose2D{X: -1, Y: 0.2, Theta: math.Pi}}},
		{name: "final heading", goal: robot.BaseGoal{Target: robot.Pose2D{X: 1, Y: 0.5, Theta: math.Pi / 2}}},
		{name: "heading ignored", goal: robot.BaseGoal{Target: robot.Pose2D{X: 0.5, Y: -0.5}, IgnoreTheta: true}},
		{name: "speed caps of the goal", goal: robot.BaseGoal{Target: robot.Pose2D{X: 1}, MaxLinear: 0.2, MaxAngular: 0.3}},
		{name: "already there", goal: robot.BaseGoal{Target: robot.Pose2D{X: 0.01}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a base at rest
			p, v, w := tc.start, 0.0, 0.0
			dt := d.set.controlPeriod.Seconds()
			maxV, maxW := bc.MaxLinearSpeed, bc.MaxAngularSpeed
			if tc.goal.MaxLinear > 0 {
				maxV = tc.goal.MaxLinear
			}
			if tc.goal.MaxAngular > 0 {
				maxW = tc.goal.MaxAngular
			}
			// When the law drives it, the base following each command
			// within its acceleration limits
			done := false
			var elapsed time.Duration
			for step := 0; step < 3000 && !done; step++ {
				cv, cw, ok := d.control(tc.goal, p)
				require.LessOrEqual(t, math.Abs(cv), maxV+1e-9, "linear speed within the caps")
				require.LessOrEqual(t, math.Abs(cw), maxW+1e-9, "angular speed within the caps")
				require.GreaterOrEqual(t, cv, 0.0, "never backwards")
				if ok {
					done = true
					break
				}
				v += math.Max(-bc.MaxLinearAccel*dt, math.Min(bc.MaxLinearAccel*dt, cv-v))
				w += math.Max(-bc.MaxAngularAccel*dt, math.Min(bc.MaxAngularAccel*dt, cw-w))
				p.Theta = robot.NormalizeAngle(p.Theta + w*dt)
				p.X += v * math.Cos(p.Theta) * dt
				p.Y += v * math.Sin(p.Theta) * dt
				elapsed += d.set.controlPeriod
			}

			// Then it ends at the goal, within the tolerances the
			// supervisor checks
			require.True(t, done, "not done after %s at %+v", elapsed, p)
			require.LessOrEqual(t, math.Hypot(tc.goal.Target.X-p.X, tc.goal.Target.Y-p.Y), bc.GoalTolerance)
			if !tc.goal.IgnoreTheta {
				require.LessOrEqual(t, math.Abs(robot.NormalizeAngle(tc.goal.Target.Theta-p.Theta)), robot.Radians(bc.YawToleranceDeg))
			}
		})
	}
}

func TestProfile_BrakesInTime(t *testing.T) {
	// From the speed the profile allows at distance e, the base can stop
	// within e at the (margined) deceleration.
	for _, e := range []float64{0.001, 0.01, 0.1, 0.5, 2, 10} {
		v := profile(e, 100, 0.6, 2)
		require.LessOrEqual(t, v*v/(2*0.6), e+1e-12, "e=%g", e)
		require.Equal(t, -v, profile(-e, 100, 0.6, 2), "symmetric")
	}
	require.Equal(t, 0.8, profile(100, 0.8, 0.6, 2), "capped at the limit")
}
