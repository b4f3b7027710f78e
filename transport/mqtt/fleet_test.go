package mqtt_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// fleetConfigs are n copies of the bundled MQTT config with ids r1 … rn,
// each starting at its own x (so a state names its robot) with its own
// seed, publishing at 10 Hz.
func fleetConfigs(t testing.TB, broker string, n int) []*hwconfig.Config {
	t.Helper()
	base := mqttConfig(t, broker)
	base.Sim.PhysicsHz, base.Sim.StateHz = 20, 10
	cfgs := make([]*hwconfig.Config, n)
	for i := range cfgs {
		c := base.Clone()
		c.Robot.ID = fmt.Sprintf("r%d", i+1)
		c.Sim.Seed = base.Sim.Seed + int64(i)
		c.Sim.Start.X = startX(i)
		require.NoError(t, c.Validate())
		cfgs[i] = c
	}
	return cfgs
}

// startX is robot i's (0-based) start x, distinct for 50 robots inside
// the workspace.
func startX(i int) float64 { return -4 + float64(i)*0.16 }

// fleetRig is a fleet of simulated robots, all but one sharing a
// simnode.Link; the odd one (r7) has its own connection and so its own
// last will; and the bridge's Fleet over one connection.
type fleetRig struct {
	url   string
	mosq  *mqtttest.Broker
	cfgs  []*hwconfig.Config
	nodes []*simnode.Node
	fleet *mqtt.Fleet
	reg   *prometheus.Registry
}

const loner = 6 // r7: the robot with a connection of its own

func newFleetRig(t *testing.T, kind string, n int) *fleetRig {
	t.Helper()
	url, m := startBroker(t, kind)
	r := &fleetRig{url: url, mosq: m, cfgs: fleetConfigs(t, url, n), reg: prometheus.NewRegistry()}
	link, err := simnode.NewLink(simnode.LinkConf{Config: r.cfgs[0], ClientID: "fleet-test-sims", Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, link.Start(context.Background()))
	t.Cleanup(func() { _ = link.Close() })
	for i, c := range r.cfgs {
		conf := simnode.Conf{Config: c, Logger: quiet, Link: link}
		if i == loner {
			conf.Link = nil
		}
		node, err := simnode.New(conf)
		require.NoError(t, err)
		require.NoError(t, node.Start(context.Background()))
		t.Cleanup(func() { _ = node.Close() })
		r.nodes = append(r.nodes, node)
	}
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: r.cfgs, Logger: quiet, Registerer: r.reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	for _, d := range f.Drivers() {
		require.NoError(t, d.Start(context.Background()))
	}
	r.fleet = f
	rostest.Eventually(t, 20*time.Second, func() bool { return len(r.down()) == 0 }, "links never came up: %v", r.down())
	return r
}

// down lists the robots whose link is down.
func (r *fleetRig) down() []string {
	var ids []string
	for _, d := range r.fleet.Drivers() {
		if !d.LinkUp() {
			ids = append(ids, d.Topics().ID)
		}
	}
	return ids
}

// cmdTopics records every command topic published under the prefix.
type cmdTopics struct {
	mu     sync.Mutex
	topics []string
}

func watchCommands(t *testing.T, url string) *cmdTopics {
	t.Helper()
	w := &cmdTopics{}
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("fleet-test-cmd-watch"))
	require.True(t, c.Connect().WaitTimeout(10*time.Second))
	t.Cleanup(func() { c.Disconnect(0) })
	tok := c.Subscribe("robots/+/cmd/+", 1, func(_ paho.Client, m paho.Message) {
		w.mu.Lock()
		w.topics = append(w.topics, m.Topic())
		w.mu.Unlock()
	})
	require.True(t, tok.WaitTimeout(10*time.Second))
	require.NoError(t, tok.Error())
	return w
}

func (w *cmdTopics) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.topics...)
}

func TestFleet_FiftyRobotsOverOneConnection(t *testing.T) {
	for _, kind := range brokers {
		t.Run(kind, func(t *testing.T) {
			const n = 50
			r := newFleetRig(t, kind, n)
			cmds := watchCommands(t, r.url)

			// Then each robot's state reaches its own driver only: every
			// driver's newest state is at its own robot's start
			for i, d := range r.fleet.Drivers() {
				require.Equal(t, fmt.Sprintf("r%d", i+1), d.Topics().ID)
				st, ok := d.Latest()
				require.True(t, ok, "robot %d has no state", i+1)
				require.InDelta(t, startX(i), st.Base.X, 1e-6, "robot %d's driver holds another robot's state", i+1)
			}
			d7 := r.fleet.Driver("r7")
			require.NotNil(t, d7)
			require.Nil(t, r.fleet.Driver("r51"))
			states, unsub := d7.Subscribe()
			for range 5 {
				select {
				case st := <-states:
					require.InDelta(t, startX(6), st.Base.X, 0.2)
				case <-time.After(5 * time.Second):
					t.Fatal("no state streamed to robot 7's subscriber")
				}
			}
			unsub()

			// When robot 7 is sent a goal, Then only robot 7's command
			// topic carried it and only robot 7's simulator acted on it
			stopRefresh := make(chan struct{})
			refreshed := make(chan struct{})
			go func() {
				defer close(refreshed)
				for {
					select {
					case <-stopRefresh:
						return
					case <-time.After(50 * time.Millisecond):
						_ = d7.Refresh(context.Background()) // a lost refresh shows as a watchdog stop
					}
				}
			}()
			require.NoError(t, d7.Send(context.Background(), baseCmd("fleet-7-1", startX(6), 0.3)))
			rostest.Eventually(t, 30*time.Second, func() bool { _, ok := d7.GoalSucceeded("fleet-7-1"); return ok }, "robot 7 never reached its goal")
			close(stopRefresh)
			<-refreshed
			for i, node := range r.nodes {
				acted, _ := motions(node.Sim())
				if i == 6 {
					require.Len(t, acted, 1)
					require.Equal(t, "fleet-7-1", acted[0].ID)
					continue
				}
				require.Empty(t, acted, "robot %d acted on robot 7's command", i+1)
				_, ok := r.fleet.Driver(fmt.Sprintf("r%d", i+1)).GoalSucceeded("fleet-7-1")
				require.False(t, ok)
			}
			require.NotEmpty(t, cmds.seen())
			for _, tp := range cmds.seen() {
				require.True(t, strings.HasPrefix(tp, "robots/r7/cmd/"), "a command went to %s", tp)
			}

			// When a payload names a robot that is not the fleet's, Then
			// it is dropped and counted as unknown_robot
			unknown := func() float64 {
				return testutil.ToFloat64(r.fleet.Metrics().Dropped.WithLabelValues(string(mqtt.ReasonUnknownRobot)))
			}
			before := unknown()
			publishTo(t, r.url, "robots/stranger/state", mqtt.StateFrom(robot.State{Base: robot.Pose2D{X: 9}}, "s", 1, time.Now()))
			rostest.Eventually(t, 10*time.Second, func() bool { return unknown() >= before+1 }, "the stranger's state was not counted")
			for i, d := range r.fleet.Drivers() {
				st, _ := d.Latest()
				require.InDelta(t, startX(i), st.Base.X, 0.5, "the stranger's state reached robot %d", i+1)
			}

			// When robot 7's network is cut (its own connection: the
			// broker publishes its last will), Then only robot 7 is down
			r.nodes[loner].Disconnect()
			rostest.Eventually(t, 10*time.Second, func() bool { return !d7.LinkUp() }, "robot 7 stayed up")
			// (a robot whose state came late under load is down for a
			// moment too; one marked offline would stay down)
			onlyDown(t, r, "r7")
			require.ErrorIs(t, d7.Send(context.Background(), baseCmd("fleet-7-2", 0, 0)), mqtt.ErrLinkDown)
			r.nodes[loner].Connect()
			rostest.Eventually(t, 20*time.Second, d7.LinkUp, "robot 7 never came back")

			// When a robot on the shared sim link says offline, Then only
			// it is down
			r.nodes[2].Disconnect()
			rostest.Eventually(t, 10*time.Second, func() bool { return !r.fleet.Driver("r3").LinkUp() }, "robot 3 stayed up")
			onlyDown(t, r, "r3")
			r.nodes[2].Connect()
			rostest.Eventually(t, 10*time.Second, r.fleet.Driver("r3").LinkUp, "robot 3 never came back")

			// When one robot's driver closes, Then the others keep the
			// connection and their links, and the closed one sends nothing
			d5 := r.fleet.Driver("r5")
			require.NoError(t, d5.Close())
			require.False(t, d5.LinkUp())
			require.ErrorIs(t, d5.Stop(context.Background()), mqtt.ErrLinkDown)
			require.True(t, r.fleet.Connected())
			onlyDown(t, r, "r5")
			// and started again on the same connection it is back at once,
			// knowing its robot's retained status
			require.NoError(t, d5.Start(context.Background()))
			rostest.Eventually(t, 10*time.Second, d5.LinkUp, "robot 5 never came back after its driver restarted")
			require.InDelta(t, 1.0, testutil.ToFloat64(r.fleet.Metrics().Connects), 0, "the fleet reconnected")
		})
	}
}

// onlyDown waits until the robot id is the only one down.
func onlyDown(t *testing.T, r *fleetRig, id string) {
	t.Helper()
	rostest.Eventually(t, 10*time.Second, func() bool {
		d := r.down()
		return len(d) == 1 && d[0] == id
	}, "not only %s down: %v", id, r.down())
}

// publishTo publishes v as JSON once with a paho client of the test's.
func publishTo(t *testing.T, url, topic string, v any) {
	t.Helper()
	raw, err := mqtt.Marshal(v)
	require.NoError(t, err)
	mqtttest.Publish(t, url, topic, string(raw), false)
}

func TestFleet_BrokerRestartTakesEveryRobotDownThenBackUp(t *testing.T) {
	r := newFleetRig(t, "external", 50)
	// When the broker dies
	r.mosq.Kill()
	// Then every robot's link is down at once
	rostest.Eventually(t, 10*time.Second, func() bool { return len(r.down()) == 50 }, "links stayed up: %d down", len(r.down()))
	require.False(t, r.fleet.Connected())
	require.ErrorIs(t, r.fleet.Driver("r1").Stop(context.Background()), mqtt.ErrLinkDown)
	// When it is back, Then every robot's link comes back on its own
	r.mosq.Start()
	rostest.Eventually(t, 40*time.Second, func() bool { return len(r.down()) == 0 }, "links never all came back: %v", r.down())
	require.InDelta(t, 2.0, testutil.ToFloat64(r.fleet.Metrics().Connects), 0)
	for i, d := range r.fleet.Drivers() {
		st, _ := d.Latest()
		require.InDelta(t, startX(i), st.Base.X, 1e-6)
	}
}

func TestFleet_CloseAnnouncesTheBridgeOfflineAndStopsEveryRobot(t *testing.T) {
	url, _ := startBroker(t, "external")
	cfgs := fleetConfigs(t, url, 3)
	sub := mqtttest.Subscribe(t, url, "robots/bridge", "robots/+/bridge", "robots/+/cmd/stop")
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	for _, d := range f.Drivers() {
		require.NoError(t, d.Start(context.Background()))
	}
	has := func(line string) bool {
		for _, l := range sub.Lines() {
			if strings.HasPrefix(l, line) {
				return true
			}
		}
		return false
	}
	rostest.Eventually(t, 10*time.Second, func() bool {
		return has("robots/bridge online") && has("robots/r1/bridge online") && has("robots/r3/bridge online")
	}, "the bridge never said online:\n%v", sub.Lines())
	// When the fleet closes, Then every robot hears a stop and the
	// bridge's offline, and the fleet's topic says offline
	require.NoError(t, f.Close())
	rostest.Eventually(t, 10*time.Second, func() bool {
		return has("robots/bridge offline") && has("robots/r2/bridge offline") && has("robots/r2/cmd/stop {")
	}, "no offline or stop:\n%v", sub.Lines())
	require.False(t, f.Connected())
	require.NoError(t, f.Close(), "a second Close")
}

func TestFleet_ConfigsMustShareTheConnection(t *testing.T) {
	cfgs := fleetConfigs(t, "tcp://127.0.0.1:1", 3)
	_, err := mqtt.NewFleet(mqtt.FleetConf{})
	require.ErrorContains(t, err, "at least one robot")

	dup := []*hwconfig.Config{cfgs[0], cfgs[1], cfgs[0]}
	_, err = mqtt.NewFleet(mqtt.FleetConf{Configs: dup})
	require.ErrorContains(t, err, `robot.id "r1" appears twice`)

	other := cfgs[2].Clone()
	other.Transport.MQTT.TopicPrefix = "elsewhere"
	_, err = mqtt.NewFleet(mqtt.FleetConf{Configs: []*hwconfig.Config{cfgs[0], other}})
	require.ErrorContains(t, err, "robot r3: transport.mqtt.topic_prefix differs from robot r1's")

	other = cfgs[2].Clone()
	other.Transport.MQTT.Broker = "tcp://127.0.0.1:2"
	_, err = mqtt.NewFleet(mqtt.FleetConf{Configs: []*hwconfig.Config{cfgs[0], other}})
	require.ErrorContains(t, err, "transport.mqtt.broker differs")

	noMQTT := cfgs[1].Clone()
	noMQTT.Transport.MQTT = nil
	_, err = mqtt.NewFleet(mqtt.FleetConf{Configs: []*hwconfig.Config{cfgs[0], noMQTT}})
	require.ErrorContains(t, err, "FleetConf.Configs[1] needs a hw-config with a transport.mqtt section")

	// A per-robot ack timeout is each robot's own.
	slow := cfgs[1].Clone()
	slow.Transport.MQTT.AckTimeout = hwconfig.Duration(2 * time.Second)
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: []*hwconfig.Config{cfgs[0], slow}})
	require.NoError(t, err)
	require.Len(t, f.Drivers(), 2)
	require.Same(t, f, f.Driver("r2").Fleet())
}

func TestFleet_StartFailsWithoutABrokerAndChangesNothing(t *testing.T) {
	port := rostest.FreePort(t)
	cfgs := fleetConfigs(t, fmt.Sprintf("tcp://127.0.0.1:%d", port), 2)
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, Logger: quiet, ReadyTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	err = f.Driver("r1").Start(context.Background())
	require.ErrorContains(t, err, "not reached within 300ms")
	require.False(t, f.Connected())
	require.False(t, f.Driver("r1").LinkUp())
	// The failed Start left the driver startable.
	b, err := mqtt.StartBroker(fmt.Sprintf("127.0.0.1:%d", port), quiet)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, f.Driver("r1").Start(context.Background()))
	require.ErrorIs(t, f.Driver("r1").Start(context.Background()), mqtt.ErrAlreadyStarted)
	require.NoError(t, f.Close())
}

// A fleet decodes on several goroutines; each robot's messages must still
// be handled in the order they arrived, or its states would be dropped as
// out of order.
func TestFleet_EachRobotsStatesKeepTheirOrder(t *testing.T) {
	url, _ := startBroker(t, "embedded")
	cfgs := fleetConfigs(t, url, 8)
	// A long state timeout: states queued behind each other on a loaded
	// machine must not be dropped as stale, or the last one might be.
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, Logger: quiet, StateTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	for _, d := range f.Drivers() {
		require.NoError(t, d.Start(context.Background()))
	}
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("fleet-order-pub").SetOrderMatters(true))
	require.True(t, pub.Connect().WaitTimeout(10*time.Second))
	t.Cleanup(func() { pub.Disconnect(0) })
	const per = 300
	for seq := 1; seq <= per; seq++ {
		for i := range cfgs {
			raw, err := mqtt.Marshal(mqtt.StateFrom(robot.State{Base: robot.Pose2D{X: float64(seq)}}, "order", uint64(seq), time.Now()))
			require.NoError(t, err)
			// QoS 1 keeps the broker from dropping any under load.
			pub.Publish(fmt.Sprintf("robots/r%d/state", i+1), 1, false, raw)
		}
	}
	for i, d := range f.Drivers() {
		rostest.Eventually(t, 20*time.Second, func() bool { st, ok := d.Latest(); return ok && st.Base.X == per }, "robot %d never got its last state", i+1)
	}
	for _, rs := range mqtt.Reasons {
		require.Zero(t, testutil.ToFloat64(f.Metrics().Dropped.WithLabelValues(string(rs))), "states dropped as %s", rs)
	}
}
