package main

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// `robot-bridge sim --transport mqtt --robots 3` against Debian's broker:
// three robots with distinct ids announce themselves online and publish
// their state; killing the process makes the broker publish each one's
// last will.
func TestSim_MQTTRobotsOnARealBroker(t *testing.T) {
	bin := buildBinary(t)
	b := mqtttest.StartBroker(t)
	sub := mqtttest.Subscribe(t, b.URL, "robots/+/status", "robots/+/state")
	cfg, err := filepath.Abs("../../hw-configs/mqtt-sim.yaml")
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rostest.FreePort(t)))
	p := rostest.Start(t, nil, bin, "sim", "--transport", "mqtt", "--robots", "3", "--broker", b.URL,
		"--config", cfg, "--listen", addr, "--log-level", "warn")

	ids := []string{"mqtt-sim-1-1", "mqtt-sim-1-2", "mqtt-sim-1-3"}
	has := func(line string) bool {
		for _, l := range sub.Lines() {
			if strings.HasPrefix(l, line) {
				return true
			}
		}
		return false
	}
	for _, id := range ids {
		rostest.Eventually(t, 20*time.Second, func() bool { return has("robots/" + id + "/status online") },
			"robot %s never said online:\n%s", id, p.Output())
		rostest.Eventually(t, 10*time.Second, func() bool { return has("robots/" + id + "/state {") }, "robot %s published no state", id)
	}
	for _, l := range sub.Lines() {
		if topic, payload, _ := strings.Cut(l, " "); strings.HasSuffix(topic, "/state") {
			_, err := mqtt.DecodeState([]byte(payload))
			require.NoError(t, err, "%s", l)
		}
	}
	// When the process dies without a word, Then the broker tells
	// everyone each robot is offline (its last will)
	p.Kill()
	for _, id := range ids {
		rostest.Eventually(t, 20*time.Second, func() bool { return has("robots/" + id + "/status offline") }, "no last will for %s", id)
	}
}

func TestSim_MQTTFlagsAreChecked(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"several robots need mqtt", []string{"sim", "--transport", "ros", "--robots", "2"}, "more than 1 only with --transport mqtt"},
		{"no robots", []string{"sim", "--transport", "mqtt", "--robots", "0"}, "allowed: 1 to 1000"},
		{"a broker without mqtt", []string{"sim", "--broker", "tcp://127.0.0.1:1"}, "--broker is for --transport mqtt"},
		{"unknown transport", []string{"sim", "--transport", "zmq"}, "allowed: none, ros, mqtt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, bin, tc.args...)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}
