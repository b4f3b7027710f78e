package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Latency over ROS, measured against a floor taken in the same run: a
// goroslib publisher writing straight to a goroslib subscriber through the
// same master. Every sample is timed from the start of the HTTP request to
// the callback of a subscriber on the ROS topic, in another node.
// Run with enough samples for a p99, e.g.
//
//	go test -run '^$' -bench BenchmarkROS -benchtime 300x ./bridge

// arrival is one message seen by the watcher.
type arrival struct {
	at time.Time
	id string
}

// benchROS is a bridge on ros-sim.yaml whose motion tools need no
// approval, the simulator node, and a watcher node subscribed to the
// bridge's command topics and to a direct publisher.
type benchROS struct {
	b       *Bridge
	base    string
	client  *http.Client
	goals   chan arrival
	cancels chan arrival
	twists  chan arrival
	direct  chan arrival
	pub     *goroslib.Publisher
}

func startBenchROS(b *testing.B) *benchROS {
	b.Helper()
	m := rostest.StartMaster(b)
	cfg := rosConfig(b, "ros-sim.yaml", m.URI, func(c *hwconfig.Config) {
		// The approved-command path with the approval already given: the
		// config authorizes the motion (approval: never).
		a := c.Actions[hwconfig.ToolMoveBaseTo]
		a.Approval = hwconfig.ApprovalNever
		c.Actions[hwconfig.ToolMoveBaseTo] = a
	})
	startSimNode(b, cfg)
	br := newROSBridge(b, cfg)
	r := &benchROS{
		b: br, base: "http://" + br.Addr(), client: &http.Client{Timeout: 30 * time.Second},
		goals: make(chan arrival, 64), cancels: make(chan arrival, 64), twists: make(chan arrival, 64), direct: make(chan arrival, 64),
	}

	node := func(name string) *goroslib.Node { return m.Node(b, name) }
	watch := node("bench_watch")
	sub := func(topic string, cb any) { rostest.Subscribe(b, watch, topic, cb) }
	sub("/move_base/goal", func(m *rosmsg.MoveBaseActionGoal) { r.goals <- arrival{time.Now(), m.GoalId.Id} })
	sub("/move_base/cancel", func(m *actionlib_msgs.GoalID) { r.cancels <- arrival{time.Now(), m.Id} })
	sub("/cmd_vel", func(m *geometry_msgs.Twist) {
		if m.Linear.X == 0 && m.Angular.Z == 0 {
			r.twists <- arrival{at: time.Now()}
		}
	})
	sub("/bench/goal", func(m *rosmsg.MoveBaseActionGoal) { r.direct <- arrival{time.Now(), m.GoalId.Id} })
	var err error
	r.pub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: node("bench_direct"), Topic: "/bench/goal", Msg: &rosmsg.MoveBaseActionGoal{}})
	require.NoError(b, err)
	b.Cleanup(r.pub.Close)
	rostest.Eventually(b, 15*time.Second, func() bool {
		return m.Connected("/robot_bridge", "/move_base/goal", "/bench_watch") &&
			m.Connected("/robot_bridge", "/move_base/cancel", "/bench_watch") &&
			m.Connected("/robot_bridge", "/cmd_vel", "/bench_watch") &&
			m.Connected("/bench_direct", "/bench/goal", "/bench_watch")
	}, "the watcher never connected")
	rostest.Eventually(b, 15*time.Second, func() bool { return br.ready(context.Background()) == nil }, "bridge not ready")
	return r
}

// call posts a tool call as the agent and returns the decoded envelope.
func (r *benchROS) call(b *testing.B, tool string, body map[string]any) map[string]any {
	raw, err := json.Marshal(body)
	require.NoError(b, err)
	req, err := http.NewRequest("POST", r.base+"/v1/tools/"+tool+"/call", bytes.NewReader(raw))
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+rosAgentToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	require.NoError(b, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	env := map[string]any{}
	require.NoError(b, json.Unmarshal(out, &env), "%s", out)
	return env
}

func drain(ch chan arrival) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// next waits for an arrival after t0 whose id is not in seen.
func next(b *testing.B, ch chan arrival, t0 time.Time, seen map[string]bool, what string) arrival {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case a := <-ch:
			if a.at.Before(t0) || (a.id != "" && seen[a.id]) {
				continue
			}
			if seen != nil {
				seen[a.id] = true
			}
			return a
		case <-deadline:
			b.Fatalf("no %s arrived", what)
		}
	}
}

func BenchmarkROS_ApprovedCommandLatency(b *testing.B) {
	r := startBenchROS(b)
	seen := map[string]bool{}
	var viaBridge, direct []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The bridge: HTTP call → runner → supervisor gate → driver →
		// TCPROS → subscriber. The target is where the robot stands, so
		// the task ends at once and the next sample is not ROBOT_BUSY.
		st, _, ok := r.b.Supervisor().Latest()
		require.True(b, ok)
		drain(r.goals)
		t0 := time.Now()
		env := r.call(b, "move_base_to", map[string]any{
			"arguments":  map[string]any{"x": st.Base.X, "y": st.Base.Y},
			"session_id": fmt.Sprintf("bench-%d", i),
		})
		a := next(b, r.goals, t0, seen, "goal on /move_base/goal")
		viaBridge = append(viaBridge, a.at.Sub(t0))
		b.StopTimer()
		task, _ := env["task"].(map[string]any)
		require.NotNil(b, task, "envelope: %v", env)
		v, err := r.b.Runner().Wait(context.Background(), task["id"].(string), 10*time.Second)
		require.NoError(b, err)
		require.Equal(b, "succeeded", string(v.Status), "task: %+v", v)
		b.StartTimer()

		// The floor: a goroslib publisher straight to the subscriber.
		m := &rosmsg.MoveBaseActionGoal{}
		m.GoalId.Id = fmt.Sprintf("direct-%d", i)
		drain(r.direct)
		t1 := time.Now()
		r.pub.Write(m)
		d := next(b, r.direct, t1, seen, "goal on /bench/goal")
		direct = append(direct, d.at.Sub(t1))
	}
	b.StopTimer()
	rostest.ReportVsDirect(b, "http", viaBridge, direct)
}

func BenchmarkROS_StopLatency(b *testing.B) {
	r := startBenchROS(b)
	var cancels, twists []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Stop → supervisor → driver: cancel-all on /move_base/cancel and a
		// zero Twist on /cmd_vel, each timed to its subscriber. (Stop is
		// sent whether or not a task runs; it never waits for the robot.)
		drain(r.cancels)
		drain(r.twists)
		t0 := time.Now()
		env := r.call(b, "stop", map[string]any{"arguments": map[string]any{}, "session_id": fmt.Sprintf("stop-%d", i)})
		c := next(b, r.cancels, t0, nil, "cancel on /move_base/cancel")
		tw := next(b, r.twists, t0, nil, "zero Twist on /cmd_vel")
		cancels = append(cancels, c.at.Sub(t0))
		twists = append(twists, tw.at.Sub(t0))
		require.Equal(b, true, env["ok"], "envelope: %v", env)
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
