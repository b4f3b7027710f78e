package rosaction

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
)

// The client's goal state machine, driven by hand-made status, result and
// feedback messages on a fake clock: no master, no sockets. The same
// callbacks run when the messages come over TCPROS (wire_test.go).

type mbClient = Client[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback,
	*rosmsg.MoveBaseActionGoal, *rosmsg.MoveBaseActionResult, *rosmsg.MoveBaseActionFeedback]

// rig is a client without topics, its fake clock, and a record of the
// callbacks in the order they ran.
type rig struct {
	c     *mbClient
	now   time.Time
	calls []string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{now: time.Unix(1_700_000_000, 0)}
	r.c = &mbClient{conf: ClientConf[rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback]{
		Name: "/move_base", Now: func() time.Time { return r.now }, ResultTimeout: time.Second,
		OnTerminal: func(g *Goal) {
			s, _ := g.State()
			r.calls = append(r.calls, "terminal:"+s.String())
		},
		OnResult:   func(*Goal, *rosmsg.MoveBaseActionResult) { r.calls = append(r.calls, "result") },
		OnFeedback: func(*Goal, *rosmsg.MoveBaseActionFeedback) { r.calls = append(r.calls, "feedback") },
	}, goals: map[string]*Goal{}}
	// No topics: Cancel and CancelAll only mark goals.
	r.c.closed.Store(true)
	return r
}

func (r *rig) send() *Goal { return r.c.track(&rosmsg.MoveBaseActionGoal{}, "test", time.Time{}) }

// event is one thing that happens to the goal.
type event struct {
	kind string // status, omit, result, feedback, advance, expire, cancel, cancelAll
	s    State
	text string
	d    time.Duration
}

func status(s State) event                  { return event{kind: "status", s: s} }
func statusText(s State, text string) event { return event{kind: "status", s: s, text: text} }
func result(s State, text string) event     { return event{kind: "result", s: s, text: text} }
func omitted() event                        { return event{kind: "omit"} }
func advance(d time.Duration) event         { return event{kind: "advance", d: d} }
func expire(d time.Duration) event          { return event{kind: "expire", d: d} }

func (r *rig) apply(g *Goal, e event) {
	st := actionlib_msgs.GoalStatus{GoalId: actionlib_msgs.GoalID{Id: g.ID}, Status: uint8(e.s), Text: e.text}
	switch e.kind {
	case "status":
		r.c.onStatus(&actionlib_msgs.GoalStatusArray{StatusList: []actionlib_msgs.GoalStatus{
			{GoalId: actionlib_msgs.GoalID{Id: "someone-else"}, Status: uint8(Active)}, st,
		}})
	case "omit":
		r.c.onStatus(&actionlib_msgs.GoalStatusArray{StatusList: []actionlib_msgs.GoalStatus{
			{GoalId: actionlib_msgs.GoalID{Id: "someone-else"}, Status: uint8(Active)},
		}})
	case "result":
		r.c.onResult(&rosmsg.MoveBaseActionResult{Status: st})
	case "feedback":
		r.c.onFeedback(&rosmsg.MoveBaseActionFeedback{Status: st})
	case "advance":
		r.now = r.now.Add(e.d)
	case "expire":
		r.c.Expire(e.d)
	case "cancel":
		r.c.Cancel(g)
	case "cancelAll":
		r.c.CancelAll(r.now)
	}
}

// acked reports the state WaitAck returns, or false when it would block.
func acked(g *Goal) (State, bool) {
	select {
	case <-g.acked:
		s, _ := g.State()
		return s, true
	default:
		return 0, false
	}
}

func ended(g *Goal) bool {
	select {
	case <-g.Done():
		return true
	default:
		return false
	}
}

const noAck = State(255)

func TestClient_GoalStateMachine(t *testing.T) {
	tests := []struct {
		name      string
		events    []event
		ack       State // the state of the acknowledgement, noAck for none
		final     State // the goal's state at the end
		ended     bool
		text      string
		cancelled bool
		calls     []string
	}{
		{
			name:   "PENDING, ACTIVE, then SUCCEEDED by its result",
			events: []event{status(Pending), status(Active), result(Succeeded, "goal reached")},
			ack:    Pending, final: Succeeded, ended: true, text: "goal reached",
			calls: []string{"result", "terminal:SUCCEEDED"},
		},
		{
			name:   "a SUCCEEDED status waits for the result, so its payload comes first",
			events: []event{status(Active), status(Succeeded)},
			ack:    Active, final: Succeeded, ended: false,
		},
		{
			name:   "the result after a SUCCEEDED status ends the goal once",
			events: []event{status(Active), status(Succeeded), result(Succeeded, ""), status(Succeeded)},
			ack:    Active, final: Succeeded, ended: true,
			calls: []string{"result", "terminal:SUCCEEDED"},
		},
		{
			name:   "REJECTED at once acknowledges with REJECTED",
			events: []event{statusText(Rejected, "outside the map"), result(Rejected, "outside the map")},
			ack:    Rejected, final: Rejected, ended: true, text: "outside the map",
			calls: []string{"result", "terminal:REJECTED"},
		},
		{
			name:   "RECALLED after this client cancelled before acceptance",
			events: []event{{kind: "cancel"}, status(Recalling), result(Recalled, "")},
			ack:    Recalling, final: Recalled, ended: true, cancelled: true,
			calls: []string{"result", "terminal:RECALLED"},
		},
		{
			name:   "PREEMPTED after this client cancelled",
			events: []event{status(Active), {kind: "cancel"}, status(Preempting), result(Preempted, "")},
			ack:    Active, final: Preempted, ended: true, cancelled: true,
			calls: []string{"result", "terminal:PREEMPTED"},
		},
		{
			name:   "PREEMPTED without a cancel from this client (a newer goal, another client)",
			events: []event{status(Active), result(Preempted, "preempted by a newer goal")},
			ack:    Active, final: Preempted, ended: true, cancelled: false, text: "preempted by a newer goal",
			calls: []string{"result", "terminal:PREEMPTED"},
		},
		{
			name:   "CancelAll counts as this client's cancel",
			events: []event{status(Active), {kind: "cancelAll"}, result(Preempted, "")},
			ack:    Active, final: Preempted, ended: true, cancelled: true,
			calls: []string{"result", "terminal:PREEMPTED"},
		},
		{
			name:   "ABORTED by the result alone",
			events: []event{status(Active), result(Aborted, "no valid plan")},
			ack:    Active, final: Aborted, ended: true, text: "no valid plan",
			calls: []string{"result", "terminal:ABORTED"},
		},
		{
			name:   "a result that claims a live state counts as ABORTED",
			events: []event{status(Active), result(Active, "")},
			ack:    Active, final: Aborted, ended: true,
			calls: []string{"result", "terminal:ABORTED"},
		},
		{
			name:   "LOST when the server stops listing an acknowledged goal",
			events: []event{status(Active), omitted()},
			ack:    Active, final: Lost, ended: true,
			calls: []string{"terminal:LOST"},
		},
		{
			name:   "not LOST when omitted before the server ever listed it",
			events: []event{omitted(), omitted()},
			ack:    noAck, ended: false,
		},
		{
			name:   "an ABORTED status whose result went astray is ABORTED, not LOST, once dropped",
			events: []event{status(Active), statusText(Aborted, "blocked"), omitted()},
			ack:    Active, final: Aborted, ended: true, text: "blocked",
			calls: []string{"terminal:ABORTED"},
		},
		{
			name:   "an ABORTED status ends the goal after the result timeout",
			events: []event{status(Active), status(Aborted), advance(900 * time.Millisecond), expire(time.Minute), advance(200 * time.Millisecond), expire(time.Minute)},
			ack:    Active, final: Aborted, ended: true,
			calls: []string{"terminal:ABORTED"},
		},
		{
			name:   "LOST when an acknowledged goal's server falls silent past the status timeout",
			events: []event{status(Active), advance(1500 * time.Millisecond), expire(2 * time.Second), advance(time.Second), expire(2 * time.Second)},
			ack:    Active, final: Lost, ended: true,
			calls: []string{"terminal:LOST"},
		},
		{
			name:   "a goal never acknowledged is not expired (the sender's deadline covers it)",
			events: []event{advance(time.Hour), expire(2 * time.Second)},
			ack:    noAck, ended: false,
		},
		{
			name:   "a later ACTIVE cannot undo a reported terminal state",
			events: []event{status(Active), status(Succeeded), status(Active)},
			ack:    Active, final: Succeeded, ended: false,
		},
		{
			name:   "feedback acknowledges the goal",
			events: []event{{kind: "feedback", s: Active}},
			ack:    Active, final: Active, ended: false,
			calls: []string{"feedback"},
		},
		{
			name:   "states outside actionlib's are ignored",
			events: []event{status(State(42)), result(State(42), "")},
			ack:    noAck, ended: false,
		},
		{
			name:   "nothing after the end changes the goal",
			events: []event{status(Active), result(Aborted, "x"), result(Succeeded, "y"), status(Succeeded), omitted()},
			ack:    Active, final: Aborted, ended: true, text: "x",
			calls: []string{"result", "terminal:ABORTED"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a goal sent by a client
			r := newRig(t)
			g := r.send()

			// When the server's messages arrive
			for _, e := range tc.events {
				r.apply(g, e)
			}

			// Then the goal is where actionlib's client state machine puts it
			s, ok := acked(g)
			if tc.ack == noAck {
				require.False(t, ok, "acknowledged with %s", s)
			} else {
				require.True(t, ok, "not acknowledged")
			}
			require.Equal(t, tc.ended, ended(g))
			if tc.ack != noAck {
				got, text := g.State()
				require.Equal(t, tc.final.String(), got.String())
				if tc.text != "" {
					require.Equal(t, tc.text, text)
				}
			}
			require.Equal(t, tc.cancelled, g.CancelRequested())
			require.Equal(t, tc.calls, r.calls)
			if tc.ended {
				require.NotContains(t, r.c.Pending(), g, "an ended goal is no longer tracked")
			}
		})
	}
}

func TestClient_AckStateIsTheFirstWord(t *testing.T) {
	// Given a goal the server first reports PENDING
	r := newRig(t)
	g := r.send()
	r.apply(g, status(Pending))
	ackState, ok := acked(g)
	require.True(t, ok)
	require.Equal(t, Pending, ackState)

	// When WaitAck is called later, after it went ACTIVE
	r.apply(g, status(Active))
	s, _, err := g.WaitAck(context.Background())

	// Then it returns the current state without blocking
	require.NoError(t, err)
	require.Equal(t, Active, s)
}

func TestClient_WaitAckReturnsTheContextCause(t *testing.T) {
	// Given a goal the server never mentions
	r := newRig(t)
	g := r.send()
	cause := errors.New("no acknowledgement within 2s")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)

	// When the sender's deadline passes
	_, _, err := g.WaitAck(ctx)

	// Then WaitAck says why, and the goal is neither acknowledged nor ended
	require.ErrorIs(t, err, cause)
	_, ok := acked(g)
	require.False(t, ok)
	require.False(t, ended(g))
}

func TestClient_GoalIDsAreUniqueAndStamped(t *testing.T) {
	// Given a client
	r := newRig(t)
	// When two goals are tracked in the same instant
	m1, m2 := &rosmsg.MoveBaseActionGoal{}, &rosmsg.MoveBaseActionGoal{}
	g1, g2 := r.c.track(m1, "robot_bridge", time.Time{}), r.c.track(m2, "robot_bridge", time.Time{})

	// Then their ids differ, name the sender, and the envelopes carry them
	require.NotEqual(t, g1.ID, g2.ID)
	require.Contains(t, g1.ID, "robot_bridge-")
	require.Equal(t, g1.ID, m1.GoalId.Id)
	require.Equal(t, r.now, m1.GoalId.Stamp)
	require.Equal(t, r.now, m1.Header.Stamp)
	require.Len(t, r.c.Pending(), 2)
}

func TestClient_CancelAllSparesGoalsStampedAfterIt(t *testing.T) {
	// Given a goal sent before a cancel-all and one stamped after it (an
	// arm hold sent right after a stop's cancel)
	r := newRig(t)
	before := r.send()
	stop := r.now
	after := r.c.track(&rosmsg.MoveBaseActionGoal{}, "test", stop.Add(time.Microsecond))

	// When the cancel-all is sent, and sent again (a stop's echo)
	r.c.CancelAll(stop)
	r.c.CancelAll(stop)

	// Then only the earlier goal counts as cancelled by this client, as
	// the server (which compares the same stamps) cancels only that one
	require.True(t, before.CancelRequested())
	require.False(t, after.CancelRequested())
	require.Equal(t, stop.Add(time.Microsecond), after.Sent)

	// and a zero stamp cancels every goal
	r.c.CancelAll(time.Time{})
	require.True(t, after.CancelRequested())
}

func TestClient_SendOnceAfterCloseFails(t *testing.T) {
	r := newRig(t)
	_, err := r.c.SendOnce(&rosmsg.MoveBaseActionGoal{}, "x", time.Time{})
	require.ErrorIs(t, err, ErrClosed)
}

func TestClient_SendAfterCloseFails(t *testing.T) {
	r := newRig(t)
	_, err := r.c.Send(&rosmsg.MoveBaseActionGoal{}, "x")
	require.ErrorIs(t, err, ErrClosed)
}

func TestClient_StatusAge(t *testing.T) {
	// Given a client that never heard its server
	r := newRig(t)
	_, ok := r.c.StatusAge()
	require.False(t, ok)
	// When a status arrives and time passes
	r.c.onStatus(&actionlib_msgs.GoalStatusArray{})
	r.now = r.now.Add(300 * time.Millisecond)
	// Then the age is measured on the client's clock
	age, ok := r.c.StatusAge()
	require.True(t, ok)
	require.Equal(t, 300*time.Millisecond, age)
}

func TestState_NamesAndClasses(t *testing.T) {
	tests := []struct {
		s        State
		name     string
		terminal bool
	}{
		{Pending, "PENDING", false},
		{Active, "ACTIVE", false},
		{Preempted, "PREEMPTED", true},
		{Succeeded, "SUCCEEDED", true},
		{Aborted, "ABORTED", true},
		{Rejected, "REJECTED", true},
		{Preempting, "PREEMPTING", false},
		{Recalling, "RECALLING", false},
		{Recalled, "RECALLED", true},
		{Lost, "LOST", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.s.String())
			require.Equal(t, tc.terminal, tc.s.Terminal())
			require.True(t, tc.s.Valid())
		})
	}
	require.False(t, State(10).Valid())
	require.Equal(t, "State(10)", State(10).String())
}
