package bridge

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
)

// The MQTT harness runs the same bridge against a real broker — Debian's
// (package mqtttest starts it on a free port) or the bridge's own
// embedded one — with the simulator as an MQTT robot (transport/mqtt/
// simnode). The node runs in this process, but every message between the
// bridge and the robot crosses the broker's sockets.

// mqttHarness is what startMQTT leaves behind for MQTT-only tests.
type mqttHarness struct {
	*harness
	broker *mqtttest.Broker // nil on the embedded broker
	url    string
	node   *simnode.Node
	cfg    *hwconfig.Config
}

// mqttTestConfig loads hw-configs/mqtt-sim.yaml with the test edits.
func mqttTestConfig(t testing.TB, edit func(*hwconfig.Config)) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "mqtt-sim.yaml"))
	require.NoError(t, err)
	cfg.Sim.FalsePositiveRate = 0
	// Quick reconnects after a broker restart or a cut robot.
	cfg.Transport.MQTT.ReconnectMax = hwconfig.Duration(time.Second)
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	return cfg
}

// startMQTTHarness is the harnessFactory over Debian's broker.
func startMQTTHarness(t *testing.T, edit func(*hwconfig.Config)) *harness {
	return startMQTT(t, false, edit).harness
}

// startMQTTEmbeddedHarness is the harnessFactory over the bridge's
// embedded broker (no broker URL in the config).
func startMQTTEmbeddedHarness(t *testing.T, edit func(*hwconfig.Config)) *harness {
	return startMQTT(t, true, edit).harness
}

// startMQTT boots broker, bridge and simulated robot.
func startMQTT(t *testing.T, embedded bool, edit func(*hwconfig.Config)) *mqttHarness {
	t.Helper()
	mh := &mqttHarness{}
	cfg := mqttTestConfig(t, func(c *hwconfig.Config) {
		if embedded {
			c.Transport.MQTT.Listen = "127.0.0.1:0"
		} else {
			mh.broker = mqtttest.StartBroker(t)
			c.Transport.MQTT.Broker, c.Transport.MQTT.Listen = mh.broker.URL, ""
		}
		if edit != nil {
			edit(c)
		}
	})
	mh.cfg = cfg
	b := newTestBridge(t, cfg, nil)
	mh.url = cfg.Transport.MQTT.Broker
	if embedded {
		addr := b.BrokerAddr()
		require.NotEmpty(t, addr, "the bridge runs no embedded broker")
		mh.url = "tcp://" + addr
	}
	mh.node = startMQTTNode(t, cfg, mh.url)
	mh.harness = &harness{
		t: t, b: b, sim: mh.node.Sim(), base: "http://" + b.Addr(),
		agent: testAgentTok, operator: testOperatorTok,
		client: &http.Client{Timeout: 90 * time.Second},
	}
	mh.waitReady()
	require.Eventually(t, func() bool { return b.Supervisor().Status().HaveState }, 10*time.Second, 5*time.Millisecond)
	return mh
}

// startMQTTNode runs the simulator as an MQTT robot on the broker at url;
// it closes after the bridge has stopped (cleanups run last-in first-out).
func startMQTTNode(t *testing.T, cfg *hwconfig.Config, url string) *simnode.Node {
	t.Helper()
	n, err := simnode.New(simnode.Conf{Config: cfg, Broker: url, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { _ = n.Close() })
	return n
}
