package ros_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/ros"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// The transport's own share of command and stop latency: Driver.Send or
// Driver.Stop to the callback of a subscriber in another node, against a
// goroslib publisher writing straight to that subscriber in the same run
// (the floor). The bridge's end-to-end figures (HTTP → subscriber) are in
// bridge/ros_bench_test.go. Run with enough samples for a p99:
//
//	go test -run '^$' -bench . -benchtime 500x ./transport/ros

type seenAt struct {
	at time.Time
	id string
}

type driverBench struct {
	d       *ros.Driver
	goals   chan seenAt
	cancels chan seenAt
	twists  chan seenAt
	direct  chan seenAt
	pub     *goroslib.Publisher
}

func startDriverBench(b *testing.B) *driverBench {
	b.Helper()
	m := rostest.StartMaster(b)
	cfg := loadConfig(b, "ros-base-only.yaml", m.URI, nil)
	n, err := simnode.New(simnode.Conf{Config: cfg, Env: rosIP, Logger: quiet})
	require.NoError(b, err)
	require.NoError(b, n.Start(context.Background()))
	b.Cleanup(func() { _ = n.Close() })
	d, err := ros.New(ros.Conf{Config: cfg, Env: rosIP, Logger: quiet})
	require.NoError(b, err)
	require.NoError(b, d.Start(context.Background()))
	b.Cleanup(func() { _ = d.Close() })
	r := &driverBench{d: d, goals: make(chan seenAt, 64), cancels: make(chan seenAt, 64), twists: make(chan seenAt, 64), direct: make(chan seenAt, 64)}
	node := func(name string) *goroslib.Node { return m.Node(b, name) }
	watch := node("bench_watch")
	sub := func(topic string, cb any) { rostest.Subscribe(b, watch, topic, cb) }
	sub("/move_base/goal", func(m *rosmsg.MoveBaseActionGoal) { r.goals <- seenAt{time.Now(), m.GoalId.Id} })
	sub("/move_base/cancel", func(*actionlib_msgs.GoalID) { r.cancels <- seenAt{at: time.Now()} })
	sub("/cmd_vel", func(*geometry_msgs.Twist) { r.twists <- seenAt{at: time.Now()} })
	sub("/bench/goal", func(m *rosmsg.MoveBaseActionGoal) { r.direct <- seenAt{time.Now(), m.GoalId.Id} })
	r.pub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: node("bench_direct"), Topic: "/bench/goal", Msg: &rosmsg.MoveBaseActionGoal{}})
	require.NoError(b, err)
	b.Cleanup(r.pub.Close)
	rostest.Eventually(b, 15*time.Second, func() bool {
		return d.LinkUp() && m.Connected("/robot_bridge", "/move_base/goal", "/bench_watch") &&
			m.Connected("/robot_bridge", "/move_base/cancel", "/bench_watch") &&
			m.Connected("/robot_bridge", "/cmd_vel", "/bench_watch") &&
			m.Connected("/bench_direct", "/bench/goal", "/bench_watch")
	}, "not connected")
	return r
}

func flush(ch chan seenAt) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func await(b *testing.B, ch chan seenAt, t0 time.Time, id, what string) time.Duration {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-ch:
			if s.at.Before(t0) || (id != "" && s.id != id && s.id != "") {
				continue
			}
			return s.at.Sub(t0)
		case <-deadline:
			b.Fatalf("no %s", what)
			return 0
		}
	}
}

func BenchmarkDriver_SendVsDirectPublish(b *testing.B) {
	r := startDriverBench(b)
	ctx := context.Background()
	var send, direct []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, ok := r.d.Latest()
		require.True(b, ok)
		flush(r.goals)
		t0 := time.Now()
		// A goal where the robot stands: accepted and done at once.
		require.NoError(b, r.d.Send(ctx, robot.Command{
			ID: fmt.Sprint(i), Kind: robot.CmdMoveBase,
			Base: &robot.BaseGoal{Target: st.Base},
		}))
		send = append(send, await(b, r.goals, t0, "", "goal"))

		m := &rosmsg.MoveBaseActionGoal{}
		m.GoalId.Id = fmt.Sprintf("direct-%d", i)
		flush(r.direct)
		t1 := time.Now()
		r.pub.Write(m)
		direct = append(direct, await(b, r.direct, t1, m.GoalId.Id, "direct goal"))
	}
	b.StopTimer()
	rostest.ReportVsDirect(b, "send", send, direct)
}

func BenchmarkDriver_StopToSubscriber(b *testing.B) {
	r := startDriverBench(b)
	ctx := context.Background()
	var cancels, twists []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		flush(r.cancels)
		flush(r.twists)
		t0 := time.Now()
		require.NoError(b, r.d.Stop(ctx))
		cancels = append(cancels, await(b, r.cancels, t0, "", "cancel"))
		twists = append(twists, await(b, r.twists, t0, "", "zero twist"))
	}
	b.StopTimer()
	cp50, cp99 := rostest.Percentiles(cancels)
	tp50, tp99 := rostest.Percentiles(twists)
	b.ReportMetric(cp50, "cancel_p50_ms")
	b.ReportMetric(cp99, "cancel_p99_ms")
	b.ReportMetric(tp50, "twist_p50_ms")
	b.ReportMetric(tp99, "twist_p99_ms")
	b.ReportMetric(0, "ns/op")
}
