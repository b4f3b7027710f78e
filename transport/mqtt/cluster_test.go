package mqtt_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// lease is a test's Fence: an epoch and whether it is held, changed at
// will.
type lease struct {
	epoch atomic.Uint64
	held  atomic.Bool
}

func held(epoch uint64) *lease {
	l := &lease{}
	l.epoch.Store(epoch)
	l.held.Store(true)
	return l
}

func (l *lease) Epoch() (uint64, bool) { return l.epoch.Load(), l.held.Load() }

// cutProxy forwards TCP to a broker until Cut, which closes every socket
// abruptly (no MQTT DISCONNECT), so the broker publishes the client's last
// will, and refuses every reconnect.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, broker string) *cutProxy {
	t.Helper()
	u, err := url.Parse(broker)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln}
	t.Cleanup(p.Cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", u.Host)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) URL() string { return "tcp://" + p.ln.Addr().String() }

func (p *cutProxy) Cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// simRobots starts a simulated robot, with a connection (and last will) of
// its own, for each config.
func simRobots(t *testing.T, cfgs []*hwconfig.Config) []*simnode.Node {
	t.Helper()
	var nodes []*simnode.Node
	for _, c := range cfgs {
		n, err := simnode.New(simnode.Conf{Config: c, Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, n.Start(context.Background()))
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	return nodes
}

// clusterFleet starts bridge id's fleet of cfgs (every robot's driver).
func clusterFleet(t *testing.T, id string, cfgs []*hwconfig.Config) *mqtt.Fleet {
	t.Helper()
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, Logger: quiet, BridgeID: id})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	for _, d := range f.Drivers() {
		require.NoError(t, d.Start(context.Background()))
	}
	for _, d := range f.Drivers() {
		rostest.Eventually(t, 20*time.Second, d.LinkUp, "bridge %s: robot %s's link never came up", id, d.Topics().ID)
	}
	return f
}

// withBroker is cfgs pointed at another broker URL (the same broker
// through a proxy).
func withBroker(cfgs []*hwconfig.Config, broker string) []*hwconfig.Config {
	out := make([]*hwconfig.Config, len(cfgs))
	for i, c := range cfgs {
		out[i] = c.Clone()
		out[i].Transport.MQTT.Broker = broker
	}
	return out
}

// commandsOn decodes every command the subscriber saw on topic.
func commandsOn(t *testing.T, sub *mqtttest.Sub, topic string) []mqtt.Command {
	t.Helper()
	var out []mqtt.Command
	for _, l := range sub.Lines() {
		tp, payload, ok := strings.Cut(l, " ")
		if !ok || tp != topic {
			continue
		}
		c, err := mqtt.DecodeCommand([]byte(payload))
		require.NoError(t, err, "%s", l)
		out = append(out, c)
	}
	return out
}

func linesOn(sub *mqtttest.Sub, topic string) []string {
	var out []string
	for _, l := range sub.Lines() {
		if tp, payload, ok := strings.Cut(l, " "); ok && tp == topic {
			out = append(out, payload)
		}
	}
	return out
}

// keepRefreshing feeds d's robot's watchdog every 50 ms until the test
// ends (a fenced refresh sends nothing, which is the point).
func keepRefreshing(t *testing.T, ds ...*mqtt.Driver) {
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
				for _, d := range ds {
					_ = d.Refresh(context.Background())
				}
			}
		}
	}()
}

func TestCluster_TheFleetStampsEpochAndBridgeAndSendsNothingWithoutTheLease(t *testing.T) {
	m := mqtttest.StartBroker(t)
	cfgs := fleetConfigs(t, m.URL, 2)
	nodes := simRobots(t, cfgs)
	sub := mqtttest.Subscribe(t, m.URL, "robots/+/cmd/+", "robots/+", "robots/+/bridge")
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, Logger: quiet, BridgeID: "a"})
	require.NoError(t, err)
	require.Equal(t, "a", f.BridgeID())
	require.Equal(t, "robots/bridge-a", f.StatusTopic())
	r1 := held(3)
	require.NoError(t, f.SetFence("r1", r1))
	require.Error(t, f.SetFence("r9", r1))
	for _, d := range f.Drivers() {
		require.NoError(t, d.Start(context.Background()))
	}
	d1, d2 := f.Driver("r1"), f.Driver("r2")
	rostest.Eventually(t, 20*time.Second, func() bool { return d1.LinkUp() && d2.LinkUp() }, "links never came up")

	// Then the bridge says online on its own cluster topic only
	rostest.Eventually(t, 10*time.Second, func() bool { return len(linesOn(sub, "robots/bridge-a")) > 0 }, "no online on robots/bridge-a:\n%v", sub.Lines())
	require.Equal(t, []string{mqtt.StatusOnline}, linesOn(sub, "robots/bridge-a"))

	// When robot 1 (whose lease this bridge holds at epoch 3) is sent a
	// goal, refreshed and stopped, Then each carries epoch 3 and bridge a
	require.NoError(t, d1.Send(context.Background(), baseCmd("a-1", startX(0)+0.3, 0)))
	require.NoError(t, d1.Refresh(context.Background()))
	require.NoError(t, d1.Stop(context.Background()))
	rostest.Eventually(t, 10*time.Second, func() bool {
		return len(commandsOn(t, sub, "robots/r1/cmd/stop")) == 1 && len(commandsOn(t, sub, "robots/r1/cmd/refresh")) >= 1
	}, "robot 1's stop or refresh never seen:\n%v", sub.Lines())
	for _, action := range []string{"move_base", "refresh", "stop"} {
		cs := commandsOn(t, sub, "robots/r1/cmd/"+action)
		require.NotEmpty(t, cs, action)
		for _, c := range cs {
			require.Equal(t, uint64(3), c.Epoch, action)
			require.Equal(t, "a", c.Bridge, action)
		}
	}
	// and the robot's own log holds them
	var sawMove bool
	for _, e := range nodes[0].Sim().CommandLog() {
		if e.ID == "a-1" {
			sawMove = true
			require.True(t, e.Accepted)
			require.Equal(t, uint64(3), e.Epoch)
			require.Equal(t, "a", e.Bridge)
		}
	}
	require.True(t, sawMove)
	require.Equal(t, uint64(3), nodes[0].Sim().Epoch())

	// When robot 2 has no fence (this bridge never held it), or one that
	// says its lease is gone, Then a goal and a refresh fail ErrFenced and
	// nothing is published, while a stop is always sent, with the last epoch
	require.ErrorIs(t, d2.Send(context.Background(), baseCmd("a-2", 0, 0)), mqtt.ErrFenced)
	require.ErrorIs(t, d2.Refresh(context.Background()), mqtt.ErrFenced)
	require.NoError(t, d2.Stop(context.Background()))
	gone := held(5)
	gone.held.Store(false)
	d2.SetFence(gone)
	err = d2.Send(context.Background(), baseCmd("a-3", 0, 0))
	require.ErrorIs(t, err, mqtt.ErrFenced)
	require.ErrorContains(t, err, "bridge a does not hold robot r2's lease (last epoch 5)")
	require.ErrorIs(t, d2.Refresh(context.Background()), mqtt.ErrFenced)
	require.NoError(t, d2.Stop(context.Background()))
	rostest.Eventually(t, 10*time.Second, func() bool { return len(commandsOn(t, sub, "robots/r2/cmd/stop")) == 2 }, "robot 2's stops never seen:\n%v", sub.Lines())
	stops := commandsOn(t, sub, "robots/r2/cmd/stop")
	require.Equal(t, uint64(0), stops[0].Epoch)
	require.Equal(t, uint64(5), stops[1].Epoch)
	require.Equal(t, "a", stops[1].Bridge)
	require.Empty(t, commandsOn(t, sub, "robots/r2/cmd/move_base"))
	require.Empty(t, commandsOn(t, sub, "robots/r2/cmd/refresh"))
	for _, e := range nodes[1].Sim().CommandLog() {
		require.Equal(t, "stop", e.Op, "robot 2 got a motion: %+v", e)
	}

	// When robot 1's lease is lost, Then its goal is not sent either
	r1.held.Store(false)
	require.ErrorIs(t, d1.Send(context.Background(), baseCmd("a-4", 0, 0)), mqtt.ErrFenced)
	r1.held.Store(true)

	// When the fleet closes, Then it stops only the robot it holds (robot
	// 1), says offline on its cluster topic, and never spoke on the
	// robots' shared {prefix}/{id}/bridge or the lone fleet's {prefix}/bridge
	require.NoError(t, f.Close())
	rostest.Eventually(t, 10*time.Second, func() bool {
		return len(linesOn(sub, "robots/bridge-a")) == 2 && len(commandsOn(t, sub, "robots/r1/cmd/stop")) == 2
	}, "no offline or last stop:\n%v", sub.Lines())
	require.Equal(t, []string{mqtt.StatusOnline, mqtt.StatusOffline}, linesOn(sub, "robots/bridge-a"))
	time.Sleep(200 * time.Millisecond) // anything else on its way
	require.Len(t, commandsOn(t, sub, "robots/r2/cmd/stop"), 2, "closing stopped a robot this bridge does not hold")
	for _, l := range sub.Lines() {
		tp, _, _ := strings.Cut(l, " ")
		require.NotEqual(t, "robots/bridge", tp, l)
		require.False(t, strings.HasSuffix(tp, "/bridge"), "a cluster bridge spoke on a robot's bridge topic: %s", l)
	}
}

func TestCluster_TwoBridgesOneRobot_TheOldOwnerIsFencedAndItsWillStopsOnlyItsRobots(t *testing.T) {
	m := mqtttest.StartBroker(t)
	cfgs := fleetConfigs(t, m.URL, 2)
	nodes := simRobots(t, cfgs)
	r1, r2 := nodes[0].Sim(), nodes[1].Sim()
	sub := mqtttest.Subscribe(t, m.URL, "robots/+/ack", "robots/+")
	// Bridge a reaches the broker through a proxy, so that its death can
	// be abrupt (the broker then publishes its last will).
	proxy := newCutProxy(t, m.URL)
	a := clusterFleet(t, "a", withBroker(cfgs, proxy.URL()))
	b := clusterFleet(t, "b", cfgs)
	aR1, aR2 := held(1), held(1)
	require.NoError(t, a.SetFence("r1", aR1))
	require.NoError(t, a.SetFence("r2", aR2))
	bR1 := held(2)
	require.NoError(t, b.SetFence("r1", bR1)) // b holds robot 1 from epoch 2; robot 2 never
	// Bridge a feeds its robots' watchdogs throughout; b (below) only once
	// its stop alone has fenced a.
	keepRefreshing(t, a.Driver("r1"), a.Driver("r2"))

	// Given bridge a drives robot 1 at epoch 1
	require.NoError(t, a.Driver("r1").Send(context.Background(), baseCmd("a-r1-1", 4, 0)))
	rostest.Eventually(t, 10*time.Second, func() bool { return r1.Truth().Velocity.V > 0.1 }, "robot 1 never moved")
	// When bridge b takes robot 1 over: its first word, a stop at epoch 2
	require.NoError(t, b.Driver("r1").Stop(context.Background()))
	// Then robot 1 stops, and its newest epoch is b's
	rostest.Eventually(t, 10*time.Second, func() bool { return r1.Epoch() == 2 && !r1.Truth().BaseGoal }, "robot 1 never took b's stop")
	require.Equal(t, "b", r1.EpochBridge())
	rostest.Eventually(t, 10*time.Second, func() bool { return r1.Truth().Velocity.V < 1e-3 }, "robot 1 never came to rest")
	rest := r1.Odometer().BaseDistance

	// When bridge a (its lease not yet known lost on a's side) sends robot
	// 1 another goal, Then the robot refuses it: ack failed stale_epoch,
	// which the driver reports as ErrRefused and ErrFenced
	err := a.Driver("r1").Send(context.Background(), baseCmd("a-r1-2", 4, 1))
	require.ErrorIs(t, err, mqtt.ErrRefused)
	require.ErrorIs(t, err, mqtt.ErrFenced)
	ce, ok := errors.AsType[*mqtt.CommandError](err)
	require.True(t, ok)
	require.True(t, strings.HasPrefix(ce.Reason, "stale_epoch: "), ce.Reason)
	require.Contains(t, ce.Reason, "epoch 1 (bridge a)")
	require.Contains(t, ce.Reason, "epoch 2 (bridge b)")
	// and nothing moved
	time.Sleep(500 * time.Millisecond)
	require.False(t, r1.Truth().BaseGoal)
	require.InDelta(t, rest, r1.Odometer().BaseDistance, 1e-6, "robot 1 moved on a fenced bridge's goal")
	require.Equal(t, 1, r1.Counters().StaleEpoch)
	// and its command log shows the refusal, epoch and bridge
	var refused *sim.LogEntry
	for _, e := range r1.CommandLog() {
		if e.ID == "a-r1-2" {
			refused = &e
		}
	}
	require.NotNil(t, refused)
	require.False(t, refused.Accepted)
	require.Equal(t, uint64(1), refused.Epoch)
	require.Equal(t, "a", refused.Bridge)
	require.Contains(t, refused.Error, "stale_epoch")

	// When b drives robot 1 and a drives robot 2 (whose lease a holds)
	keepRefreshing(t, b.Driver("r1"), b.Driver("r2"))
	require.NoError(t, b.Driver("r1").Send(context.Background(), baseCmd("b-r1-1", 4, 0)))
	require.NoError(t, a.Driver("r2").Send(context.Background(), baseCmd("a-r2-1", 4, 0)))
	rostest.Eventually(t, 10*time.Second, func() bool {
		return r1.Truth().Velocity.V > 0.1 && r2.Truth().Velocity.V > 0.1
	}, "the robots never both moved")
	// and bridge a dies without a word
	proxy.Cut()
	// Then its last will says offline on robots/bridge-a
	rostest.Eventually(t, 10*time.Second, func() bool {
		ls := linesOn(sub, "robots/bridge-a")
		return len(ls) > 0 && ls[len(ls)-1] == mqtt.StatusOffline
	}, "bridge a's last will never came:\n%v", linesOn(sub, "robots/bridge-a"))
	// and robot 2, which a commanded last, stops at once, saying why
	rostest.Eventually(t, 5*time.Second, func() bool { return !r2.Truth().BaseGoal }, "robot 2 kept its goal after its bridge's will")
	var why string
	for _, e := range r2.Events() {
		if e.Kind == sim.EventBridgeOffline {
			why = e.Detail
		}
	}
	require.Contains(t, why, "bridge a")
	// while robot 1, which b commands, drives on
	time.Sleep(500 * time.Millisecond)
	require.True(t, r1.Truth().BaseGoal, "robot 1 stopped on the will of a bridge that no longer commands it")
	for _, e := range r1.Events() {
		require.NotEqual(t, sim.EventBridgeOffline, e.Kind)
	}

	// Robot 1's log: the epochs of what it accepted never went down.
	var last uint64
	for _, e := range r1.CommandLog() {
		if e.Op == "command" && e.Accepted {
			require.GreaterOrEqual(t, e.Epoch, last, "robot 1 accepted an older epoch: %+v", e)
			last = e.Epoch
		}
	}
	require.Equal(t, uint64(2), last)
}

func TestCluster_ABridgeIDMustBeValid(t *testing.T) {
	cfgs := fleetConfigs(t, "tcp://127.0.0.1:1", 1)
	for _, bad := range []string{"A", "a/b", "-a", strings.Repeat("a", 33)} {
		_, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, BridgeID: bad})
		require.ErrorContains(t, err, "is not a bridge id", bad)
	}
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs})
	require.NoError(t, err)
	require.Empty(t, f.BridgeID())
	require.Equal(t, "robots/bridge", f.StatusTopic())
	require.Equal(t, "robots/bridge-b.1", mqtt.ClusterBridge("robots", "b.1"))
	id, ok := mqtt.ClusterBridgeOf("robots", "robots/bridge-b.1")
	require.True(t, ok)
	require.Equal(t, "b.1", id)
	for _, tp := range []string{"robots/bridge", "robots/r1/bridge", "robots/bridge-", "robots/bridge-B", "other/bridge-a"} {
		_, ok := mqtt.ClusterBridgeOf("robots", tp)
		require.False(t, ok, tp)
	}
}
