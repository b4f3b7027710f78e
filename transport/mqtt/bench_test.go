package mqtt_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/mqtt"
)

// BenchmarkDriver_StateIngestion pushes states through the embedded
// broker into the driver (decode, order and freshness checks, hub) as fast
// as a publisher sends them, beside the baseline of a bare paho subscriber
// receiving the same payloads in the same run. 1,000 states/s is 100
// robots at 10 Hz; BenchmarkFleet_StateIngestion100And1000Robots measures
// a fleet on one connection with the publisher in a process of its own.
func BenchmarkDriver_StateIngestion(b *testing.B) {
	br, err := mqtt.StartBroker("127.0.0.1:0", quiet)
	require.NoError(b, err)
	b.Cleanup(func() { _ = br.Close() })
	cfg := mqttConfig(b, br.URL())
	d, err := mqtt.New(mqtt.Conf{Config: cfg, Logger: quiet})
	require.NoError(b, err)
	require.NoError(b, d.Start(context.Background()))
	b.Cleanup(func() { _ = d.Close() })
	topics := d.Topics()
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(br.URL()).SetClientID("bench-pub"))
	require.True(b, pub.Connect().WaitTimeout(10*time.Second))
	b.Cleanup(func() { pub.Disconnect(0) })
	got := make(chan struct{}, 1<<16)
	raw := paho.NewClient(paho.NewClientOptions().AddBroker(br.URL()).SetClientID("bench-raw"))
	require.True(b, raw.Connect().WaitTimeout(10*time.Second))
	b.Cleanup(func() { raw.Disconnect(0) })
	require.True(b, raw.Subscribe("bench/raw", 0, func(paho.Client, paho.Message) { got <- struct{}{} }).WaitTimeout(10*time.Second))
	st := simState(b)
	const batch = 1000
	var driverTime, rawTime time.Duration
	b.ResetTimer()
	seq := uint64(0)
	for i := 0; i < b.N; i++ {
		msgs := make([][]byte, batch)
		var lastStamp time.Time
		for j := range msgs {
			seq++
			lastStamp = time.Now()
			msgs[j], err = json.Marshal(mqtt.StateFrom(st, "bench", seq, lastStamp))
			require.NoError(b, err)
		}
		t0 := time.Now()
		for _, m := range msgs {
			pub.Publish(topics.State(), 0, false, m)
		}
		for {
			if lt, ok := d.Latest(); ok && lt.Stamp.Equal(lastStamp) {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		driverTime += time.Since(t0)
		t1 := time.Now()
		for _, m := range msgs {
			raw.Publish("bench/raw", 0, false, m)
		}
		for range batch {
			<-got
		}
		rawTime += time.Since(t1)
	}
	b.StopTimer()
	n := float64(b.N * batch)
	b.ReportMetric(n/driverTime.Seconds(), "driver_states/s")
	b.ReportMetric(n/rawTime.Seconds(), "raw_msgs/s")
	b.ReportMetric(driverTime.Seconds()/rawTime.Seconds(), "driver/raw")
	b.ReportMetric(0, "ns/op")
}
