package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

var quiet = slog.New(slog.DiscardHandler)

// mqttConfig is the bundled MQTT config pointed at broker, reconnecting
// quickly.
func mqttConfig(t testing.TB, broker string) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "mqtt-sim.yaml"))
	require.NoError(t, err)
	cfg.Sim.FalsePositiveRate = 0
	cfg.Transport.MQTT.Broker = broker
	cfg.Transport.MQTT.Listen = ""
	cfg.Transport.MQTT.ReconnectMax = hwconfig.Duration(time.Second)
	require.NoError(t, cfg.Validate())
	return cfg
}

// rig is a broker, the simulator as an MQTT robot and the driver.
type rig struct {
	cfg   *hwconfig.Config
	url   string
	mosq  *mqtttest.Broker // nil on the embedded broker
	node  *simnode.Node
	drv   *mqtt.Driver
	reg   *prometheus.Registry
	topic mqtt.Topics
}

// brokers are the two brokers every driver test runs against: the
// embedded one and Debian's (package mqtttest).
var brokers = []string{"embedded", "external"}

func startBroker(t *testing.T, kind string) (string, *mqtttest.Broker) {
	t.Helper()
	if kind == "embedded" {
		b, err := mqtt.StartBroker("127.0.0.1:0", quiet)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b.URL(), nil
	}
	m := mqtttest.StartBroker(t)
	return m.URL, m
}

func newRig(t *testing.T, kind string, withRobot bool) *rig {
	t.Helper()
	url, m := startBroker(t, kind)
	cfg := mqttConfig(t, url)
	r := &rig{cfg: cfg, url: url, mosq: m, reg: prometheus.NewRegistry()}
	r.topic = mqtt.Topics{Prefix: cfg.Transport.MQTT.TopicPrefix, ID: cfg.Robot.ID}
	if withRobot {
		n, err := simnode.New(simnode.Conf{Config: cfg, Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, n.Start(context.Background()))
		t.Cleanup(func() { _ = n.Close() })
		r.node = n
	}
	d, err := mqtt.New(mqtt.Conf{Config: cfg, Logger: quiet, Registerer: r.reg})
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Close() })
	r.drv = d
	if withRobot {
		rostest.Eventually(t, 10*time.Second, d.LinkUp, "the link never came up")
	}
	return r
}

// refresh feeds the robot's watchdog, as the supervisor does during a
// motion, until the test ends.
func refresh(t *testing.T, r *rig) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				_ = r.drv.Refresh(context.Background()) // a lost refresh shows as the robot's watchdog stop
			}
		}
	}()
}

func baseCmd(id string, x, y float64) robot.Command {
	return robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: x, Y: y}, MaxLinear: 0.8, MaxAngular: 1.5}}
}

// motions is the simulator's own log of motion commands, duplicates
// included.
func motions(s *sim.Sim) (acted, duplicates []sim.LogEntry) {
	for _, e := range s.CommandLog() {
		if e.Op != "command" {
			continue
		}
		if e.Duplicate {
			duplicates = append(duplicates, e)
		} else {
			acted = append(acted, e)
		}
	}
	return acted, duplicates
}

func TestDriver_DrivesTheRobotToTheGoalAndReportsItDone(t *testing.T) {
	for _, kind := range brokers {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t, kind, true)
			refresh(t, r)
			// When a goal is sent, Then Send returns on the accepted ack
			require.NoError(t, r.drv.Send(context.Background(), baseCmd("task-1-1", 0.4, 0)))
			// and the robot's done ack is the goal's verdict
			rostest.Eventually(t, 30*time.Second, func() bool { _, ok := r.drv.GoalSucceeded("task-1-1"); return ok }, "no done ack")
			text, _ := r.drv.GoalSucceeded("task-1-1")
			require.Equal(t, "goal reached", text)
			_, ok := r.drv.GoalSucceeded("task-1-2")
			require.False(t, ok, "another command is not reported done")
			require.InDelta(t, 0.4, r.node.Sim().Truth().Base.X, 0.06)
			acted, dups := motions(r.node.Sim())
			require.Len(t, acted, 1)
			require.Equal(t, "task-1-1", acted[0].ID)
			require.Empty(t, dups)
			st, ok := r.drv.Latest()
			require.True(t, ok)
			require.True(t, st.Battery.Known)
			require.InDelta(t, 1.0, testutil.ToFloat64(r.drv.Metrics().Acks.WithLabelValues("accepted")), 0)
			require.GreaterOrEqual(t, testutil.ToFloat64(r.drv.Metrics().Acks.WithLabelValues("progress")), 1.0, "no progress ack while the base drove")
			require.InDelta(t, 1.0, testutil.ToFloat64(r.drv.Metrics().Acks.WithLabelValues("done")), 0)
		})
	}
}

// publish sends v (JSON unless a string) to topic with the broker's _pub client.
func publish(t *testing.T, r *rig, topic string, v any, retain bool) {
	t.Helper()
	var msg string
	switch p := v.(type) {
	case string:
		msg = p
	default:
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		msg = string(raw)
	}
	mqtttest.Publish(t, r.url, topic, msg, retain)
}

func TestSimnode_RedeliveredCommandMovesOnceAndLateOneIsRefused(t *testing.T) {
	r := newRig(t, "external", true)
	sub := mqtttest.Subscribe(t, r.url, r.topic.Ack())
	now := time.Now()
	cmd, err := mqtt.CommandFrom(baseCmd("redeliver-1", 0.3, 0), now, now.Add(2*time.Second))
	require.NoError(t, err)

	// Given a command delivered, When the very same payload is delivered
	// again (a QoS 1 redelivery)
	publish(t, r, r.topic.Cmd(mqtt.ActionMoveBase), cmd, false)
	first, ok := sub.Next(r.topic.Ack(), 10*time.Second)
	require.True(t, ok)
	publish(t, r, r.topic.Cmd(mqtt.ActionMoveBase), cmd, false)
	var again mqtt.Ack
	rostest.Eventually(t, 10*time.Second, func() bool {
		p, ok := sub.Next(r.topic.Ack(), 100*time.Millisecond)
		if !ok {
			return false
		}
		require.NoError(t, json.Unmarshal([]byte(p), &again))
		return again.Duplicate
	}, "no duplicate ack")

	// Then the robot answered both, acted once, and its own log shows the
	// second as a duplicate
	require.Contains(t, first, `"status":"accepted"`)
	require.Equal(t, mqtt.AckAccepted, again.Status)
	acted, dups := motions(r.node.Sim())
	require.Len(t, acted, 1, "the redelivery moved the robot again")
	require.Len(t, dups, 1)
	require.Equal(t, "redeliver-1", dups[0].ID)

	// When a command arrives after its deadline, Then it is refused with
	// the reason and nothing else reaches the simulator
	late, err := mqtt.CommandFrom(baseCmd("late-1", -0.3, 0), now.Add(-3*time.Second), now.Add(-2*time.Second))
	require.NoError(t, err)
	publish(t, r, r.topic.Cmd(mqtt.ActionMoveBase), late, false)
	var refused mqtt.Ack
	rostest.Eventually(t, 10*time.Second, func() bool {
		p, ok := sub.Next(r.topic.Ack(), 100*time.Millisecond)
		if !ok {
			return false
		}
		require.NoError(t, json.Unmarshal([]byte(p), &refused))
		return refused.ID == "late-1"
	}, "no answer to the late command")
	require.Equal(t, mqtt.AckFailed, refused.Status)
	require.Contains(t, refused.Reason, "deadline passed")
	acted, _ = motions(r.node.Sim())
	require.Len(t, acted, 1)
}

// scriptedRobot is a robot played by the broker's _pub client: it announces itself
// online and publishes states, and acks nothing.
func scriptedRobot(t *testing.T, r *rig, stop <-chan struct{}) {
	t.Helper()
	publish(t, r, r.topic.Status(), mqtt.StatusOnline, true)
	go func() {
		seq := uint64(0)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			seq++
			raw, _ := json.Marshal(mqtt.StateFrom(robot.State{}, "script", seq, time.Now()))
			// Errors are the test's end racing the publisher.
			_ = mqtttest.TryPublish(r.url, r.topic.State(), string(raw))
		}
	}()
}

func TestDriver_RobotThatNeverAcksFailsTheCommandInWords(t *testing.T) {
	r := newRig(t, "external", false)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	scriptedRobot(t, r, stop)
	rostest.Eventually(t, 10*time.Second, r.drv.LinkUp, "the scripted robot's link never came up")

	// When a command gets no ack, Then Send fails saying so
	err := r.drv.Send(context.Background(), baseCmd("noack-1", 1, 0))
	require.ErrorIs(t, err, mqtt.ErrNoAck)
	require.Contains(t, err.Error(), "within the ack timeout of 500ms")
	require.InDelta(t, 1.0, testutil.ToFloat64(r.drv.Metrics().AckTimeouts), 0)
}

func TestDriver_StatesOutOfOrderStaleFutureOrMalformedAreDroppedAndCounted(t *testing.T) {
	r := newRig(t, "embedded", false)
	publish(t, r, r.topic.Status(), mqtt.StatusOnline, true)
	now := time.Now()
	st := func(sess string, seq uint64, at time.Time, x float64) mqtt.State {
		return mqtt.StateFrom(robot.State{Base: robot.Pose2D{X: x}}, sess, seq, at)
	}
	tests := []struct {
		name   string
		msg    any
		reason mqtt.Reason // "" when accepted
		x      float64     // the newest accepted state's x afterwards
	}{
		{"first state", st("boot-a", 5, now, 1), "", 1},
		{"repeated seq", st("boot-a", 5, now.Add(time.Millisecond), 2), mqtt.ReasonOutOfOrder, 1},
		{"older seq", st("boot-a", 4, now.Add(time.Millisecond), 2), mqtt.ReasonOutOfOrder, 1},
		{"next seq", st("boot-a", 6, now.Add(2*time.Millisecond), 3), "", 3},
		{"a restarted robot counts from 1 in a new session", st("boot-b", 1, now.Add(3*time.Millisecond), 4), "", 4},
		{"a late state of the old session", st("boot-a", 7, now.Add(2500*time.Microsecond), 5), mqtt.ReasonOutOfOrder, 4},
		{"stale", st("boot-b", 2, now.Add(-10*time.Second), 6), mqtt.ReasonStale, 4},
		{"from the future", st("boot-b", 3, now.Add(10*time.Second), 7), mqtt.ReasonFuture, 4},
		{"malformed", `{"v":1,"session":`, mqtt.ReasonMalformed, 4},
		{"another version", `{"v":9}`, mqtt.ReasonVersion, 4},
		{"oversized", `{"v":1,"pad":"` + strings.Repeat("x", mqtt.MaxPayload) + `"}`, mqtt.ReasonOversized, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := map[mqtt.Reason]float64{}
			for _, rs := range mqtt.Reasons {
				before[rs] = testutil.ToFloat64(r.drv.Metrics().Dropped.WithLabelValues(string(rs)))
			}
			publish(t, r, r.topic.State(), tc.msg, false)
			if tc.reason != "" {
				rostest.Eventually(t, 5*time.Second, func() bool {
					return testutil.ToFloat64(r.drv.Metrics().Dropped.WithLabelValues(string(tc.reason))) == before[tc.reason]+1
				}, "not counted as %s", tc.reason)
			} else {
				rostest.Eventually(t, 5*time.Second, func() bool {
					s, ok := r.drv.Latest()
					return ok && s.Base.X == tc.x
				}, "state not accepted")
			}
			s, ok := r.drv.Latest()
			require.True(t, ok)
			require.InDelta(t, tc.x, s.Base.X, 0)
			for _, rs := range mqtt.Reasons {
				want := before[rs]
				if rs == tc.reason {
					want++
				}
				require.InDelta(t, want, testutil.ToFloat64(r.drv.Metrics().Dropped.WithLabelValues(string(rs))), 0, "reason %s", rs)
			}
		})
	}
}

func TestDriver_LastWillTakesTheLinkDownAtOnceAndReconnectBringsItBack(t *testing.T) {
	for _, kind := range brokers {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t, kind, true)
			// When the robot's network is cut (no MQTT DISCONNECT: the
			// broker publishes its last will)
			r.node.Disconnect()
			// Then the link is down, and a command fails fast
			rostest.Eventually(t, 10*time.Second, func() bool { return !r.drv.LinkUp() }, "the link stayed up")
			require.ErrorIs(t, r.drv.Send(context.Background(), baseCmd("cut-1", 1, 0)), mqtt.ErrLinkDown)
			// When the network is back, Then the link recovers by itself
			r.node.Connect()
			rostest.Eventually(t, 20*time.Second, r.drv.LinkUp, "the link never came back")
			require.NoError(t, r.drv.Send(context.Background(), baseCmd("cut-2", 0.2, 0)))
			acted, _ := motions(r.node.Sim())
			require.Len(t, acted, 1)
			require.Equal(t, "cut-2", acted[0].ID)
		})
	}
}

func TestDriver_StopFailsAtOnceWithoutABrokerAndWorksAfterItsRestart(t *testing.T) {
	r := newRig(t, "external", true)
	require.NoError(t, r.drv.Stop(context.Background()))
	stopsBefore := r.node.Sim().Counters().Stops

	// When the broker dies
	r.mosq.Kill()
	rostest.Eventually(t, 10*time.Second, func() bool { return !r.drv.LinkUp() }, "the link stayed up")
	// Then a stop returns an error (the supervisor latches on it)
	err := r.drv.Stop(context.Background())
	require.ErrorIs(t, err, mqtt.ErrLinkDown)
	require.ErrorIs(t, r.drv.Refresh(context.Background()), mqtt.ErrLinkDown)
	require.ErrorIs(t, r.drv.Send(context.Background(), baseCmd("during-outage-1", 1, 0)), mqtt.ErrLinkDown)

	// When the broker is back, Then both ends reconnect and resubscribe
	// on their own, and a stop reaches the robot again
	r.mosq.Start()
	rostest.Eventually(t, 30*time.Second, r.drv.LinkUp, "the link never came back after the broker restart")
	require.NoError(t, r.drv.Stop(context.Background()))
	rostest.Eventually(t, 10*time.Second, func() bool { return r.node.Sim().Counters().Stops > stopsBefore }, "the stop never arrived")
	// and the command refused during the outage was never replayed
	acted, dups := motions(r.node.Sim())
	require.Empty(t, acted, "a command of the outage reached the robot after the reconnect")
	require.Empty(t, dups)
}

func TestDriver_StopNeverWaitsBehindACommandInFlight(t *testing.T) {
	r := newRig(t, "embedded", true)
	// Given a robot whose acceptance is delayed by 1 s (past the 500 ms
	// ack timeout)
	_, err := r.node.Sim().Inject(sim.Fault{Kind: sim.FaultDelayAck, Delay: time.Second})
	require.NoError(t, err)
	var sent atomic.Bool
	errc := make(chan error, 1)
	go func() {
		err := r.drv.Send(context.Background(), baseCmd("slow-1", 1, 0))
		sent.Store(true)
		errc <- err
	}()
	rostest.Eventually(t, 5*time.Second, func() bool {
		return testutil.ToFloat64(r.drv.Metrics().Commands.WithLabelValues("move_base")) == 1
	}, "the command never left")
	// When a stop is issued while the command awaits its ack, Then the
	// stop returns while Send still waits
	require.NoError(t, r.drv.Stop(context.Background()))
	require.False(t, sent.Load(), "Stop returned only after Send")
	// and Send fails without an ack, saying so
	err = <-errc
	require.ErrorIs(t, err, mqtt.ErrNoAck, "%v", err)
	// Then the robot, having had the stop first, refuses the older command
	// when it gets to it (an answer nobody waits for any more), and
	// nothing reached the simulator
	rostest.Eventually(t, 10*time.Second, func() bool {
		return testutil.ToFloat64(r.drv.Metrics().Dropped.WithLabelValues(string(mqtt.ReasonUnknownCommand))) == 1
	}, "the robot never answered the late command")
	acted, _ := motions(r.node.Sim())
	require.Empty(t, acted, "the command reached the simulator")
	require.Zero(t, r.node.Sim().Odometer().BaseDistance)
}

func TestDriver_ConcurrentStopsAreSafe(t *testing.T) {
	r := newRig(t, "embedded", true)
	before := r.node.Sim().Counters().Stops
	done := make(chan error, 16)
	for range 16 {
		go func() { done <- r.drv.Stop(context.Background()) }()
	}
	for range 16 {
		require.NoError(t, <-done)
	}
	rostest.Eventually(t, 10*time.Second, func() bool { return r.node.Sim().Counters().Stops-before == 16 }, "not every stop arrived (got %d)", r.node.Sim().Counters().Stops-before)
}

func TestConnection_LogValueNeverHoldsThePassword(t *testing.T) {
	m := &hwconfig.MQTTConf{Broker: "tcp://user:urlsecret@127.0.0.1:1883", Username: "bridge", PasswordEnv: "MQTT_PW"}
	c, err := mqtt.ConnectionFrom(m, "", "id", func(string) string { return "s3cret-pw" })
	require.NoError(t, err)
	require.Equal(t, "s3cret-pw", c.Password)
	out := fmt.Sprint(c.LogValue())
	require.NotContains(t, out, "s3cret-pw")
	require.NotContains(t, out, "urlsecret")
	require.Contains(t, out, "bridge")

	_, err = mqtt.ConnectionFrom(m, "", "id", func(string) string { return "" })
	require.ErrorContains(t, err, "password_env names MQTT_PW, which is not set or empty")
}

func TestDriver_RobotOfflineIsLinkDownEvenWithFreshState(t *testing.T) {
	r := newRig(t, "external", false)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	scriptedRobot(t, r, stop)
	rostest.Eventually(t, 10*time.Second, r.drv.LinkUp, "the scripted robot's link never came up")

	// When the robot's status turns offline (its last will) while states
	// still arrive
	publish(t, r, r.topic.Status(), mqtt.StatusOffline, true)

	// Then the link is down, though the newest state is fresh
	rostest.Eventually(t, 5*time.Second, func() bool { return !r.drv.LinkUp() }, "offline status ignored")
	stamp := func() time.Time { s, _ := r.drv.Latest(); return s.Stamp }
	before := stamp()
	rostest.Eventually(t, 5*time.Second, func() bool { return stamp().After(before) }, "states stopped arriving")
	require.False(t, r.drv.LinkUp(), "a fresh state brought the link back while the robot says offline")
	require.ErrorIs(t, r.drv.Send(context.Background(), baseCmd("offline-1", 1, 0)), mqtt.ErrLinkDown)

	// When it says online again, Then the link is back
	publish(t, r, r.topic.Status(), mqtt.StatusOnline, true)
	rostest.Eventually(t, 5*time.Second, r.drv.LinkUp, "online status ignored")
}

func TestSimnode_RefusesAMotionIssuedBeforeItsNewestStop(t *testing.T) {
	r := newRig(t, "external", true)
	sub := mqtttest.Subscribe(t, r.url, r.topic.Ack())
	now := time.Now()
	// Given a stop issued now, When a motion issued before it arrives
	// after it (commands and stops travel on different topics)
	publish(t, r, r.topic.Cmd(mqtt.ActionStop), mqtt.Command{V: 1, ID: "stop-x", Action: mqtt.ActionStop, Issued: now}, false)
	older, err := mqtt.CommandFrom(baseCmd("older-1", 1, 0), now.Add(-100*time.Millisecond), now.Add(5*time.Second))
	require.NoError(t, err)
	publish(t, r, r.topic.Cmd(mqtt.ActionMoveBase), older, false)
	// Then the robot refuses it, and nothing moved
	p, ok := sub.Next(r.topic.Ack(), 10*time.Second)
	require.True(t, ok, "no answer")
	var a mqtt.Ack
	require.NoError(t, json.Unmarshal([]byte(p), &a))
	require.Equal(t, mqtt.AckFailed, a.Status)
	require.Equal(t, "superseded by a stop issued after it", a.Reason)
	acted, _ := motions(r.node.Sim())
	require.Empty(t, acted)
}
