package sim

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

func TestFaultMotorStall(t *testing.T) {
	// Given a stalled base motor
	s := newSim(t)
	id, err := s.Inject(Fault{Kind: FaultMotorStall})
	require.NoError(t, err)
	// When the base is commanded to move
	require.NoError(t, s.Command(baseCmd("go", 2, 0, 0)))
	supervise(s, 2*time.Second, nil)
	// Then it does not move, reports zero speed and a motor_stall fault
	st := s.State()
	require.Zero(t, s.Odometer().BaseDistance)
	require.Zero(t, s.Odometer().BaseRotation)
	require.Zero(t, st.Velocity.V)
	require.Contains(t, st.Faults, "motor_stall")
	require.True(t, s.Truth().BaseGoal, "the controller still tries")
	// When the fault is cleared, the base drives on
	require.NoError(t, s.ClearFault(id))
	require.NotContains(t, s.State().Faults, "motor_stall")
	supervise(s, time.Second, nil)
	require.Greater(t, s.Odometer().BaseDistance, 0.0)
}

func TestFaultMotorStallProbabilityAndWindow(t *testing.T) {
	// Given an intermittent stall that starts after 1 s and lasts 1 s
	s := newSim(t)
	_, err := s.Inject(Fault{Kind: FaultMotorStall, Probability: 0.5, Start: time.Second, Duration: time.Second})
	require.NoError(t, err)
	require.Equal(t, FaultPending, s.Faults()[0].State)
	require.NoError(t, s.Command(baseCmd("go", -4, 0, 0)))
	supervise(s, time.Second-s.PhysicsPeriod(), nil)
	require.Zero(t, s.Faults()[0].Triggers, "pending faults never fire")
	require.Equal(t, FaultPending, s.Faults()[0].State)
	supervise(s, time.Second+s.PhysicsPeriod(), nil)
	st := s.Faults()[0]
	// Then it fired on about half the 100 steps of its window, then expired
	require.Equal(t, FaultExpired, st.State)
	require.InDelta(t, 50, st.Triggers, 20)
	require.NotContains(t, s.State().Faults, "motor_stall")
}

func TestFaultJointStuck(t *testing.T) {
	// Given a stuck elbow
	s := newSim(t)
	_, err := s.Inject(Fault{Kind: FaultJointStuck, Joint: "elbow"})
	require.NoError(t, err)
	q0 := s.State().JointPositions()
	// When every joint is commanded
	require.NoError(t, s.Command(armCmd("move", 1, 0.5, 0.6, -1.2, 0.6)))
	supervise(s, 3*time.Second, nil)
	// Then the others arrive, the elbow has not moved, the goal stays
	// open and the robot reports the stuck joint
	q := s.State().JointPositions()
	require.Equal(t, []float64{0.5, 0.6, q0[2], 0.6}, q)
	require.True(t, s.Truth().ArmGoal)
	require.Equal(t, []string{"joint_stuck:elbow"}, s.State().Faults)
	// And a stuck "all" freezes every joint
	s2 := newSim(t)
	_, err = s2.Inject(Fault{Kind: FaultJointStuck})
	require.NoError(t, err)
	require.NoError(t, s2.Command(armCmd("move", 1, 0.5, 0.6, -1.2, 0.6)))
	supervise(s2, time.Second, nil)
	require.Zero(t, s2.Odometer().JointTravel)
	require.Len(t, s2.State().Faults, 4)
}

func TestFaultValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     Fault
		field string
		msg   string
	}{
		{"unknown kind", Fault{Kind: "meteor"}, "kind", "allowed: motor_stall, joint_stuck"},
		{"missing kind", Fault{}, "kind", "is required"},
		{"probability above 1", Fault{Kind: FaultDropState, Probability: 1.5}, "probability", "(0, 1]"},
		{"negative start", Fault{Kind: FaultDropState, Start: -time.Second}, "start", ">= 0"},
		{"unknown joint", Fault{Kind: FaultJointStuck, Joint: "knee"}, "joint", "allowed: all, shoulder_yaw, shoulder_pitch, elbow, wrist"},
		{"joint on the wrong kind", Fault{Kind: FaultMotorStall, Joint: "elbow"}, "joint", "only applies to kind joint_stuck"},
		{"negative delay", Fault{Kind: FaultDelayAck, Delay: -1}, "delay", "(0, 1m]"},
		{"NaN noise", Fault{Kind: FaultSensorNoise, OdomStd: math.NaN()}, "odom_std", "must be in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			id, err := s.Inject(tc.f)
			require.Empty(t, id)
			require.ErrorIs(t, err, ErrInvalidFault)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
			require.ErrorContains(t, err, tc.msg)
			require.Empty(t, s.Faults())
		})
	}
	s := newSim(t)
	require.ErrorIs(t, s.ClearFault("f9"), ErrUnknownFault)
}

func TestFaultRobotEStop(t *testing.T) {
	// Given a base driving fast and an arm moving
	s := newSim(t)
	require.NoError(t, s.Command(baseCmd("go", -4, 0, 0)))
	supervise(s, 4*time.Second, nil)
	require.NoError(t, s.Command(armCmd("arm", 0.2, 1, 0.6, -1.2, 0.6)))
	supervise(s, 100*time.Millisecond, nil)
	require.Greater(t, math.Abs(s.State().Velocity.V), 0.3)
	// When a spurious robot e-stop fires
	id, err := s.Inject(Fault{Kind: FaultRobotEStop})
	require.NoError(t, err)
	s.Step(s.PhysicsPeriod())
	// Then the robot stops at once and reports it
	st := s.State()
	require.True(t, st.EStop)
	require.Contains(t, st.Faults, "estop")
	require.False(t, st.Moving(0, 0))
	d, q := s.Odometer(), st.JointPositions()
	supervise(s, time.Second, nil)
	require.InDelta(t, d.BaseDistance, s.Odometer().BaseDistance, 1e-12)
	require.Equal(t, q, s.State().JointPositions())
	// And commands are refused while it is engaged
	err = s.Command(baseCmd("again", 0, 0, 0))
	require.ErrorIs(t, err, ErrRobotEStop)
	require.ErrorIs(t, err, ErrRejected)
	s.Stop() // stop always works
	// When the fault clears, the robot accepts commands again
	require.NoError(t, s.ClearFault(id))
	require.False(t, s.State().EStop)
	require.NoError(t, s.Command(baseCmd("again", 0, 0, 0)))
	require.True(t, hasEvent(s, EventEStop))
	require.True(t, hasEvent(s, EventEStopReleased))
}

func TestFaultGripperSlip(t *testing.T) {
	// Given the gripper holding the cup, lifted above the table
	s := newSim(t, startAt("table"))
	graspCup(t, s)
	require.NoError(t, s.Command(armCmd("lift", 1, 0, 0.6, -1.2, 0.6)))
	require.True(t, superviseUntil(s, 10*time.Second, func() bool { return !s.Truth().ArmGoal }))
	// When the grip slips
	_, err := s.Inject(Fault{Kind: FaultGripperSlip})
	require.NoError(t, err)
	s.Step(s.PhysicsPeriod())
	// Then the gripper is closed on nothing and the cup lies on the table
	g := s.State().Gripper
	require.Empty(t, g.Holding)
	require.True(t, g.Closed)
	require.Zero(t, g.Opening)
	cup := objTruth(t, s.Truth(), "red_cup")
	require.Empty(t, cup.HeldBy)
	require.Equal(t, "table", cup.Surface)
	require.InDelta(t, 0.80, cup.Position.Z, 1e-9)
	require.True(t, hasEvent(s, EventSlip))
}

func TestFaultSensorNoise(t *testing.T) {
	s := newSim(t, func(c *hwconfig.Config) { c.Sim.FalsePositiveRate = 0; c.Sim.Start = hwconfig.Location{X: 0.3, Y: 0.9} })
	// Given a clean sensor, the measured state is the truth
	s.Step(s.PhysicsPeriod())
	require.Equal(t, s.Truth().Base, s.State().Base)
	boxErr := func() float64 {
		// mean |bbox centre - projected centre| over 20 frames
		sum, n := 0.0, 0
		for range 20 {
			s.Step(200 * time.Millisecond)
			st, tr := s.State(), s.Truth()
			for _, d := range st.Detections {
				if d.Label != "cup" {
					continue
				}
				u, _, _ := s.project(tr.Base, objTruth(t, tr, "red_cup").Position)
				sum += math.Abs((d.BBox[0]+d.BBox[2])/2 - u)
				n++
			}
		}
		require.Positive(t, n)
		return sum / float64(n)
	}
	clean := boxErr()
	// When sensor noise is injected
	_, err := s.Inject(Fault{Kind: FaultSensorNoise, OdomStd: 0.1, JointStd: 0.05, DetectionPx: 30})
	require.NoError(t, err)
	noisy := boxErr()
	// Then odometry, joints and detections are off by about the given std-devs
	var poseErr, jointErr float64
	const n = 200
	for range n {
		s.Step(s.PhysicsPeriod())
		st, tr := s.State(), s.Truth()
		poseErr += math.Abs(st.Base.X - tr.Base.X)
		jointErr += math.Abs(st.Joints[1].Position - tr.Joints[1].Position)
	}
	// E|N(0, σ)| = 0.8 σ
	require.InDelta(t, 0.08, poseErr/n, 0.03)
	require.InDelta(t, 0.04, jointErr/n, 0.015)
	require.Greater(t, noisy, 3*clean)
	// And the truth never moved
	require.Zero(t, s.Odometer().BaseDistance)
}

func TestFaultMessageLevelKinds(t *testing.T) {
	s := newSim(t)
	require.Zero(t, s.AckDelay())
	require.False(t, s.LinkDrop())
	require.False(t, s.LinkDownActive())
	_, err := s.Inject(Fault{Kind: FaultDelayAck, Delay: 300 * time.Millisecond})
	require.NoError(t, err)
	_, err = s.Inject(Fault{Kind: FaultLinkDown, Start: time.Second})
	require.NoError(t, err)
	require.Equal(t, 300*time.Millisecond, s.AckDelay())
	require.False(t, s.LinkDownActive(), "link_down is still pending")
	s.Step(time.Second)
	require.True(t, s.LinkDownActive())
	require.True(t, s.LinkDrop())
	require.Equal(t, 2, s.ClearFaults())
	require.Zero(t, s.AckDelay())
	require.False(t, s.LinkDownActive())
	require.Empty(t, s.Faults())
}

// runner runs Sim.Run on a fake clock and records publications.
type runner struct {
	s      *Sim
	clk    *clockwork.FakeClock
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	states []robot.State
}

func startRunner(t *testing.T, s *Sim) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{s: s, clk: clockwork.NewFakeClockAt(Epoch), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		s.Run(ctx, r.clk, func(st robot.State) {
			r.mu.Lock()
			r.states = append(r.states, st)
			r.mu.Unlock()
		})
	}()
	require.NoError(t, r.clk.BlockUntilContext(ctx, 1))
	t.Cleanup(r.stop)
	return r
}

// advance moves the fake clock n physics periods, one at a time, waiting
// for each step to be taken.
func (r *runner) advance(t *testing.T, n int) {
	t.Helper()
	for range n {
		want := r.s.Counters().Steps + 1
		r.clk.Advance(r.s.PhysicsPeriod())
		require.Eventually(t, func() bool { return r.s.Counters().Steps >= want }, 5*time.Second, 50*time.Microsecond)
	}
}

func (r *runner) stop() {
	r.cancel()
	<-r.done
}

func (r *runner) published() []robot.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]robot.State(nil), r.states...)
}

func TestRunStepsAndPublishesAtConfiguredRates(t *testing.T) {
	// Given a sim at 100 Hz physics and 50 Hz state, run on a fake clock
	s := newSim(t)
	r := startRunner(t, s)
	// When one second passes
	r.advance(t, 100)
	r.stop()
	// Then it stepped 100 times and published 50 states plus the first
	require.Equal(t, 100, s.Counters().Steps)
	states := r.published()
	require.Len(t, states, 51)
	require.Equal(t, Epoch, states[0].Stamp)
	require.Equal(t, Epoch.Add(time.Second), states[50].Stamp)
	for i := 1; i < len(states); i++ {
		require.Equal(t, 20*time.Millisecond, states[i].Stamp.Sub(states[i-1].Stamp))
	}
}

func TestFaultDropStateDropsPublications(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          float64
		minN, maxN int
	}{
		{"always", 1, 1, 1},
		{"half", 0.5, 10, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given publications dropped with probability p after the first
			s := newSim(t)
			r := startRunner(t, s)
			_, err := s.Inject(Fault{Kind: FaultDropState, Probability: tc.p})
			require.NoError(t, err)
			// When one second passes
			r.advance(t, 100)
			r.stop()
			// Then only the expected share of the 50 states arrives
			n := len(r.published())
			require.GreaterOrEqual(t, n, tc.minN)
			require.LessOrEqual(t, n, tc.maxN)
			require.Equal(t, 51-n, s.Counters().StatesDropped)
			// And physics went on regardless
			require.Equal(t, 100, s.Counters().Steps)
		})
	}
}

func TestFaultLinkDownSilencesRun(t *testing.T) {
	// Given a link that goes down after 200 ms for 300 ms
	s := newSim(t)
	r := startRunner(t, s)
	_, err := s.Inject(Fault{Kind: FaultLinkDown, Start: 200 * time.Millisecond, Duration: 300 * time.Millisecond})
	require.NoError(t, err)
	r.advance(t, 100)
	r.stop()
	// Then no state stamped inside the outage arrives, and states resume
	states := r.published()
	for _, st := range states {
		in := !st.Stamp.Before(Epoch.Add(200*time.Millisecond)) && st.Stamp.Before(Epoch.Add(500*time.Millisecond))
		require.False(t, in, "state at %v published during the outage", st.Stamp)
	}
	require.Len(t, states, 51-15)
	require.Equal(t, Epoch.Add(time.Second), states[len(states)-1].Stamp)
}

func TestWatchdogStopsBaseUnderRun(t *testing.T) {
	// Given a base goal under a real-time runner and no refreshes at all
	s := newSim(t)
	r := startRunner(t, s)
	require.NoError(t, s.Command(baseCmd("go", -4, 0, 0)))
	// When the command timeout passes
	r.advance(t, int(s.CommandTimeout()/s.PhysicsPeriod())+1)
	// Then the watchdog has fired and the base comes to rest
	require.Equal(t, 1, s.WatchdogFires())
	r.advance(t, 100)
	require.False(t, s.State().Moving(0, 0))
}
