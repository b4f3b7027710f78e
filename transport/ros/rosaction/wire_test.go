package rosaction

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// The client against the server over a real rosmaster and TCPROS: every
// actionlib outcome as the bridge's driver meets it.

type mbServer = Server[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback,
	*rosmsg.MoveBaseActionGoal, *rosmsg.MoveBaseActionResult, *rosmsg.MoveBaseActionFeedback]

// Server behaviours, chosen by the goal's target x.
const (
	doAccept      = 1 // accept; the test ends it
	doReject      = 2
	doStayPending = 3 // neither accept nor reject
	doAbort       = 4 // accept, then abort at once
)

type wire struct {
	m      *rostest.Master
	cli    *mbClient
	srv    *mbServer
	sNode  *goroslib.Node
	mu     sync.Mutex
	goals  map[string]*ServerGoal // guarded by mu
	events []string               // guarded by mu
}

func newNode(t *testing.T, m *rostest.Master, name string) *goroslib.Node {
	t.Helper()
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: name, Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	return n
}

func startWire(t *testing.T) *wire {
	t.Helper()
	w := &wire{m: rostest.StartMaster(t), goals: map[string]*ServerGoal{}}
	w.sNode = newNode(t, w.m, "fake_move_base")
	var err error
	w.srv, err = NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](ServerConf[rosmsg.MoveBaseActionGoal]{
		Node: w.sNode, Name: "/move_base", StatusPeriod: 20 * time.Millisecond,
		OnGoal: func(g *ServerGoal, m *rosmsg.MoveBaseActionGoal) {
			w.mu.Lock()
			w.goals[g.ID] = g
			w.mu.Unlock()
			switch int(m.Goal.TargetPose.Pose.Position.X) {
			case doAccept:
				w.srv.Accept(g)
			case doReject:
				w.srv.Reject(g, nil, "outside the map")
			case doAbort:
				w.srv.Accept(g)
				w.srv.Abort(g, nil, "no valid plan")
			}
		},
	})
	require.NoError(t, err)
	t.Cleanup(w.srv.Close)
	cNode := newNode(t, w.m, "bridge")
	w.cli, err = NewClient[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](ClientConf[rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback]{
		Node: cNode, Name: "/move_base",
		OnResult: func(g *Goal, _ *rosmsg.MoveBaseActionResult) { w.record("result " + g.ID) },
		OnTerminal: func(g *Goal) {
			s, _ := g.State()
			w.record("terminal " + g.ID + " " + s.String())
		},
	})
	require.NoError(t, err)
	t.Cleanup(w.cli.Close)
	// Wait until both directions are connected: status reached the client
	// and the client's goal publisher has the server as a subscriber.
	rostest.Eventually(t, 10*time.Second, func() bool {
		_, ok := w.cli.StatusAge()
		return ok && w.m.Connected("/bridge", "/move_base/goal", "/fake_move_base") &&
			w.m.Connected("/bridge", "/move_base/cancel", "/fake_move_base")
	}, "client and server never connected")
	return w
}

func (w *wire) record(e string) {
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

func (w *wire) eventsOf(id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range w.events {
		if strings.HasSuffix(e, " "+id) || strings.Contains(e, " "+id+" ") {
			out = append(out, e)
		}
	}
	return out
}

func (w *wire) serverGoal(t *testing.T, id string) *ServerGoal {
	t.Helper()
	var g *ServerGoal
	rostest.Eventually(t, 5*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		g = w.goals[id]
		return g != nil
	}, "the server never got goal %s", id)
	return g
}

func (w *wire) send(t *testing.T, behaviour int) (*Goal, State) {
	t.Helper()
	m := &rosmsg.MoveBaseActionGoal{}
	m.Goal.TargetPose.Pose.Position.X = float64(behaviour)
	m.Goal.TargetPose.Pose.Orientation.W = 1
	g, err := w.cli.Send(m, "bridge")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := g.WaitAck(ctx)
	require.NoError(t, err, "goal %s was never acknowledged", g.ID)
	return g, s
}

func waitDone(t *testing.T, g *Goal) State {
	t.Helper()
	select {
	case <-g.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("goal %s never ended", g.ID)
	}
	s, _ := g.State()
	return s
}

func TestWire_ActionlibOutcomes(t *testing.T) {
	rostest.RequireTool(t, "rosmaster", "ros-core")
	w := startWire(t)

	t.Run("accepted, then SUCCEEDED with the result before the end", func(t *testing.T) {
		g, ack := w.send(t, doAccept)
		require.Equal(t, Active, ack)
		w.srv.Succeed(w.serverGoal(t, g.ID), nil, "goal reached")
		require.Equal(t, Succeeded, waitDone(t, g))
		// OnTerminal runs on the client's goroutine, right after Done.
		rostest.Eventually(t, 5*time.Second, func() bool { return len(w.eventsOf(g.ID)) == 2 }, "no terminal event")
		require.Equal(t, []string{"result " + g.ID, "terminal " + g.ID + " SUCCEEDED"}, w.eventsOf(g.ID))
	})
	t.Run("REJECTED is the acknowledgement", func(t *testing.T) {
		g, ack := w.send(t, doReject)
		require.Equal(t, Rejected, ack)
		_, text := g.State()
		require.Equal(t, "outside the map", text)
		require.Equal(t, Rejected, waitDone(t, g))
	})
	t.Run("ABORTED after acceptance", func(t *testing.T) {
		g, _ := w.send(t, doAbort)
		require.Equal(t, Aborted, waitDone(t, g))
		require.False(t, g.CancelRequested())
	})
	t.Run("cancel before acceptance RECALLS it", func(t *testing.T) {
		g, ack := w.send(t, doStayPending)
		require.Equal(t, Pending, ack)
		w.cli.Cancel(g)
		require.Equal(t, Recalled, waitDone(t, g))
		require.True(t, g.CancelRequested())
	})
	t.Run("cancel-all after acceptance PREEMPTS it", func(t *testing.T) {
		g, _ := w.send(t, doAccept)
		w.cli.CancelAll(time.Now())
		require.Equal(t, Preempted, waitDone(t, g))
		require.True(t, g.CancelRequested())
	})
	t.Run("PREEMPTED by the server alone is not this client's cancel", func(t *testing.T) {
		g, _ := w.send(t, doAccept)
		w.srv.Canceled(w.serverGoal(t, g.ID), nil, "preempted by a newer goal")
		require.Equal(t, Preempted, waitDone(t, g))
		require.False(t, g.CancelRequested())
	})
	t.Run("LOST when the server stops listing the goal", func(t *testing.T) {
		g, _ := w.send(t, doAccept)
		w.srv.Forget(w.serverGoal(t, g.ID))
		require.Equal(t, Lost, waitDone(t, g))
	})
	t.Run("LOST by Expire when the server falls silent", func(t *testing.T) {
		g, _ := w.send(t, doAccept)
		// The server's process hangs: no more status, no result.
		w.srv.Close()
		rostest.Eventually(t, 10*time.Second, func() bool {
			w.cli.Expire(200 * time.Millisecond)
			return ended(g)
		}, "goal %s never expired", g.ID)
		s, text := g.State()
		require.Equal(t, Lost, s)
		require.Contains(t, text, "no status from the action server")
	})
}

func TestWire_GoalSentBeforeTheServerConnectedIsResent(t *testing.T) {
	// Given a client whose server is not up yet (TCPROS would drop the goal)
	m := rostest.StartMaster(t)
	cli, err := NewClient[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](ClientConf[rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback]{
		Node: newNode(t, m, "bridge"), Name: "/late_move_base",
	})
	require.NoError(t, err)
	t.Cleanup(cli.Close)
	m1 := &rosmsg.MoveBaseActionGoal{}
	m1.Goal.TargetPose.Pose.Orientation.W = 1
	g, err := cli.Send(m1, "bridge")
	require.NoError(t, err)

	// When the server comes up afterwards
	got := make(chan *ServerGoal, 10)
	srv, err := NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](ServerConf[rosmsg.MoveBaseActionGoal]{
		Node: newNode(t, m, "late_server"), Name: "/late_move_base",
		OnGoal: func(sg *ServerGoal, _ *rosmsg.MoveBaseActionGoal) { got <- sg },
	})
	require.NoError(t, err)
	t.Cleanup(srv.Close)

	// Then the goal reaches it, once, and is acknowledged
	var sg *ServerGoal
	select {
	case sg = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the goal never reached the late server")
	}
	require.Equal(t, g.ID, sg.ID)
	srv.Accept(sg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := g.WaitAck(ctx)
	require.NoError(t, err)
	require.Equal(t, Active, s)
	require.Empty(t, got, "the server ignores the same goal id sent again")
}

func TestWire_SendOnceGoalIsNeverResent(t *testing.T) {
	// Given a client whose server is not up yet, and a goal that is only
	// true when sent (an arm hold at the positions just measured), sent
	// once: TCPROS drops it, as nobody is subscribed
	m := rostest.StartMaster(t)
	cli, err := NewClient[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](ClientConf[rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback]{
		Node: newNode(t, m, "bridge"), Name: "/late_move_base", ResendPeriod: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(cli.Close)
	once := &rosmsg.MoveBaseActionGoal{}
	once.Goal.TargetPose.Pose.Orientation.W = 1
	stale, err := cli.SendOnce(once, "bridge-hold", time.Time{})
	require.NoError(t, err)

	// When the server comes up afterwards and the client sends an ordinary
	// goal once the connection exists
	got := make(chan string, 10)
	srv, err := NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](ServerConf[rosmsg.MoveBaseActionGoal]{
		Node: newNode(t, m, "late_server"), Name: "/late_move_base",
		OnGoal: func(sg *ServerGoal, _ *rosmsg.MoveBaseActionGoal) { got <- sg.ID },
	})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	rostest.Eventually(t, 10*time.Second, func() bool { return m.Connected("/bridge", "/late_move_base/goal", "/late_server") },
		"the client never connected to the late server")
	// Ten resend periods with the connection up: a goal that is resent
	// has been by now.
	time.Sleep(10 * 10 * time.Millisecond)
	next := &rosmsg.MoveBaseActionGoal{}
	next.Goal.TargetPose.Pose.Orientation.W = 1
	g, err := cli.Send(next, "bridge")
	require.NoError(t, err)

	// Then the first goal the server ever sees is the ordinary one: the
	// aged goal was not published again (goals on one topic arrive in
	// order, so a resend would have come first)
	select {
	case id := <-got:
		require.Equal(t, g.ID, id, "the goal sent once (%s) reached the server late", stale.ID)
	case <-time.After(10 * time.Second):
		t.Fatal("the ordinary goal never reached the server")
	}
}

// A cancel travels on its own connection and may overtake the goal it
// cancels (a stop right after a motion command). As actionlib's
// ActionServer, the server then cancels the goal on arrival, never
// running it: a goal stamped at or before the last cancel-all, or one
// whose id a cancel named before it came. A goal stamped after the
// cancel-all runs.
func TestWire_ACancelThatOvertakesItsGoalStillCancelsIt(t *testing.T) {
	w := startWire(t)
	n := newNode(t, w.m, "reorder")
	goalPub, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: "/move_base/goal", Msg: &rosmsg.MoveBaseActionGoal{}})
	require.NoError(t, err)
	t.Cleanup(goalPub.Close)
	cancelPub, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: "/move_base/cancel", Msg: &actionlib_msgs.GoalID{}})
	require.NoError(t, err)
	t.Cleanup(cancelPub.Close)
	rostest.Eventually(t, 10*time.Second, func() bool {
		return w.m.Connected("/reorder", "/move_base/goal", "/fake_move_base") && w.m.Connected("/reorder", "/move_base/cancel", "/fake_move_base")
	}, "the test node never connected to the server")
	goal := func(id string, stamp time.Time) {
		m := &rosmsg.MoveBaseActionGoal{}
		m.Goal.TargetPose.Pose.Position.X = doAccept
		m.Goal.TargetPose.Pose.Orientation.W = 1
		m.SetGoalID(std_msgs.Header{Stamp: stamp}, actionlib_msgs.GoalID{Id: id, Stamp: stamp})
		goalPub.Write(m)
	}
	serverState := func(id string) (State, bool) {
		w.srv.mu.Lock()
		defer w.srv.mu.Unlock()
		g, ok := w.srv.goals[id]
		if !ok {
			return 0, false
		}
		return g.state, true
	}
	ran := func(id string) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, ok := w.goals[id]
		return ok
	}

	// Given a cancel-all stamped t that reached the server first
	t0 := time.Now()
	cancelPub.Write(&actionlib_msgs.GoalID{Stamp: t0})
	rostest.Eventually(t, 5*time.Second, func() bool {
		w.srv.mu.Lock()
		defer w.srv.mu.Unlock()
		return w.srv.lastCancel.Equal(t0)
	}, "the cancel never reached the server")
	// When a goal stamped before it arrives, and then one stamped after
	goal("before-the-cancel", t0.Add(-time.Millisecond))
	goal("after-the-cancel", t0.Add(time.Millisecond))
	// Then the first is RECALLED on arrival and never runs; the second runs
	rostest.Eventually(t, 5*time.Second, func() bool { return ran("after-the-cancel") }, "the goal stamped after the cancel never ran")
	st, ok := serverState("before-the-cancel")
	require.True(t, ok, "the goal stamped before the cancel never reached the server")
	require.Equal(t, Recalled, st)
	require.False(t, ran("before-the-cancel"), "a goal the cancel covered ran")

	// Given a cancel naming a goal the server has not seen yet
	cancelPub.Write(&actionlib_msgs.GoalID{Id: "cancelled-first"})
	rostest.Eventually(t, 5*time.Second, func() bool {
		st, ok := serverState("cancelled-first")
		return ok && st == Recalling
	}, "the cancel by id never reached the server")
	// When that goal arrives (stamped after every cancel-all)
	goal("cancelled-first", time.Now())
	// Then it is RECALLED and never runs
	rostest.Eventually(t, 5*time.Second, func() bool {
		st, _ := serverState("cancelled-first")
		return st == Recalled
	}, "the goal whose cancel came first was not recalled")
	require.False(t, ran("cancelled-first"), "a goal cancelled before it arrived ran")
}
