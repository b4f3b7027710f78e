package inproc

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
)

var _ safety.Driver = (*Driver)(nil)

type harness struct {
	t   *testing.T
	sim *sim.Sim
	clk *clockwork.FakeClock
	drv *Driver
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	s, err := sim.New(cfg)
	require.NoError(t, err)
	h := &harness{t: t, sim: s, clk: clockwork.NewFakeClockAt(sim.Epoch)}
	h.drv = New(s, Conf{Clock: h.clk})
	return h
}

func (h *harness) start() {
	h.t.Helper()
	ctx := context.Background()
	ch, unsub := h.drv.Subscribe()
	defer unsub()
	require.NoError(h.t, h.drv.Start(ctx))
	h.t.Cleanup(func() { require.NoError(h.t, h.drv.Close()) })
	// The runner publishes once at start and then waits on its ticker.
	<-ch
	require.NoError(h.t, h.clk.BlockUntilContext(ctx, 1))
}

// advance moves the fake clock n physics periods, one at a time, waiting
// for each step.
func (h *harness) advance(n int) {
	h.t.Helper()
	for range n {
		want := h.sim.Counters().Steps + 1
		h.clk.Advance(h.sim.PhysicsPeriod())
		require.Eventually(h.t, func() bool { return h.sim.Counters().Steps >= want }, 5*time.Second, 50*time.Microsecond)
	}
}

// supervise advances n periods, refreshing through the driver each period.
func (h *harness) supervise(n int) {
	h.t.Helper()
	for range n {
		require.NoError(h.t, h.drv.Refresh(context.Background()))
		h.advance(1)
	}
}

func moveBase(id string, x float64) robot.Command {
	return robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: x}}}
}

func TestDriverRunsTheSimulator(t *testing.T) {
	// Given a started driver
	h := newHarness(t)
	require.False(t, h.drv.LinkUp(), "not started yet")
	h.start()
	require.True(t, h.drv.LinkUp())
	st, ok := h.drv.Latest()
	require.True(t, ok)
	require.Equal(t, sim.Epoch, st.Stamp)
	// When a base goal is sent and supervised for a second
	require.NoError(t, h.drv.Send(context.Background(), moveBase("go", 2)))
	h.supervise(100)
	// Then subscribers see the robot move, stamped with sim time
	st, ok = h.drv.Latest()
	require.True(t, ok)
	require.Equal(t, sim.Epoch.Add(time.Second), st.Stamp)
	require.Greater(t, st.Base.X, 0.05)
	require.Greater(t, st.Velocity.V, 0.0)
	// When stopped, the robot comes to rest
	require.NoError(t, h.drv.Stop(context.Background()))
	h.supervise(200)
	st, _ = h.drv.Latest()
	require.False(t, st.Moving(0, 0))
	require.Zero(t, h.sim.WatchdogFires())
}

func TestDriverPassesRejectionsThrough(t *testing.T) {
	h := newHarness(t)
	h.start()
	err := h.drv.Send(context.Background(), moveBase("far", 9))
	require.ErrorIs(t, err, sim.ErrRejected)
	var re *sim.RejectError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "base.target", re.Field)
}

func TestDriverNotStartedIsLinkDown(t *testing.T) {
	h := newHarness(t)
	require.ErrorIs(t, h.drv.Send(context.Background(), moveBase("go", 1)), ErrLinkDown)
	require.ErrorIs(t, h.drv.Refresh(context.Background()), ErrLinkDown)
	require.NoError(t, h.drv.Stop(context.Background()), "stop always reaches a local robot")
	require.Empty(t, filterCommands(h.sim.CommandLog()))
	require.NoError(t, h.drv.Close(), "closing an unstarted driver is a no-op")
}

func TestDriverLinkDown(t *testing.T) {
	// Given a robot driving under supervision
	h := newHarness(t)
	h.start()
	require.NoError(t, h.drv.Send(context.Background(), moveBase("go", 4)))
	h.supervise(100)
	// When the link goes down
	id, err := h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
	require.NoError(t, err)
	// Then every call fails with ErrLinkDown and LinkUp says so
	require.False(t, h.drv.LinkUp())
	require.ErrorIs(t, h.drv.Send(context.Background(), moveBase("again", 1)), ErrLinkDown)
	require.ErrorIs(t, h.drv.Refresh(context.Background()), ErrLinkDown)
	require.ErrorIs(t, h.drv.Stop(context.Background()), ErrLinkDown)
	// And no state arrives
	before, _ := h.drv.Latest()
	h.advance(int(h.sim.CommandTimeout()/h.sim.PhysicsPeriod()) + 200)
	after, _ := h.drv.Latest()
	require.Equal(t, before.Stamp, after.Stamp)
	// And the robot's own watchdog stops it, as on a real robot
	require.Equal(t, 1, h.sim.WatchdogFires())
	require.False(t, h.sim.Truth().BaseGoal)
	require.False(t, h.sim.State().Moving(0, 0))
	// When the link comes back, state flows again
	require.NoError(t, h.sim.ClearFault(id))
	require.True(t, h.drv.LinkUp())
	h.advance(2)
	after, _ = h.drv.Latest()
	require.Equal(t, h.sim.Now(), after.Stamp)
}

func filterCommands(log []sim.LogEntry) []sim.LogEntry {
	var out []sim.LogEntry
	for _, e := range log {
		if e.Op == "command" {
			out = append(out, e)
		}
	}
	return out
}

func TestDriverDelayAck(t *testing.T) {
	// Given acceptance delayed by 300 ms
	h := newHarness(t)
	h.start()
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultDelayAck, Delay: 300 * time.Millisecond})
	require.NoError(t, err)
	// When a command is sent
	res := make(chan error, 1)
	go func() { res <- h.drv.Send(context.Background(), moveBase("slow", 1)) }()
	// Then it waits on the clock (ticker + delay timer) and has not arrived
	require.NoError(t, h.clk.BlockUntilContext(context.Background(), 2))
	require.Empty(t, filterCommands(h.sim.CommandLog()))
	select {
	case err := <-res:
		t.Fatalf("Send returned before the delay passed: %v", err)
	default:
	}
	// When 300 ms pass, it is accepted
	h.clk.Advance(300 * time.Millisecond)
	require.NoError(t, <-res)
	log := filterCommands(h.sim.CommandLog())
	require.Len(t, log, 1)
	require.True(t, log[0].Accepted)
}

func TestDriverStopDoesNotWaitBehindDelayedSend(t *testing.T) {
	// Given a command stuck waiting for a delayed acceptance
	h := newHarness(t)
	h.start()
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultDelayAck, Delay: time.Minute})
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() { res <- h.drv.Send(context.Background(), moveBase("late", 1)) }()
	require.NoError(t, h.clk.BlockUntilContext(context.Background(), 2))
	// When Stop is called, it returns without the clock moving at all
	require.NoError(t, h.drv.Stop(context.Background()))
	// And when the delay finally passes, the stale command is dropped, not
	// started after the stop
	h.clk.Advance(time.Minute)
	require.ErrorIs(t, <-res, ErrSuperseded)
	require.Empty(t, filterCommands(h.sim.CommandLog()))
	h.supervise(50)
	require.Zero(t, h.sim.Odometer().BaseDistance)
}

func TestDriverSendHonoursContextDuringDelay(t *testing.T) {
	h := newHarness(t)
	h.start()
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultDelayAck, Delay: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- h.drv.Send(ctx, moveBase("late", 1)) }()
	require.NoError(t, h.clk.BlockUntilContext(context.Background(), 2))
	cancel()
	require.ErrorIs(t, <-res, context.Canceled)
	require.Empty(t, filterCommands(h.sim.CommandLog()))
	require.ErrorIs(t, h.drv.Send(ctx, moveBase("late", 1)), context.Canceled)
}

func TestDriverDropStateThinsPublications(t *testing.T) {
	h := newHarness(t)
	h.start()
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultDropState})
	require.NoError(t, err)
	before, _ := h.drv.Latest()
	h.advance(50)
	after, _ := h.drv.Latest()
	require.Equal(t, before.Stamp, after.Stamp, "every publication dropped")
	require.Equal(t, 25, h.sim.Counters().StatesDropped)
	require.True(t, h.drv.LinkUp(), "dropped states are not a link failure by themselves")
}

func TestDriverCloseStopsRobot(t *testing.T) {
	// Given a robot in motion
	h := newHarness(t)
	require.NoError(t, h.drv.Start(context.Background()))
	require.NoError(t, h.clk.BlockUntilContext(context.Background(), 1))
	require.NoError(t, h.drv.Send(context.Background(), moveBase("go", 3)))
	h.supervise(100)
	// When the driver closes
	require.NoError(t, h.drv.Close())
	require.NoError(t, h.drv.Close())
	// Then the last thing it did was command a stop, and the link is down
	log := h.sim.CommandLog()
	require.Equal(t, "stop", log[len(log)-1].Op)
	require.False(t, h.sim.Truth().BaseGoal)
	require.False(t, h.drv.LinkUp())
	require.ErrorIs(t, h.drv.Send(context.Background(), moveBase("go", 3)), ErrLinkDown)
	require.ErrorIs(t, h.drv.Start(context.Background()), ErrAlreadyStarted)
}
