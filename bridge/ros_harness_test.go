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
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// The ROS harness runs the same bridge against Debian's real ROS master
// (rosmaster --core, started here on a free port, see package rostest) and
// the simulator as a ROS node. The node runs in this process, but every
// message between the bridge and the robot still crosses the master's
// registry and TCPROS sockets, as with a robot on another machine.

// rosConfig loads a shipped ROS hw-config (ros-sim.yaml, ros-base-only.yaml)
// pointed at master uri.
func rosConfig(t testing.TB, file, uri string, edit func(*hwconfig.Config)) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", file))
	require.NoError(t, err)
	if cfg.Sim != nil {
		cfg.Sim.FalsePositiveRate = 0
	}
	cfg.Transport.ROS.MasterURI = uri
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	return cfg
}

// startSimNode runs the simulator as a ROS node on the master at uri.
func startSimNode(t testing.TB, cfg *hwconfig.Config) *simnode.Node {
	t.Helper()
	n, err := simnode.New(simnode.Conf{Config: cfg, Logger: slog.New(slog.DiscardHandler), Env: func(k string) string {
		if k == "ROS_IP" {
			return "127.0.0.1"
		}
		return ""
	}})
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() {
		closeIdleROSConnections()
		_ = n.Close()
	})
	return n
}

// closeIdleROSConnections closes the idle keep-alive connections of
// net/http's default transport, which every goroslib node of this process
// (bridge, simulator node, test nodes) makes its XML-RPC calls with. A
// connection that transport dialed and never used is, to the node's
// XML-RPC server, one that has not sent its request yet, and closing that
// server (http.Server.Shutdown) waits up to 5 s for it: the bridge's
// driver bounds its close at 3 s, the simulator node's close waits it all
// out. Closed first, the nodes close at once, and the tests stay quick.
func closeIdleROSConnections() {
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// rosHarness is what startROS leaves behind for ROS-only tests.
type rosHarness struct {
	*harness
	master *rostest.Master
	node   *simnode.Node // nil when the robot is not the simulator
	cfg    *hwconfig.Config
}

// startROSHarness is the harnessFactory over ROS.
func startROSHarness(t *testing.T, edit func(*hwconfig.Config)) *harness {
	return startROS(t, edit).harness
}

// startROS boots master, simulator node (ros-sim.yaml) and bridge.
func startROS(t *testing.T, edit func(*hwconfig.Config)) *rosHarness {
	t.Helper()
	return startROSWith(t, "ros-sim.yaml", edit)
}

// startROSWith boots master, simulator node and bridge on a shipped ROS
// config file.
func startROSWith(t *testing.T, file string, edit func(*hwconfig.Config)) *rosHarness {
	t.Helper()
	m := rostest.StartMaster(t)
	cfg := rosConfig(t, file, m.URI, edit)
	node := startSimNode(t, cfg)
	// Cleanups run last-in first-out: the bridge stops, then the master
	// goes, then the node closes. Closed while the master still runs, the
	// node's XML-RPC server (goroslib) often waits out net/http's 5 s grace
	// for a connection the master opened and never used (see
	// closeIdleROSConnections); with the master gone it closes at once.
	t.Cleanup(m.Kill)
	h := bootROSBridge(t, cfg)
	h.sim = node.Sim()
	h.waitReady()
	return &rosHarness{harness: h, master: m, node: node, cfg: cfg}
}

// Test credentials, as in the in-process harness.
const (
	rosAgentToken    = "agent-token-for-tests-0123456789"
	rosOperatorToken = "operator-token-for-tests-0123456789"
)

// bootROSBridge starts a bridge on cfg with the test tokens; the master
// comes from the config.
func bootROSBridge(t *testing.T, cfg *hwconfig.Config) *harness {
	t.Helper()
	b := newROSBridge(t, cfg)
	return &harness{
		t: t, b: b, sim: b.Sim(), base: "http://" + b.Addr(),
		agent: rosAgentToken, operator: rosOperatorToken,
		client: &http.Client{Timeout: 90 * time.Second},
	}
}

// newROSBridge starts a bridge on cfg with the test tokens and stops it
// when the test or benchmark ends.
func newROSBridge(tb testing.TB, cfg *hwconfig.Config) *Bridge {
	tb.Helper()
	b := newTestBridge(tb, cfg, map[string]string{"ROS_IP": "127.0.0.1"})
	// Runs before the bridge stops (cleanups are last-in first-out).
	tb.Cleanup(closeIdleROSConnections)
	return b
}
