package conformance

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/bridge"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/internal/testbin"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// The tokens of the bridges the suite attacks.
const (
	agentToken    = "conformance-agent-token-0123456789"
	operatorToken = "conformance-operator-token-0123456789"
)

// robotConfig loads the suite's robot (testdata/robot.yaml).
func robotConfig(tb testing.TB) *hwconfig.Config {
	tb.Helper()
	cfg, err := hwconfig.Load(filepath.Join("testdata", "robot.yaml"))
	require.NoError(tb, err)
	return cfg
}

// startBridge starts a bridge on cfg in a temporary data dir; its log
// goes to a file the test names when it fails.
func startBridge(tb testing.TB, cfg *hwconfig.Config) *bridge.Bridge {
	tb.Helper()
	dir := tb.TempDir()
	logf, err := os.Create(filepath.Join(dir, "bridge.log"))
	require.NoError(tb, err)
	b, err := bridge.New(bridge.Conf{
		Config: cfg, Listen: "127.0.0.1:0", DataDir: dir,
		Logger: slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Env: func(k string) string {
			switch k {
			case "ROBOT_BRIDGE_AGENT_TOKEN":
				return agentToken
			case "ROBOT_BRIDGE_OPERATOR_TOKEN":
				return operatorToken
			case "ROS_IP":
				// The bridge's goroslib node and the simulator's meet on
				// loopback.
				return "127.0.0.1"
			}
			return ""
		},
	})
	require.NoError(tb, err)
	require.NoError(tb, b.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = b.Stop(ctx)
		_ = logf.Close()
		if tb.Failed() {
			raw, _ := os.ReadFile(logf.Name())
			tb.Logf("bridge log (warnings and worse, last 4 KB):\n%s", tail(raw, 4096))
		}
	})
	waitReady(tb, "http://"+b.Addr())
	return b
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func waitReady(tb testing.TB, base string) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("the bridge at %s never became ready", base)
}

// inprocTarget is the bridge on its in-process simulator.
func inprocTarget(tb testing.TB) (Target, *bridge.Bridge) {
	tb.Helper()
	cfg := robotConfig(tb)
	b := startBridge(tb, cfg)
	base := "http://" + b.Addr()
	return Target{
		Name: TargetInProc, Base: base, Agent: agentToken, Operator: operatorToken,
		SimBase: base + "/v1/sim", SimToken: operatorToken, Config: cfg,
	}, b
}

// rosTarget is the bridge over Debian's ROS master, the simulator as its
// own process (robot-bridge sim --transport ros).
func rosTarget(tb testing.TB) Target {
	tb.Helper()
	bin := testbin.RobotBridge(tb)
	m := rostest.StartMaster(tb)
	cfg := robotConfig(tb)
	ros, err := hwconfig.Load(filepath.Join("..", "hw-configs", "ros-sim.yaml"))
	require.NoError(tb, err)
	cfg.Transport = ros.Transport
	cfg.Transport.ROS.MasterURI = m.URI
	require.NoError(tb, cfg.Validate())
	raw, err := yaml.Marshal(cfg)
	require.NoError(tb, err)
	path := filepath.Join(tb.TempDir(), "robot.yaml")
	require.NoError(tb, os.WriteFile(path, raw, 0o600))
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(tb))
	proc := rostest.Start(tb, m.Env(tb), bin, "sim", "--transport", "ros", "--config", path, "--listen", addr, "--log-level", "warn")
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("robot-bridge sim's output (last 4 KB):\n%s", tail([]byte(proc.Output()), 4096))
		}
	})
	b := startBridge(tb, cfg)
	base := "http://" + b.Addr()
	return Target{
		Name: TargetROS, Base: base, Agent: agentToken, Operator: operatorToken,
		SimBase: "http://" + addr + "/v1/sim", Config: cfg,
		Alive: func() error {
			if done, err := proc.Exited(); done {
				return errors.Join(errors.New("robot-bridge sim exited"), err)
			}
			return nil
		},
	}
}
