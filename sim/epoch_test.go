package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

// from stamps a command with the lease epoch and bridge that send it.
func from(c robot.Command, epoch uint64, bridge string) robot.Command {
	c.Epoch, c.Bridge = epoch, bridge
	return c
}

func TestEpoch_AMotionOfAnOlderEpochIsRefusedAndMovesNothing(t *testing.T) {
	s := newSim(t)
	// Given bridge b took the robot over at epoch 2 (its first word, a stop)
	s.StopFrom(2, "b")
	require.Equal(t, uint64(2), s.Epoch())
	require.Equal(t, "b", s.EpochBridge())
	// When bridge a, still at epoch 1, sends a goal
	err := s.Command(from(baseCmd("a-1", 2, 0, 0), 1, "a"))
	// Then the robot refuses it for its epoch, naming both epochs and bridges
	require.ErrorIs(t, err, ErrStaleEpoch)
	require.ErrorIs(t, err, ErrRejected)
	var re *RejectError
	require.ErrorAs(t, err, &re)
	require.Contains(t, re.Reason, "stale_epoch: ")
	require.Contains(t, re.Reason, "epoch 1 (bridge a)")
	require.Contains(t, re.Reason, "epoch 2 (bridge b)")
	// and nothing moves, however long a supervisor keeps refreshing
	supervise(s, 2*time.Second, nil)
	require.Zero(t, s.Odometer().BaseDistance)
	require.False(t, s.Truth().BaseGoal)
	c := s.Counters()
	require.Equal(t, 1, c.StaleEpoch)
	require.Equal(t, 1, c.Rejected)
	require.Zero(t, c.Accepted)
	// and the command log shows the refusal with its epoch and bridge
	log := s.CommandLog()
	require.Len(t, log, 2)
	require.Equal(t, LogEntry{Time: log[0].Time, Op: "stop", Accepted: true, Epoch: 2, Bridge: "b"}, log[0])
	require.Equal(t, "a-1", log[1].ID)
	require.False(t, log[1].Accepted)
	require.Equal(t, uint64(1), log[1].Epoch)
	require.Equal(t, "a", log[1].Bridge)
	require.Contains(t, log[1].Error, "stale_epoch")
	// A re-sent id of an accepted command is refused too once it is stale.
	require.NoError(t, s.Command(from(baseCmd("b-1", 0.5, 0, 0), 2, "b")))
	s.StopFrom(3, "c")
	require.ErrorIs(t, s.Command(from(baseCmd("b-1", 0.5, 0, 0), 2, "b")), ErrStaleEpoch)
}

func TestEpoch_ASameOrNewerEpochIsAcceptedAndRaisesTheNewest(t *testing.T) {
	s := newSim(t)
	// A robot that never saw an epoch accepts epoch 0 (a bridge on its own).
	require.NoError(t, s.Command(baseCmd("solo-1", 0.3, 0, 0)))
	require.Zero(t, s.Epoch())
	require.NoError(t, s.Command(from(baseCmd("a-1", 0.5, 0, 0), 4, "a")))
	require.Equal(t, uint64(4), s.Epoch())
	require.NoError(t, s.Command(from(baseCmd("a-2", 0.6, 0, 0), 4, "a")), "the same epoch")
	// Once an epoch was seen, epoch 0 is older.
	require.ErrorIs(t, s.Command(baseCmd("solo-2", 0.3, 0, 0)), ErrStaleEpoch)
	require.Equal(t, uint64(4), s.Truth().Epoch)
	require.Equal(t, "a", s.Truth().EpochBridge)
}

func TestEpoch_AStopOfAnOlderEpochStillStops(t *testing.T) {
	s := newSim(t)
	require.NoError(t, s.Command(from(baseCmd("b-1", 3, 0, 0), 2, "b")))
	supervise(s, 500*time.Millisecond, nil)
	require.True(t, s.Truth().BaseGoal)
	// When the old owner a (epoch 1) sends a stop
	s.StopFrom(1, "a")
	// Then the robot stops anyway, and the newest epoch stays b's
	require.False(t, s.Truth().BaseGoal)
	supervise(s, 2*time.Second, nil)
	require.Less(t, s.Truth().Velocity.V, 1e-6)
	require.Equal(t, uint64(2), s.Epoch())
	require.Equal(t, "b", s.EpochBridge())
	last := s.CommandLog()[len(s.CommandLog())-1]
	require.Equal(t, "stop", last.Op)
	require.Equal(t, uint64(1), last.Epoch)
	require.Equal(t, "a", last.Bridge)
	// and b still commands it
	require.NoError(t, s.Command(from(baseCmd("b-2", 1, 0, 0), 2, "b")))
}

func TestEpoch_AStopOfANewerEpochFencesTheOlderBridgesMotion(t *testing.T) {
	s := newSim(t)
	// Given bridge a drives the robot at epoch 1
	require.NoError(t, s.Command(from(baseCmd("a-1", 3, 0, 0), 1, "a")))
	supervise(s, 500*time.Millisecond, nil)
	// When bridge b takes it over: a stop at epoch 2
	s.StopFrom(2, "b")
	require.False(t, s.Truth().BaseGoal)
	// Then a's next goal is refused, and b's accepted
	require.ErrorIs(t, s.Command(from(baseCmd("a-2", 3, 0, 0), 1, "a")), ErrStaleEpoch)
	require.False(t, s.Truth().BaseGoal)
	require.NoError(t, s.Command(from(baseCmd("b-1", 0, 1, 0), 2, "b")))
	require.True(t, s.Truth().BaseGoal)
}

func TestEpoch_ARefreshOfAnOlderEpochLetsTheWatchdogFire(t *testing.T) {
	s := newSim(t)
	// Given bridge b drives the robot at epoch 2
	require.NoError(t, s.Command(from(baseCmd("b-1", 3, 0, 0), 2, "b")))
	// When only the old owner a keeps refreshing (epoch 1)
	fed := 0
	for range 2 * s.CommandTimeout() / s.PhysicsPeriod() {
		if s.RefreshFrom(1, "a") {
			fed++
		}
		s.Step(s.PhysicsPeriod())
	}
	// Then none of its refreshes fed the watchdog, which stopped the motion
	require.Zero(t, fed)
	require.Equal(t, 1, s.WatchdogFires())
	require.False(t, s.Truth().BaseGoal)
	c := s.Counters()
	require.Positive(t, c.StaleRefreshes)
	require.Zero(t, c.Refreshes)
	// while b's refreshes (its epoch, or a newer one) feed it
	require.NoError(t, s.Command(from(baseCmd("b-2", 3, 0, 0), 2, "b")))
	for range 2 * s.CommandTimeout() / s.PhysicsPeriod() {
		require.True(t, s.RefreshFrom(2, "b"))
		s.Step(s.PhysicsPeriod())
	}
	require.Equal(t, 1, s.WatchdogFires())
	require.True(t, s.Truth().BaseGoal)
}

func TestEpoch_BridgeOfflineStopsAndSaysWhy(t *testing.T) {
	s := newSim(t)
	require.NoError(t, s.Command(from(baseCmd("a-1", 3, 0, 0), 1, "a")))
	s.BridgeOffline("a")
	require.False(t, s.Truth().BaseGoal)
	require.True(t, hasEvent(s, EventBridgeOffline))
	last := s.CommandLog()[len(s.CommandLog())-1]
	require.Equal(t, "stop", last.Op)
	require.Equal(t, "a", last.Bridge)
	require.Contains(t, last.Reason, "bridge a")
	require.Equal(t, uint64(1), s.Epoch(), "a will raises no epoch")
}

// A robot of a bridge on its own: nothing about epochs shows anywhere.
func TestEpoch_NoEpochChangesNothing(t *testing.T) {
	s := newSim(t)
	require.NoError(t, s.Command(baseCmd("solo-1", 0.3, 0, 0)))
	s.Refresh()
	s.Stop()
	for _, e := range s.CommandLog() {
		require.Zero(t, e.Epoch)
		require.Empty(t, e.Bridge)
	}
	c := s.Counters()
	require.Equal(t, 1, c.Refreshes)
	require.Zero(t, c.StaleEpoch+c.StaleRefreshes)
}
