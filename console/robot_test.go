package console

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/robot"
)

func restingState() robot.State {
	return robot.State{
		Base: robot.Pose2D{X: 1.2, Y: 0.4, Theta: 1.5707963}, Battery: robot.Battery{Percent: 87, Known: true},
		Gripper: &robot.Gripper{Opening: 0.09},
	}
}

func movingState() robot.State {
	st := restingState()
	st.Velocity.V = 0.3
	return st
}

// fakeSource is the robot as the bridge knows it: the newest state with
// its receive time on the fake clock, and the link.
type fakeSource struct {
	clock  *clockwork.FakeClock
	states chan robot.State

	mu   sync.Mutex
	st   robot.State
	have bool
	at   time.Time
	up   bool
}

func (s *fakeSource) observe() robot.Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return robot.Observation{State: s.st, Have: s.have, ReceivedAt: s.at, Now: s.clock.Now(), LinkUp: s.up, StaleAfter: 500 * time.Millisecond}
}

// arrive is a state arriving now; it returns once the feed has taken it.
func (s *fakeSource) arrive(st robot.State) {
	s.mu.Lock()
	s.st, s.have, s.at = st, true, s.clock.Now()
	s.mu.Unlock()
	s.states <- st
}

func (s *fakeSource) setLink(up bool) {
	s.mu.Lock()
	s.up = up
	s.mu.Unlock()
}

type feedFixture struct {
	t     *testing.T
	src   *fakeSource
	clock *clockwork.FakeClock
	sub   <-chan events.Event
}

// startFeed runs a RobotFeed over a fake source until the test ends, once
// its ticker is armed.
func startFeed(t *testing.T) *feedFixture {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	src := &fakeSource{clock: clock, states: make(chan robot.State), up: true}
	bus := events.New(64)
	sub, unsub := bus.Subscribe(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RobotFeed{Bus: bus, States: src.states, Observe: src.observe, Clock: clock}.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done; unsub() })
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	require.NoError(t, clock.BlockUntilContext(bctx, 1), "the feed never armed its ticker")
	return &feedFixture{t: t, src: src, clock: clock, sub: sub}
}

// next is the next state event's view; the 10 s bound only keeps a broken
// feed from hanging the test.
func (f *feedFixture) next() RobotView {
	f.t.Helper()
	select {
	case e := <-f.sub:
		require.Equal(f.t, events.TypeState, e.Type)
		v, ok := e.Data.(RobotView)
		require.True(f.t, ok, "state event data is %T", e.Data)
		return v
	case <-time.After(10 * time.Second):
		f.t.Fatal("no state event")
		return RobotView{}
	}
}

// TestConsole_StateOlderThanTimeoutMarkedStale: the console's state
// events were published only when a state arrived, each saying "stopped"
// or "moving", so a robot that went silent stayed "stopped" on the page.
// The feed now looks between states and marks a state older than the
// state timeout stale.
func TestConsole_StateOlderThanTimeoutMarkedStale(t *testing.T) {
	f := startFeed(t)

	// Given a state at rest that has just arrived
	f.src.arrive(restingState())
	v := f.next()
	require.Equal(t, robot.ConditionStopped, v.Condition)
	require.False(t, v.Stale)
	require.Equal(t, "stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%", v.Summary)

	// When no state arrives for longer than the 500 ms state timeout
	f.clock.Advance(750 * time.Millisecond)
	// Then, with no new state, an event marks the old one stale
	v = f.next()
	require.Equal(t, robot.ConditionStale, v.Condition)
	require.True(t, v.Stale)
	require.EqualValues(t, 750, v.StateAgeMS)
	require.EqualValues(t, 500, v.StaleAfterMS)
	require.True(t, v.LinkUp)
	require.Equal(t, "last seen at (1.20, 0.40) facing 90° 0.7 s ago (no state since), gripper open, battery 87%", v.Summary)
	require.NotNil(t, v.State, "the page still draws where the robot was last seen")

	// When the silence goes on for another refresh interval
	f.clock.Advance(DefaultRefresh)
	// Then the age shown keeps up
	v = f.next()
	require.Equal(t, robot.ConditionStale, v.Condition)
	require.EqualValues(t, 1750, v.StateAgeMS)
	require.Contains(t, v.Summary, "1.7 s ago (no state since)")

	// When a state arrives again, then it is current again at once
	f.src.arrive(restingState())
	v = f.next()
	require.Equal(t, robot.ConditionStopped, v.Condition)
	require.False(t, v.Stale)
}

func TestConsole_SilentMidMotionIsNeverShownStopped(t *testing.T) {
	f := startFeed(t)
	// Given a robot moving when it went silent
	f.src.arrive(movingState())
	require.Equal(t, robot.ConditionMoving, f.next().Condition)
	// When the state timeout passes with no state
	f.clock.Advance(time.Second)
	// Then it is shown last seen moving, not stopped and not moving now
	v := f.next()
	require.Equal(t, robot.ConditionStale, v.Condition)
	require.Equal(t, "last seen moving at (1.20, 0.40) facing 90° 1.0 s ago (no state since), gripper open, battery 87%", v.Summary)
}

func TestConsole_LinkDownShownAtOnce(t *testing.T) {
	f := startFeed(t)
	// Given a current state
	f.src.arrive(restingState())
	require.Equal(t, robot.ConditionStopped, f.next().Condition)
	// When the link goes down, within the state timeout
	f.src.setLink(false)
	f.clock.Advance(250 * time.Millisecond)
	// Then the next look says the link is down, not "stopped"
	v := f.next()
	require.Equal(t, robot.ConditionLinkDown, v.Condition)
	require.False(t, v.LinkUp)
	require.True(t, v.Stale)
	require.Equal(t, "robot link down; last seen at (1.20, 0.40) facing 90° 0.2 s ago (no state since), gripper open, battery 87%", v.Summary)
}

func TestConsole_StateEventsCappedButAChangeIsShownAtOnce(t *testing.T) {
	f := startFeed(t)
	// Given states arriving faster than the 10 Hz cap, all moving
	f.src.arrive(movingState())
	require.Equal(t, robot.ConditionMoving, f.next().Condition)
	f.src.arrive(movingState())
	f.src.arrive(movingState())
	// When the robot comes to rest within the same tenth of a second
	f.src.arrive(restingState())
	// Then the next event is the rest, not one of the capped states
	v := f.next()
	require.Equal(t, robot.ConditionStopped, v.Condition)
	// And after a tenth of a second a state of the same condition goes out
	f.clock.Advance(100 * time.Millisecond)
	f.src.arrive(restingState())
	require.Equal(t, robot.ConditionStopped, f.next().Condition)
}

func TestViewRobot_JSON(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		obs  robot.Observation
		want map[string]any
	}{
		{
			name: "no state yet",
			obs:  robot.Observation{Now: now, LinkUp: true},
			want: map[string]any{
				"summary": "robot state unknown (no state received yet)", "link_up": true, "condition": "unknown",
				"stale": true, "state_age_ms": 0.0, "stale_after_ms": 500.0,
			},
		},
		{
			name: "stale state",
			obs:  robot.Observation{State: restingState(), Have: true, ReceivedAt: now.Add(-2 * time.Second), Now: now, LinkUp: true, StaleAfter: 300 * time.Millisecond},
			want: map[string]any{
				"summary": "last seen at (1.20, 0.40) facing 90° 2.0 s ago (no state since), gripper open, battery 87%", "link_up": true,
				"condition": "stale", "stale": true, "state_age_ms": 2000.0, "stale_after_ms": 300.0,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(ViewRobot(tc.obs))
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(raw, &got))
			st, hasState := got["state"]
			delete(got, "state")
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.obs.Have, hasState && st != nil)
		})
	}
}
