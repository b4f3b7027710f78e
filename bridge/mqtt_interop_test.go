package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Interop with Debian's MQTT clients: what the bridge publishes is what
// the committed schema says, a robot played from a script with the
// broker's _pub client is driven like any other, and one that never acks
// is stopped and reported. Then the robot's and the broker's failures.

// commandSchema compiles the committed command schema.
func commandSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := mqtt.Schemas.ReadFile("schema/command.schema.json")
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("mem://command.schema.json", doc))
	s, err := c.Compile("mem://command.schema.json")
	require.NoError(t, err)
	return s
}

func TestMQTT_SubscriberSeesCommandsMatchingTheSchema(t *testing.T) {
	h := startMQTT(t, false, nil)
	topics := mqtt.Topics{Prefix: h.cfg.Transport.MQTT.TopicPrefix, ID: h.cfg.Robot.ID}
	sub := mqtttest.Subscribe(t, h.url, topics.Prefix+"/+/cmd/+")

	// When an approved drive runs to its end
	id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": 0.3, "y": 0.0})
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 60*time.Second))["status"])

	// Then a plain subscriber saw its command, its refreshes and nothing
	// that breaks the committed schema
	schema := commandSchema(t)
	seen := map[string]int{}
	var moveIDs []string
	for _, line := range sub.Lines() {
		topic, payload, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		action, ok := topics.ActionOf(topic)
		require.True(t, ok, "a command on a topic outside the layout: %s", topic)
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(payload))
		require.NoError(t, err, payload)
		require.NoError(t, schema.Validate(v), "%s: %s", topic, payload)
		c, err := mqtt.DecodeCommand([]byte(payload))
		require.NoError(t, err)
		require.Equal(t, action, c.Action, "the payload's action is its topic's")
		seen[action]++
		if action == mqtt.ActionMoveBase {
			moveIDs = append(moveIDs, c.ID)
			require.InDelta(t, 0.3, c.Base.Target.X, 1e-9)
			require.True(t, c.Deadline.After(c.Issued))
		}
	}
	require.Len(t, moveIDs, 1, "lines: %v", sub.Lines())
	require.True(t, strings.HasPrefix(moveIDs[0], id), "command id %q names the task %q", moveIDs[0], id)
	require.Positive(t, seen[mqtt.ActionRefresh], "no refresh fed the robot's watchdog")
	acted := 0
	for _, e := range h.sim.CommandLog() {
		if e.Op == "command" && !e.Duplicate {
			acted++
			require.Equal(t, moveIDs[0], e.ID, "the robot acted on the id the wire carried")
		}
	}
	require.Equal(t, 1, acted)
}

// scriptRobot is a robot played from a script with Debian's clients: it
// says it is online, publishes its state at 20 Hz, watches its command
// topics with the _sub client and, when ack is set, answers a move_base
// with accepted, drives to the target in a straight jump over 0.3 s and
// answers done.
type scriptRobot struct {
	t      *testing.T
	url    string
	topics mqtt.Topics
	ack    bool

	mu    sync.Mutex
	state robot.State // guarded by mu
	stop  chan struct{}
	done  chan struct{}
}

func startScriptRobot(t *testing.T, cfg *hwconfig.Config, url string, ack bool) *scriptRobot {
	t.Helper()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	r := &scriptRobot{
		t: t, url: url, ack: ack, state: s.State(),
		topics: mqtt.Topics{Prefix: cfg.Transport.MQTT.TopicPrefix, ID: cfg.Robot.ID},
		stop:   make(chan struct{}), done: make(chan struct{}),
	}
	r.state.Detections = nil
	sub := mqtttest.Subscribe(t, url, r.topics.CmdFilter())
	mqtttest.Publish(t, url, r.topics.Status(), mqtt.StatusOnline, true)
	var wg sync.WaitGroup
	wg.Go(func() {
		seq := uint64(0)
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			seq++
			r.mu.Lock()
			st := r.state
			r.mu.Unlock()
			raw, _ := json.Marshal(mqtt.StateFrom(st, "script", seq, time.Now()))
			_ = mqtttest.TryPublish(url, r.topics.State(), string(raw)) // the test ending races the publisher
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			p, ok := sub.Next(r.topics.Cmd(mqtt.ActionMoveBase), 100*time.Millisecond)
			if !ok || !r.ack {
				continue
			}
			c, err := mqtt.DecodeCommand([]byte(p))
			if err != nil {
				continue
			}
			r.answer(c.ID, mqtt.AckAccepted)
			time.Sleep(300 * time.Millisecond)
			r.mu.Lock()
			r.state.Base = c.Base.Target
			r.mu.Unlock()
			time.Sleep(150 * time.Millisecond)
			r.answer(c.ID, mqtt.AckDone)
		}
	})
	go func() {
		wg.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		close(r.stop)
		<-r.done
	})
	return r
}

func (r *scriptRobot) answer(id, status string) {
	raw, _ := json.Marshal(mqtt.Ack{V: mqtt.Version, ID: id, Status: status, Stamp: time.Now()})
	_ = mqtttest.TryPublish(r.url, r.topics.Ack(), string(raw))
}

// startScriptedMQTT boots Debian's broker, the bridge and a scripted robot.
func startScriptedMQTT(t *testing.T, ack bool) (*harness, *scriptRobot, *mqttHarness) {
	t.Helper()
	mh := &mqttHarness{broker: mqtttest.StartBroker(t)}
	mh.url = mh.broker.URL
	cfg := mqttTestConfig(t, func(c *hwconfig.Config) {
		c.Transport.MQTT.Broker, c.Transport.MQTT.Listen = mh.url, ""
		// A script publishes in whole processes: be lenient on silence.
		c.Safety.StateTimeout = hwconfig.Duration(2 * time.Second)
	})
	mh.cfg = cfg
	b := newTestBridge(t, cfg, nil)
	r := startScriptRobot(t, cfg, mh.url, ack)
	h := &harness{t: t, b: b, base: "http://" + b.Addr(), agent: testAgentTok, operator: testOperatorTok, client: &http.Client{Timeout: 90 * time.Second}}
	h.waitReady()
	return h, r, mh
}

func TestMQTT_ScriptedRobotIsDrivenAndOneThatNeverAcksIsStopped(t *testing.T) {
	t.Run("acks", func(t *testing.T) {
		h, _, _ := startScriptedMQTT(t, true)
		// When an approved drive runs on a robot played by a script
		id := startApproved(t, h, "move_base_to", map[string]any{"x": 0.5, "y": 0.0})
		// Then it succeeds on the robot's own done ack and state
		data := taskData(h.waitTask(id, 60*time.Second))
		require.Equal(t, "succeeded", data["status"], "task: %v", data)
	})
	t.Run("never acks", func(t *testing.T) {
		h, r, mh := startScriptedMQTT(t, false)
		sub := mqtttest.Subscribe(t, mh.url, r.topics.CmdFilter())
		// When the robot never answers a command
		id := startApproved(t, h, "move_base_to", map[string]any{"x": 0.5, "y": 0.0})
		env := h.waitTask(id, 60*time.Second)
		// Then the task fails saying the robot did not acknowledge it
		e := taskError(t, env)
		require.Contains(t, fmt.Sprint(e["message"]), "did not acknowledge", "error: %v", e)
		// and a stop followed the command on the wire
		var order []string
		for _, l := range sub.Lines() {
			topic, _, _ := strings.Cut(l, " ")
			if a, ok := r.topics.ActionOf(topic); ok && a != mqtt.ActionRefresh {
				order = append(order, a)
			}
		}
		i := strings.Index(strings.Join(order, ","), mqtt.ActionMoveBase)
		require.GreaterOrEqual(t, i, 0, "no command: %v", order)
		require.Contains(t, strings.Join(order, ",")[i:], mqtt.ActionStop, "no stop after the command: %v", order)
	})
}

func TestMQTT_RobotLostMidMotionThenBack(t *testing.T) {
	h := startMQTT(t, false, nil)
	safetyEvents := watchSafety(t, h.harness)

	// Given a motion under way
	id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": -2.0, "y": -1.5})
	waitMoving(t, h.harness)
	watchdogBefore := h.node.Sim().WatchdogFires()

	// When the robot's network is cut: the broker publishes its last will
	h.node.Disconnect()

	// Then the supervisor stops the motion
	trip := safetyEvents.wait(t, "monitor_tripped", id)
	require.Contains(t, []string{"link_down", "state_silence"}, fmt.Sprint(trip["monitor"]))
	safetyEvents.wait(t, "stop_sent", id)
	// and the robot, cut off from the refreshes, stops on its own watchdog
	rostest.Eventually(t, 10*time.Second, func() bool {
		tr := h.node.Sim().Truth()
		return h.node.Sim().WatchdogFires() > watchdogBefore && math.Abs(tr.Velocity.V) < 1e-3 && math.Abs(tr.Velocity.W) < 1e-3
	}, "the simulated robot never stopped on its own watchdog")
	env := h.waitTask(id, 60*time.Second)
	require.Equal(t, "UNAVAILABLE", taskError(t, env)["type"])
	waitLinkMetric(t, h.harness, 0, 10*time.Second)

	// When an operator clears what latched and the robot is still gone,
	// Then motions fail UNAVAILABLE and nothing reaches the robot
	if h.b.Supervisor().Status().Fault.Latched {
		clearFault(t, h.harness)
	}
	commands := motionCommands(h.node.Sim())
	requireMotionUnavailable(t, h.harness, map[string]any{"x": 0.0, "y": 0.0})
	require.Equal(t, commands, motionCommands(h.node.Sim()))

	// When the network is back, Then the link recovers by itself and a new
	// motion succeeds
	h.node.Connect()
	waitFresh(t, h.harness)
	waitLinkMetric(t, h.harness, 1, 20*time.Second)
	id = startApproved(t, h.harness, "move_base_to", map[string]any{"location": "home"})
	data := taskData(h.waitTask(id, 60*time.Second))
	require.Equal(t, "succeeded", data["status"], "task: %v", data)
}

func TestMQTT_BrokerRestart(t *testing.T) {
	h := startMQTT(t, false, nil)
	require.InDelta(t, 1.0, linkUpMetric(t, h.harness), 1e-9)

	// When the broker dies
	h.broker.Kill()

	// Then the link goes down and motions fail UNAVAILABLE
	waitLinkMetric(t, h.harness, 0, 10*time.Second)
	commands := motionCommands(h.node.Sim())
	requireMotionUnavailable(t, h.harness, map[string]any{"x": 0.5, "y": 0.0})
	require.Equal(t, commands, motionCommands(h.node.Sim()))

	// When an empty broker starts on the same port (no retained message,
	// no subscription survives), Then both ends reconnect and resubscribe
	// on their own and a motion succeeds
	h.broker.Start()
	waitFresh(t, h.harness)
	waitLinkMetric(t, h.harness, 1, 30*time.Second)
	id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": 0.5, "y": 0.0})
	data := taskData(h.waitTask(id, 60*time.Second))
	require.Equal(t, "succeeded", data["status"], "task: %v", data)
	// The restarted broker's cleanup was registered after the bridge's
	// and would run first: stop the bridge while the broker still runs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.b.Stop(ctx))
}
