package ros

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/geom"
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
			law := newDriveLaw(bc, tc.goal)
			for step := 0; step < 3000 && !done; step++ {
				cv, cw, ok := law.step(p, robot.Twist2D{V: v, W: w})
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

// unicycle steps an ideal differential-drive base that follows each
// velocity command within the configured acceleration limits.
type unicycle struct {
	p    robot.Pose2D
	v, w float64
}

func (u *unicycle) step(bc hwconfig.BaseConf, cv, cw, dt float64) {
	u.v += math.Max(-bc.MaxLinearAccel*dt, math.Min(bc.MaxLinearAccel*dt, cv-u.v))
	u.w += math.Max(-bc.MaxAngularAccel*dt, math.Min(bc.MaxAngularAccel*dt, cw-u.w))
	u.p.Theta = robot.NormalizeAngle(u.p.Theta + u.w*dt)
	u.p.X += u.v * math.Cos(u.p.Theta) * dt
	u.p.Y += u.v * math.Sin(u.p.Theta) * dt
}

func TestControl_DrivesTheStraightSegmentTheLimitsCheck(t *testing.T) {
	// The supervisor checks a base move as the footprint swept along the
	// straight segment from the start to the target; the cmd_vel law
	// used to start driving with up to 0.35 rad of heading error and so
	// drove an arc up to 15 mm off that segment.
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "ros-sim.yaml"))
	require.NoError(t, err)
	d, err := New(Conf{Config: cfg})
	require.NoError(t, err)
	bc := cfg.Base
	dt := d.set.controlPeriod.Seconds()
	tests := []struct {
		name   string
		target robot.Pose2D
	}{
		{"17 degrees to the left", robot.Pose2D{X: 1, Y: 0.3}},
		{"45 degrees to the left", robot.Pose2D{X: 2, Y: 2}},
		{"behind, final heading 90 degrees", robot.Pose2D{X: -3, Y: 1, Theta: math.Pi / 2}},
		{"to the right", robot.Pose2D{X: 0, Y: -3}},
		{"nearly behind", robot.Pose2D{X: -3, Y: -0.2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a base at rest at the origin facing +x
			u := &unicycle{}
			a, b := geom.Point{}, geom.Point{X: tc.target.X, Y: tc.target.Y}
			law := newDriveLaw(bc, robot.BaseGoal{Target: tc.target})

			// When the law drives it to the target
			worst, done := 0.0, false
			for step := 0; step < 3000 && !done; step++ {
				cv, cw, ok := law.step(u.p, robot.Twist2D{V: u.v, W: u.w})
				done = ok
				u.step(bc, cv, cw, dt)
				worst = math.Max(worst, geom.SegmentDistance(geom.Point{X: u.p.X, Y: u.p.Y}, a, b))
			}

			// Then the centre never left the checked segment by more than
			// a few millimetres
			require.True(t, done)
			require.LessOrEqual(t, worst, 0.003, "the base drove %.1f mm off the straight segment", worst*1000)
		})
	}
}

func TestControl_BrakesStraightBeforeTurning(t *testing.T) {
	// Given a base driving east at full speed under a goal to the north
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "ros-sim.yaml"))
	require.NoError(t, err)
	d, err := New(Conf{Config: cfg})
	require.NoError(t, err)
	bc := cfg.Base
	dt := d.set.controlPeriod.Seconds()
	u := &unicycle{v: bc.MaxLinearSpeed}
	law := newDriveLaw(bc, robot.BaseGoal{Target: robot.Pose2D{X: 0, Y: 3}})

	// When the law takes over
	settled := false
	for range 3000 {
		cv, cw, ok := law.step(u.p, robot.Twist2D{V: u.v, W: u.w})
		if ok {
			break
		}
		// Then it commands no turn until the base has braked to rest
		// along its heading (a disc turning while it brakes sweeps an arc
		// no straight-path check saw)
		settled = settled || math.Abs(u.v) <= settleV
		if !settled {
			require.InDelta(t, 0, cw, 1e-12, "turn commanded at %.2f m/s", u.v)
			require.InDelta(t, 0, u.p.Y, 1e-12, "braking straight along +x")
		}
		u.step(bc, cv, cw, dt)
	}
	require.True(t, settled)
	require.InDelta(t, 0, u.p.Y-3, bc.GoalTolerance, "and it still gets there")
}

func TestProfile_BrakesInTime(t *testing.T) {
	// From the speed the profile allows at distance e, the base can stop
	// within e at the (margined) deceleration.
	for _, e := range []float64{0.001, 0.01, 0.1, 0.5, 2, 10} {
		v := profile(e, 100, 0.6, 2)
		require.LessOrEqual(t, v*v/(2*0.6), e+1e-12, "e=%g", e)
		require.InDelta(t, -v, profile(-e, 100, 0.6, 2), 1e-12, "symmetric")
	}
	require.InDelta(t, 0.8, profile(100, 0.8, 0.6, 2), 1e-12, "capped at the limit")
}
