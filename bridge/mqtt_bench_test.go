package bridge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// benchClient is a plain paho client on url, subscribed to filter, whose
// messages arrive timestamped on the returned channel.
func benchClient(b *testing.B, url, id, filter string) (paho.Client, chan time.Time) {
	b.Helper()
	ch := make(chan time.Time, 1024)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(true))
	tok := c.Connect()
	require.True(b, tok.WaitTimeout(10*time.Second) && tok.Error() == nil, "connect: %v", tok.Error())
	if filter != "" {
		st := c.Subscribe(filter, 1, func(paho.Client, paho.Message) { ch <- time.Now() })
		require.True(b, st.WaitTimeout(10*time.Second) && st.Error() == nil)
	}
	b.Cleanup(func() { c.Disconnect(0) })
	return c, ch
}

// BenchmarkMQTT_StopLatency: HTTP stop → the stop command at a plain
// subscriber of Debian's broker (as the broker's _sub client would see it), beside
// the direct baseline in the same run: a paho publish (QoS 1) → the same
// subscriber through the same broker.
func BenchmarkMQTT_StopLatency(b *testing.B) {
	broker := mqtttest.StartBroker(b)
	cfg, err := hwconfig.Load("../hw-configs/mqtt-sim.yaml")
	require.NoError(b, err)
	cfg.Sim.FalsePositiveRate = 0
	cfg.Transport.MQTT.Broker, cfg.Transport.MQTT.Listen = broker.URL, ""
	require.NoError(b, cfg.Validate())
	br := newTestBridge(b, cfg, nil)
	n, err := simnode.New(simnode.Conf{Config: cfg, Broker: broker.URL, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	require.NoError(b, n.Start(context.Background()))
	b.Cleanup(func() { _ = n.Close() })
	rostest.Eventually(b, 10*time.Second, func() bool { return br.Supervisor().Status().HaveState }, "no state")
	topics := mqtt.Topics{Prefix: cfg.Transport.MQTT.TopicPrefix, ID: cfg.Robot.ID}
	_, stops := benchClient(b, broker.URL, "bench-sub", topics.Cmd(mqtt.ActionStop))
	pub, direct := benchClient(b, broker.URL, "bench-direct", "bench/direct")
	client := &http.Client{Timeout: 10 * time.Second}
	wait := func(ch chan time.Time, what string) time.Time {
		select {
		case at := <-ch:
			return at
		case <-time.After(5 * time.Second):
			b.Fatalf("no %s within 5 s", what)
		}
		return time.Time{}
	}
	drain := func(ch chan time.Time) {
		for len(ch) > 0 {
			<-ch
		}
	}
	var path, base []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		drain(stops)
		t0 := time.Now()
		req, _ := http.NewRequest("POST", "http://"+br.Addr()+"/v1/tools/stop/call",
			bytes.NewBufferString(fmt.Sprintf(`{"arguments":{},"session_id":"bench-%d"}`, i)))
		req.Header.Set("Authorization", "Bearer "+testAgentTok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(b, err)
		_ = resp.Body.Close()
		path = append(path, wait(stops, "stop command").Sub(t0))

		drain(direct)
		t1 := time.Now()
		pub.Publish("bench/direct", 1, false, "x")
		base = append(base, wait(direct, "direct message").Sub(t1))
	}
	b.StopTimer()
	rostest.ReportVsDirect(b, "stop", path, base)
}
