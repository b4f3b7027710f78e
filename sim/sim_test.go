package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/kinematics"
	"github.com/robot-bridge/robot-bridge/robot"
)

func TestNewRejectsBadConfigs(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*hwconfig.Config)
		msg  string
	}{
		{"no sim section", func(c *hwconfig.Config) { c.Sim = nil }, "no sim section"},
		{"zero linear speed", func(c *hwconfig.Config) { c.Base.MaxLinearSpeed = 0 }, "base.max_linear_speed"},
		{"NaN angular accel", func(c *hwconfig.Config) { c.Base.MaxAngularAccel = math.NaN() }, "base.max_angular_accel"},
		{"negative physics rate", func(c *hwconfig.Config) { c.Sim.PhysicsHz = -1 }, "sim.physics_hz"},
		{"duplicate object id", func(c *hwconfig.Config) { c.Sim.Objects[1].ID = c.Sim.Objects[0].ID }, "unique"},
		{"arm model mismatch", func(c *hwconfig.Config) { c.Arm.LinkLengths = c.Arm.LinkLengths[:1] }, "link_lengths"},
		{"joint without velocity", func(c *hwconfig.Config) { c.Arm.Joints[2].MaxVelocity = 0 }, "elbow"},
		{"false positive rate above 1", func(c *hwconfig.Config) { c.Sim.FalsePositiveRate = 2 }, "false_positive_rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t)
			tc.mut(cfg)
			s, err := New(cfg)
			require.Nil(t, s)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	_, err := New(nil)
	require.Error(t, err)
	cfg := loadConfig(t)
	cfg.Sim = nil
	_, err = New(cfg)
	require.ErrorIs(t, err, ErrNoSimConfig)
}

func TestNewStartsAtConfiguredPose(t *testing.T) {
	s := newSim(t, startAt("dock"))
	st := s.State()
	require.Equal(t, Epoch, st.Stamp)
	require.InDelta(t, -4.0, st.Base.X, 1e-12)
	require.InDelta(t, math.Pi, math.Abs(st.Base.Theta), 1e-12)
	require.InDelta(t, 95, st.Battery.Percent, 1e-12)
	// The arm starts in the safe pose (stowed).
	require.Equal(t, []float64{0, 1.2, -2.4, 1.2}, st.JointPositions())
	require.False(t, st.Gripper.Closed)
	require.InDelta(t, 0.09, st.Gripper.Opening, 1e-12)
}

func TestWithEpochShiftsStampsOnly(t *testing.T) {
	epoch := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := newSim(t)
	b, err := New(loadConfig(t), WithEpoch(epoch))
	require.NoError(t, err)
	require.Equal(t, epoch, b.Now())
	for _, s := range []*Sim{a, b} {
		require.NoError(t, s.Command(baseCmd("go", 1, 0, 0)))
		supervise(s, time.Second, nil)
	}
	sa, sb := a.State(), b.State()
	require.Equal(t, epoch.Add(time.Second), sb.Stamp)
	require.Equal(t, sa.Base, sb.Base)
	require.Len(t, sb.Detections, len(sa.Detections))
	require.Equal(t, epoch.Add(810*time.Millisecond), sb.Detections[0].Stamp)
}

func TestBaseReachesGoalWithinLimits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		goal        robot.BaseGoal
		wantTheta   bool
		capV, capW  float64
		maxDuration time.Duration
	}{
		{name: "straight ahead", goal: robot.BaseGoal{Target: robot.Pose2D{X: 2}}, wantTheta: true, maxDuration: 10 * time.Second},
		{name: "behind and to the side, final heading 90°", goal: robot.BaseGoal{Target: robot.Pose2D{X: -2, Y: -1, Theta: math.Pi / 2}}, wantTheta: true, maxDuration: 15 * time.Second},
		{name: "per-command caps", goal: robot.BaseGoal{Target: robot.Pose2D{X: 1, Y: -2}, MaxLinear: 0.3, MaxAngular: 0.5}, wantTheta: true, capV: 0.3, capW: 0.5, maxDuration: 20 * time.Second},
		{name: "caps above the limits are clamped", goal: robot.BaseGoal{Target: robot.Pose2D{X: -3}, MaxLinear: 5, MaxAngular: 9}, wantTheta: true, maxDuration: 15 * time.Second},
		{name: "ignore final heading", goal: robot.BaseGoal{Target: robot.Pose2D{X: -1, Y: 2, Theta: 2}, IgnoreTheta: true}, maxDuration: 10 * time.Second},
		{name: "turn in place", goal: robot.BaseGoal{Target: robot.Pose2D{Theta: math.Pi}}, wantTheta: true, maxDuration: 5 * time.Second},
		{name: "to the table location", goal: robot.BaseGoal{Target: robot.Pose2D{X: 1.35, Y: 1.0}}, wantTheta: true, maxDuration: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a robot at home
			s := newSim(t)
			cfg := s.Config().Base
			capV, capW := cfg.MaxLinearSpeed, cfg.MaxAngularSpeed
			if tc.capV > 0 {
				capV, capW = tc.capV, tc.capW
			}
			// When it is sent a base goal and supervised
			goal := tc.goal
			require.NoError(t, s.Command(robot.Command{ID: "g", Kind: robot.CmdMoveBase, Base: &goal}))
			dt := s.PhysicsPeriod().Seconds()
			prev := s.State()
			maxV, maxW := 0.0, 0.0
			reached := superviseUntil(s, tc.maxDuration, func() bool {
				st := s.State()
				// Then no step exceeds a speed or acceleration limit
				require.LessOrEqual(t, math.Abs(st.Velocity.V), capV+1e-9, "linear speed at %v", st.Stamp)
				require.LessOrEqual(t, math.Abs(st.Velocity.W), capW+1e-9, "angular speed at %v", st.Stamp)
				require.LessOrEqual(t, math.Abs(st.Velocity.V-prev.Velocity.V)/dt, cfg.MaxLinearAccel+1e-6, "linear accel at %v", st.Stamp)
				require.LessOrEqual(t, math.Abs(st.Velocity.W-prev.Velocity.W)/dt, cfg.MaxAngularAccel+1e-6, "angular accel at %v", st.Stamp)
				maxV, maxW = math.Max(maxV, math.Abs(st.Velocity.V)), math.Max(maxW, math.Abs(st.Velocity.W))
				prev = st
				return !s.Truth().BaseGoal && !st.Moving(1e-9, 1e-9)
			})
			// And it arrives at rest within the tolerances
			require.True(t, reached, "goal not reached in %v; truth %+v", tc.maxDuration, s.Truth().Base)
			tr := s.Truth()
			require.LessOrEqual(t, math.Hypot(tr.Base.X-goal.Target.X, tr.Base.Y-goal.Target.Y), cfg.GoalTolerance)
			if tc.wantTheta {
				require.LessOrEqual(t, math.Abs(robot.NormalizeAngle(tr.Base.Theta-goal.Target.Theta)), robot.Radians(cfg.YawToleranceDeg))
			}
			require.True(t, hasEvent(s, EventGoalReached))
			require.Greater(t, maxV+maxW, 0.0)
			require.Zero(t, s.WatchdogFires())
		})
	}
}

func TestBaseRejectsUnreachableTargets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		goal  robot.BaseGoal
		field string
		msg   string
	}{
		{"outside the room", robot.BaseGoal{Target: robot.Pose2D{X: 7}}, "base.target", "outside the room"},
		{"against a wall", robot.BaseGoal{Target: robot.Pose2D{X: 4.9}}, "base.target", "closer than the base radius"},
		{"in the table", robot.BaseGoal{Target: robot.Pose2D{X: 2.5, Y: 1}}, "base.target", "the table"},
		{"NaN target", robot.BaseGoal{Target: robot.Pose2D{Y: math.NaN()}}, "base", "finite"},
		{"negative cap", robot.BaseGoal{Target: robot.Pose2D{X: 1}, MaxLinear: -1}, "base.max_linear", ">= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			goal := tc.goal
			err := s.Command(robot.Command{ID: "bad", Kind: robot.CmdMoveBase, Base: &goal})
			require.ErrorIs(t, err, ErrRejected)
			var re *RejectError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.field, re.Field)
			require.ErrorContains(t, err, tc.msg)
			// And nothing moves
			supervise(s, time.Second, nil)
			require.Zero(t, s.Odometer().BaseDistance)
			log := s.CommandLog()
			require.Len(t, log, 1)
			require.False(t, log[0].Accepted)
			require.Equal(t, "move_base", log[0].Kind)
		})
	}
}

func TestMalformedCommandIsRejected(t *testing.T) {
	s := newSim(t)
	err := s.Command(robot.Command{ID: "x", Kind: robot.CmdMoveBase})
	require.ErrorIs(t, err, ErrRejected)
	require.ErrorContains(t, err, "exactly one goal")
	require.Equal(t, 1, s.Counters().Rejected)
}

func TestBaseCollisionAbortsGoal(t *testing.T) {
	// Given a robot facing the table from the west, 0.45 m away
	s := newSim(t, func(c *hwconfig.Config) { c.Sim.Start = hwconfig.Location{X: 1.45, Y: 1.0} })
	// When it is sent to a goal beyond the table
	require.NoError(t, s.Command(baseCmd("through", 3.6, 1.0, 0)))
	supervise(s, 5*time.Second, nil)
	// Then the bumper stops it before the table, and the robot reports it
	tr := s.Truth()
	require.False(t, tr.BaseGoal)
	require.Less(t, tr.Base.X, 1.9-0.3+1e-9)
	require.Equal(t, 1, tr.Counters.Collisions)
	require.Contains(t, s.State().Faults, "bumper")
	require.True(t, hasEvent(s, EventCollision))
	// And a new goal away from the table clears the report
	require.NoError(t, s.Command(baseCmd("back", 0.5, 1.0, 0)))
	require.NotContains(t, s.State().Faults, "bumper")
}

func TestWatchdogStopsBaseWhenCommandsStop(t *testing.T) {
	// Given a base driving at full speed under supervision
	s := newSim(t)
	cfg := s.Config().Base
	require.NoError(t, s.Command(baseCmd("far", 4, 0, 0)))
	supervise(s, 2*time.Second, nil)
	v0 := s.State().Velocity.V
	require.Greater(t, v0, 0.5)
	lastRefresh := s.Now().Add(-s.PhysicsPeriod()) // supervise refreshes before each step

	// When refreshes stop
	dt := s.PhysicsPeriod().Seconds()
	prev := v0
	stoppedAt := time.Time{}
	for i := 0; i < 500 && stoppedAt.IsZero(); i++ {
		s.Step(s.PhysicsPeriod())
		st := s.State()
		// The deceleration never exceeds the limit
		require.LessOrEqual(t, math.Abs(st.Velocity.V-prev)/dt, cfg.MaxLinearAccel+1e-6)
		prev = st.Velocity.V
		if st.Velocity.V == 0 {
			stoppedAt = st.Stamp
		}
	}
	// Then the watchdog fires once, cancels the goal, and the base brakes at
	// its maximum deceleration to rest
	require.Equal(t, 1, s.WatchdogFires())
	require.False(t, s.Truth().BaseGoal)
	require.False(t, stoppedAt.IsZero())
	brake := time.Duration(v0 / cfg.MaxLinearAccel * float64(time.Second))
	require.LessOrEqual(t, stoppedAt.Sub(lastRefresh), s.CommandTimeout()+brake+2*s.PhysicsPeriod())
	var ev Event
	for _, e := range s.Events() {
		if e.Kind == EventWatchdog {
			ev = e
		}
	}
	require.Contains(t, ev.Detail, "base goal far")
	require.LessOrEqual(t, ev.Time.Sub(lastRefresh), s.CommandTimeout()+s.PhysicsPeriod())
	require.Greater(t, ev.Time.Sub(lastRefresh), s.CommandTimeout())
	// And the base stays at rest
	d := s.Odometer().BaseDistance
	s.Step(2 * time.Second)
	require.InDelta(t, d, s.Odometer().BaseDistance, 1e-12)
}

func TestWatchdogHoldsArm(t *testing.T) {
	// Given an arm moving slowly toward a far target
	s := newSim(t)
	require.NoError(t, s.Command(armCmd("arm", 0.2, 1.5, 0.0, 0.0, 0.0)))
	// When nobody refreshes
	s.Step(s.CommandTimeout() + 2*s.PhysicsPeriod())
	q := s.State().JointPositions()
	s.Step(time.Second)
	// Then the arm holds where the watchdog caught it
	require.Equal(t, q, s.State().JointPositions())
	require.Equal(t, 1, s.WatchdogFires())
	require.False(t, s.Truth().ArmGoal)
	require.Greater(t, q[0], 0.0)
	require.Less(t, q[0], 1.5)
}

func TestRefreshKeepsMotionAlive(t *testing.T) {
	s := newSim(t)
	require.NoError(t, s.Command(baseCmd("far", 4, 0, 0)))
	supervise(s, 3*time.Second, nil)
	require.Zero(t, s.WatchdogFires())
	require.True(t, s.Truth().BaseGoal)
}

func TestStopBrakesAndHolds(t *testing.T) {
	// Given a base and arm in motion
	s := newSim(t)
	cfg := s.Config().Base
	require.NoError(t, s.Command(baseCmd("far", -4, 0, 0)))
	supervise(s, 4*time.Second, nil)
	require.NoError(t, s.Command(armCmd("arm", 0.3, 1.0, 0.6, -1.2, 0.6)))
	supervise(s, 200*time.Millisecond, nil)
	v0 := math.Abs(s.State().Velocity.V)
	require.Greater(t, v0, 0.1)
	// When stopped
	s.Stop()
	q := s.State().JointPositions()
	// Then the base decelerates at its limit to rest, and the arm holds
	brakeSteps := int(math.Ceil(v0/cfg.MaxLinearAccel/s.PhysicsPeriod().Seconds())) + 1
	supervise(s, time.Duration(brakeSteps)*s.PhysicsPeriod(), nil)
	st := s.State()
	require.False(t, st.Moving(1e-9, 1e-9), "still moving: %+v", st.Velocity)
	require.Equal(t, q, st.JointPositions())
	require.False(t, s.Truth().BaseGoal)
	require.Zero(t, s.WatchdogFires())
	log := s.CommandLog()
	require.Equal(t, "stop", log[len(log)-1].Op)
}

func TestArmMovesWithinVelocityLimits(t *testing.T) {
	// Given the arm in the stowed pose
	s := newSim(t)
	arm := s.Config().Arm
	target := []float64{1.0, 0.3, -0.3, -0.3}
	// When asked to move at half speed
	require.NoError(t, s.Command(armCmd("reach", 0.5, target...)))
	dt := s.PhysicsPeriod().Seconds()
	prev := s.State().JointPositions()
	// Then no joint exceeds half its velocity limit, and it arrives
	ok := superviseUntil(s, 10*time.Second, func() bool {
		st := s.State()
		for i, j := range st.Joints {
			require.LessOrEqual(t, math.Abs(j.Velocity), arm.Joints[i].MaxVelocity*0.5+1e-9, j.Name)
			require.LessOrEqual(t, math.Abs(j.Position-prev[i])/dt, arm.Joints[i].MaxVelocity*0.5+1e-9, j.Name)
		}
		prev = st.JointPositions()
		return !s.Truth().ArmGoal
	})
	require.True(t, ok)
	require.Equal(t, target, s.State().JointPositions())
	// The slowest joint (shoulder_yaw, 1.0 rad at 0.5 rad/s) takes 2 s
	require.InDelta(t, 1+0.9+2.1+1.5, s.Odometer().JointTravel, 1e-9)
	require.True(t, hasEvent(s, EventArmReached))
}

func TestArmRejectsGoalsOutsideLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cmd   robot.Command
		field string
		msg   string
	}{
		{"shoulder pitch above max", armCmd("a", 1, 0, 1.7, 0, 0), "arm.positions[1]", "shoulder_pitch target 1.700 rad is outside its limits [-0.6, 1.6]"},
		{"NaN elbow", armCmd("a", 1, 0, 0, math.NaN(), 0), "arm.positions[2]", "not a finite number"},
		{"too few joints", armCmd("a", 1, 0, 0), "arm.positions", "2 positions given, the arm has 4 joints"},
		{"velocity scale above 1", armCmd("a", 1.5, 0, 0, 0, 0), "arm.velocity_scale", "(0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			err := s.Command(tc.cmd)
			var re *RejectError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.field, re.Field)
			require.ErrorContains(t, err, tc.msg)
			supervise(s, time.Second, nil)
			require.Zero(t, s.Odometer().JointTravel, "nothing moves")
		})
	}
}

func TestDuplicateCommandIDMovesOnce(t *testing.T) {
	// Given a command delivered twice (at-least-once transport)
	s := newSim(t)
	require.NoError(t, s.Command(baseCmd("once", 1, 0, 0)))
	require.True(t, superviseUntil(s, 10*time.Second, func() bool { return !s.Truth().BaseGoal }))
	d := s.Odometer().BaseDistance
	// When it arrives again after the motion finished
	require.NoError(t, s.Command(baseCmd("once", 1, 0, 0)))
	supervise(s, 2*time.Second, nil)
	// Then it is acknowledged but nothing moves again
	require.InDelta(t, d, s.Odometer().BaseDistance, 1e-12)
	log := s.CommandLog()
	require.True(t, log[1].Duplicate)
	require.Equal(t, 1, s.Counters().Duplicates)
}

// graspCup drives nothing: it starts at the table location, reaches for
// the red cup and closes the gripper on it.
func graspCup(t *testing.T, s *Sim) {
	t.Helper()
	tr := s.Truth()
	cup := objTruth(t, tr, "red_cup")
	require.NoError(t, s.Command(armTo(t, s, "reach", tr.Base, cup.Position)))
	require.True(t, superviseUntil(s, 10*time.Second, func() bool { return !s.Truth().ArmGoal }))
	require.NoError(t, s.Command(gripCmd("close", true, 0)))
	require.True(t, superviseUntil(s, 2*time.Second, func() bool { return s.State().Gripper.Closed }))
}

func TestGraspCarryAndRelease(t *testing.T) {
	// Given the robot at the table with its fingertip on the red cup
	s := newSim(t, startAt("table"))
	// When the gripper closes
	graspCup(t, s)
	// Then it holds the cup with the default force
	g := s.State().Gripper
	require.Equal(t, "red_cup", g.Holding)
	require.True(t, g.Closed)
	require.InDelta(t, 15, g.Force, 1e-9)
	require.Greater(t, g.Opening, 0.0)
	require.Equal(t, "gripper", objTruth(t, s.Truth(), "red_cup").HeldBy)

	// When the arm turns left and lifts, the cup moves with the fingertip
	require.NoError(t, s.Command(armCmd("carry", 1, 1.5, 0.6, -1.2, 0.6)))
	require.True(t, superviseUntil(s, 10*time.Second, func() bool { return !s.Truth().ArmGoal }))
	tr := s.Truth()
	cup := objTruth(t, tr, "red_cup")
	require.InDelta(t, tr.Fingertip.X, cup.Position.X, 1e-9)
	require.InDelta(t, tr.Fingertip.Z, cup.Position.Z, 1e-9)

	// When the gripper opens over the floor
	require.NoError(t, s.Command(gripCmd("open", false, 0)))
	supervise(s, time.Second, nil)
	// Then the cup drops onto the floor below the fingertip
	g = s.State().Gripper
	require.Empty(t, g.Holding)
	require.False(t, g.Closed)
	cup = objTruth(t, s.Truth(), "red_cup")
	require.Empty(t, cup.HeldBy)
	require.Empty(t, cup.Surface)
	require.InDelta(t, 0.05, cup.Position.Z, 1e-9)
	require.InDelta(t, tr.Fingertip.X, cup.Position.X, 1e-9)
	require.True(t, hasEvent(s, EventRelease))
}

func TestReleaseOverTableLandsOnTable(t *testing.T) {
	s := newSim(t, startAt("table"))
	graspCup(t, s)
	require.NoError(t, s.Command(armCmd("ready", 1, 0, 0.6, -1.2, 0.6)))
	require.True(t, superviseUntil(s, 10*time.Second, func() bool { return !s.Truth().ArmGoal }))
	require.NoError(t, s.Command(gripCmd("open", false, 0)))
	supervise(s, 100*time.Millisecond, nil)
	cup := objTruth(t, s.Truth(), "red_cup")
	require.Equal(t, "table", cup.Surface)
	require.InDelta(t, 0.80, cup.Position.Z, 1e-9)
}

func TestGripperClosesOnNothing(t *testing.T) {
	s := newSim(t)
	require.NoError(t, s.Command(gripCmd("close", true, 20)))
	supervise(s, 2*time.Second, nil)
	g := s.State().Gripper
	require.True(t, g.Closed)
	require.Empty(t, g.Holding)
	require.Zero(t, g.Opening)
	require.False(t, hasEvent(s, EventGrasp))
}

func TestGripperRejectsBadForce(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  robot.Command
		msg  string
	}{
		{"above max force", gripCmd("g", true, 50), "50 N must be in [0, 40] N"},
		{"negative", gripCmd("g", true, -1), "must be in [0, 40]"},
		{"force while opening", gripCmd("g", false, 5), "only meaningful when closing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			err := s.Command(tc.cmd)
			require.ErrorIs(t, err, ErrRejected)
			require.ErrorContains(t, err, "gripper.force")
			require.ErrorContains(t, err, tc.msg)
			supervise(s, time.Second, nil)
			require.Zero(t, s.Odometer().GripperTravel)
		})
	}
}

func TestCameraSeesTableObjects(t *testing.T) {
	// Given the robot 1.9 m in front of the table, facing it
	s := newSim(t, func(c *hwconfig.Config) {
		c.Sim.FalsePositiveRate = 0
		c.Sim.Start = hwconfig.Location{X: 0.3, Y: 0.9}
	})
	// When a camera frame is taken
	s.Step(s.PhysicsPeriod())
	st, tr := s.State(), s.Truth()
	// Then the cup and bottle are in view, the box behind-left is not
	require.ElementsMatch(t, []string{"red_cup", "blue_bottle"}, tr.InView)
	require.False(t, objTruth(t, tr, "box").InView)
	labels := []string{}
	for _, d := range st.Detections {
		labels = append(labels, d.Label)
		require.Equal(t, st.Stamp, d.Stamp)
	}
	require.ElementsMatch(t, []string{"cup", "bottle"}, labels)
	// And each box is where the pinhole model puts the object, with depth
	for _, d := range st.Detections {
		id := map[string]string{"cup": "red_cup", "bottle": "blue_bottle"}[d.Label]
		o := objTruth(t, tr, id)
		u, v, zc := s.project(tr.Base, o.Position)
		require.InDelta(t, u, (d.BBox[0]+d.BBox[2])/2, 8, d.Label)
		require.InDelta(t, v, (d.BBox[1]+d.BBox[3])/2, 8, d.Label)
		half := o.Size / 2 * 525 / zc
		require.InDelta(t, 2*half, d.BBox[2]-d.BBox[0], 12, d.Label)
		require.InDelta(t, zc, d.Depth, 0.2, d.Label)
		require.Greater(t, d.Confidence, 0.5, d.Label)
	}
}

func TestCameraConfidenceFallsWithDistance(t *testing.T) {
	conf := func(start hwconfig.Location) float64 {
		s := newSim(t, func(c *hwconfig.Config) { c.Sim.FalsePositiveRate = 0; c.Sim.Start = start })
		s.Step(s.PhysicsPeriod())
		for _, d := range s.State().Detections {
			if d.Label == "cup" {
				return d.Confidence
			}
		}
		require.FailNow(t, "cup not detected")
		return 0
	}
	far := conf(hwconfig.Location{X: -2.5, Y: 0.6})
	nearby := conf(hwconfig.Location{X: 0.5, Y: 0.8})
	require.Greater(t, nearby, far+0.1)
}

func TestCameraRespectsRangeAndRate(t *testing.T) {
	// Given a robot in the far corner, facing the table 6.5 m away
	s := newSim(t, func(c *hwconfig.Config) {
		c.Sim.FalsePositiveRate = 0
		c.Sim.Start = hwconfig.Location{X: -4.3, Y: 0.9}
	})
	s.Step(s.PhysicsPeriod())
	require.Empty(t, s.State().Detections, "beyond max_range")
	// And a robot at home: frames come at rate_hz, stamps are frame times
	s = newSim(t)
	s.Step(s.PhysicsPeriod())
	first := s.State().Detections[0].Stamp
	s.Step(150 * time.Millisecond)
	require.Equal(t, first, s.State().Detections[0].Stamp)
	s.Step(50 * time.Millisecond)
	require.Equal(t, first.Add(200*time.Millisecond), s.State().Detections[0].Stamp)
}

func TestFalsePositivesHaveLowConfidence(t *testing.T) {
	// Given an empty room and a detector that always hallucinates
	s := newSim(t, func(c *hwconfig.Config) { c.Sim.Objects = nil; c.Sim.FalsePositiveRate = 1 })
	for range 20 {
		s.Step(200 * time.Millisecond)
		st := s.State()
		// Then every frame has one plausible, low-confidence detection
		require.Len(t, st.Detections, 1)
		d := st.Detections[0]
		require.Less(t, d.Confidence, 0.4)
		require.Contains(t, []string{"cup", "bottle", "box", "chair", "bowl"}, d.Label)
		require.GreaterOrEqual(t, d.BBox[0], 0.0)
		require.LessOrEqual(t, d.BBox[2], 640.0)
		require.Greater(t, d.Depth, 0.0)
	}
	require.Empty(t, s.Truth().InView)
}

func TestBatteryDrainsMoreWithMotion(t *testing.T) {
	idle, moving := newSim(t), newSim(t)
	require.NoError(t, moving.Command(baseCmd("m", -3, 0, 0)))
	supervise(idle, 10*time.Second, nil)
	supervise(moving, 10*time.Second, nil)
	bi, bm := idle.State().Battery, moving.State().Battery
	require.Less(t, bi.Percent, 95.0, "idle drains a little")
	require.Greater(t, bi.Percent-bm.Percent, 95-bi.Percent, "motion drains more than idle")
	require.Less(t, bm.Voltage, bi.Voltage)
}

func TestEmptyBatteryDisablesMotors(t *testing.T) {
	s := newSim(t, func(c *hwconfig.Config) { c.Sim.Battery = 0.001 })
	require.NoError(t, s.Command(baseCmd("m", -3, 0, 0)))
	supervise(s, 2*time.Second, nil)
	require.Contains(t, s.State().Faults, "battery_empty")
	require.ErrorContains(t, s.Command(baseCmd("n", -2, 0, 0)), "battery is empty")
	require.True(t, hasEvent(s, EventBatteryEmpty))
}

// script drives a fixed sequence of commands with noise faults and records
// every measured state.
func script(t *testing.T, seed int64) []robot.State {
	s := newSim(t, func(c *hwconfig.Config) { c.Sim.Seed = seed })
	_, err := s.Inject(Fault{Kind: FaultSensorNoise, Probability: 0.5})
	require.NoError(t, err)
	_, err = s.Inject(Fault{Kind: FaultMotorStall, Probability: 0.3, Start: time.Second, Duration: time.Second})
	require.NoError(t, err)
	var out []robot.State
	rec := func() { out = append(out, s.State()) }
	require.NoError(t, s.Command(baseCmd("b", 1.35, 1.0, 0)))
	supervise(s, 6*time.Second, rec)
	require.NoError(t, s.Command(armCmd("a", 0.7, 0, 0.3, -0.3, -0.3)))
	supervise(s, 3*time.Second, rec)
	require.NoError(t, s.Command(gripCmd("g", true, 10)))
	supervise(s, time.Second, rec)
	return out
}

func TestSameSeedSameTrajectory(t *testing.T) {
	a, b := script(t, 7), script(t, 7)
	require.Equal(t, a, b)
	// The detections are part of it
	require.Equal(t, a[len(a)-1].Detections, b[len(b)-1].Detections)
	require.NotEmpty(t, a[len(a)-1].Detections)
}

func TestDifferentSeedDifferentDetections(t *testing.T) {
	a, c := script(t, 7), script(t, 8)
	da, dc := a[100].Detections, c[100].Detections
	require.NotEmpty(t, da)
	require.NotEqual(t, da, dc)
}

func TestStateIsADeepCopy(t *testing.T) {
	s := newSim(t)
	s.Step(s.PhysicsPeriod())
	st := s.State()
	st.Joints[0].Position = 99
	st.Gripper.Holding = "x"
	if len(st.Detections) > 0 {
		st.Detections[0].Label = "x"
	}
	st2 := s.State()
	require.NotEqual(t, 99.0, st2.Joints[0].Position)
	require.Empty(t, st2.Gripper.Holding)
	require.False(t, slices.ContainsFunc(st2.Detections, func(d robot.Detection) bool { return d.Label == "x" }))
}

func TestStepSplitsLongSteps(t *testing.T) {
	// One 3 s step equals 300 steps of 10 ms.
	a, b := newSim(t), newSim(t)
	require.NoError(t, a.Command(baseCmd("b", 1, 0, 0)))
	require.NoError(t, b.Command(baseCmd("b", 1, 0, 0)))
	a.Refresh()
	b.Refresh()
	a.Step(300 * time.Millisecond)
	for range 30 {
		b.Step(10 * time.Millisecond)
	}
	require.Equal(t, a.State(), b.State())
	a.Step(0)
	a.Step(-time.Second)
	require.Equal(t, a.State(), b.State())
}

func TestFingertipMatchesKinematics(t *testing.T) {
	s := newSim(t, startAt("table"))
	tr := s.Truth()
	want := kinematics.FKRoom(s.Config().Arm, tr.Base, []float64{0, 1.2, -2.4, 1.2})
	require.Equal(t, want, *tr.Fingertip)
}

func TestBaseOnlyRobot(t *testing.T) {
	// Given a robot without arm, gripper or camera
	s := newSim(t, func(c *hwconfig.Config) { c.Arm, c.Gripper, c.Camera = nil, nil, nil })
	// Then arm and gripper commands are refused, the base still drives
	require.ErrorContains(t, s.Command(armCmd("a", 1, 0)), "no arm")
	require.ErrorContains(t, s.Command(gripCmd("g", true, 0)), "no gripper")
	_, err := s.Inject(Fault{Kind: FaultJointStuck})
	require.ErrorContains(t, err, "needs an arm")
	require.NoError(t, s.Command(baseCmd("b", 1, 0, 0)))
	supervise(s, 2*time.Second, nil)
	st, tr := s.State(), s.Truth()
	require.Empty(t, st.Joints)
	require.Nil(t, st.Gripper)
	require.Empty(t, st.Detections)
	require.Nil(t, tr.Fingertip)
	require.Greater(t, tr.Base.X, 0.5)
}
