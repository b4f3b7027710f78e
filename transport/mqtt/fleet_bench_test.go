package mqtt_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkFleet_StateIngestion100And1000Robots measures the bridge side
// of a fleet on one connection: robots played at 10 Hz each by
// testdata/statepub in a process of its own, through Debian's broker (a
// process of its own too), into one Fleet. Per case, over a 3 s window:
// states/s ingested (reached a driver's subscribers) beside states/s the
// publisher sent, payloads the drivers dropped, this process's CPU
// seconds per second (getrusage: the bridge side alone), heap and RSS
// per robot (after the fleet is up, over before), and the p99 of
// Latest() while states pour in.
func BenchmarkFleet_StateIngestion100And1000Robots(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("robots=%d", n), func(b *testing.B) { benchFleetIngestion(b, n) })
	}
}

func benchFleetIngestion(b *testing.B, n int) {
	const window = 3 * time.Second
	mosq := mqtttest.StartBroker(b)
	base := mqttConfig(b, mosq.URL)
	cfgs := make([]*hwconfig.Config, n)
	for i := range cfgs {
		c := base.Clone()
		c.Robot.ID = fmt.Sprintf("r%d", i+1)
		cfgs[i] = c
	}
	heap0, rss0 := heapAlloc(), mqtttest.RSS(b)
	f, err := mqtt.NewFleet(mqtt.FleetConf{Configs: cfgs, Logger: quiet})
	require.NoError(b, err)
	b.Cleanup(func() { _ = f.Close() })
	drivers := f.Drivers()
	for _, d := range drivers {
		require.NoError(b, d.Start(context.Background()))
	}
	var ingested atomic.Uint64
	var wg sync.WaitGroup
	var unsubs []func()
	for _, d := range drivers {
		ch, unsub := d.Subscribe()
		unsubs = append(unsubs, unsub)
		wg.Go(func() {
			for range ch {
				ingested.Add(1)
			}
		})
	}
	b.Cleanup(func() {
		for _, u := range unsubs {
			u()
		}
		wg.Wait()
	})
	pub := mqtttest.StartStatePublisher(b, mosq.URL, n, 10, "r")
	rostest.Eventually(b, 30*time.Second, func() bool {
		for _, d := range drivers {
			if !d.LinkUp() {
				return false
			}
		}
		return true
	}, "not every robot's link came up")
	heap1, rss1 := heapAlloc(), mqtttest.RSS(b)
	dropped := func() float64 {
		var s float64
		for _, r := range mqtt.Reasons {
			s += testutil.ToFloat64(f.Metrics().Dropped.WithLabelValues(string(r)))
		}
		return s
	}

	b.ResetTimer()
	var states, sent, drops float64
	var cpu, elapsed time.Duration
	var lat []time.Duration
	for range b.N {
		in0, sent0, drop0, cpu0, t0 := ingested.Load(), pub.Sent(), dropped(), mqtttest.CPUTime(b), time.Now()
		// Latest() is read as the supervisor and the tools read it, on
		// random robots, while states pour in.
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		for time.Since(t0) < window {
			d := drivers[rng.IntN(n)]
			s := time.Now()
			_, _ = d.Latest()
			lat = append(lat, time.Since(s))
			if len(lat)%64 == 0 {
				time.Sleep(time.Millisecond) // a reader, not a spinning core
			}
		}
		elapsed += time.Since(t0)
		cpu += mqtttest.CPUTime(b) - cpu0
		states += float64(ingested.Load() - in0)
		sent += float64(pub.Sent() - sent0)
		drops += dropped() - drop0
	}
	b.StopTimer()
	for _, r := range mqtt.Reasons {
		if v := testutil.ToFloat64(f.Metrics().Dropped.WithLabelValues(string(r))); v > 0 {
			b.Logf("dropped %s: %v", r, v)
		}
	}
	slices.Sort(lat)
	secs := elapsed.Seconds()
	b.ReportMetric(states/secs, "states/s")
	b.ReportMetric(sent/secs, "sent_states/s")
	b.ReportMetric(drops, "dropped")
	b.ReportMetric(cpu.Seconds()/secs, "cpu_s/s")
	b.ReportMetric(float64(heap1-heap0)/float64(n), "heap_B/robot")
	b.ReportMetric(float64(rss1-rss0)/float64(n), "rss_B/robot")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "latest_p99_ns")
	b.ReportMetric(0, "ns/op")
}
