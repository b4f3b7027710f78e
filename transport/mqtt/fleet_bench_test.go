package mqtt_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// statePub builds testdata/statepub once per test binary.
var statePub = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "statepub")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "statepub")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/statepub").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./testdata/statepub: %w: %s", err, out)
	}
	return bin, nil
})

// publisher is the statepub process and the states it says it sent.
type publisher struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	sent atomic.Uint64
}

func startPublisher(b *testing.B, url string, robots int) *publisher {
	b.Helper()
	bin, err := statePub()
	require.NoError(b, err)
	p := &publisher{cmd: exec.Command(bin, "-broker", url, "-robots", strconv.Itoa(robots), "-hz", "10")}
	p.cmd.Stderr = os.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := p.cmd.StdoutPipe()
	require.NoError(b, err)
	p.in, err = p.cmd.StdinPipe()
	require.NoError(b, err)
	require.NoError(b, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "sent "); ok {
				if v, err := strconv.ParseUint(n, 10, 64); err == nil {
					p.sent.Store(v)
				}
			}
		}
	}()
	b.Cleanup(func() {
		_ = p.in.Close()
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// cpuTime is this process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is this process's resident set size now, from /proc/self/statm.
func rss(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/statm")
	require.NoError(b, err)
	f := strings.Fields(string(raw))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(b, err)
	return pages * int64(os.Getpagesize())
}

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
	heap0, rss0 := heapAlloc(), rss(b)
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
	pub := startPublisher(b, mosq.URL, n)
	rostest.Eventually(b, 30*time.Second, func() bool {
		for _, d := range drivers {
			if !d.LinkUp() {
				return false
			}
		}
		return true
	}, "not every robot's link came up")
	heap1, rss1 := heapAlloc(), rss(b)
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
		in0, sent0, drop0, cpu0, t0 := ingested.Load(), pub.sent.Load(), dropped(), cpuTime(b), time.Now()
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
		cpu += cpuTime(b) - cpu0
		states += float64(ingested.Load() - in0)
		sent += float64(pub.sent.Load() - sent0)
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
