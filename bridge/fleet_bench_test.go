package bridge

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// benchFleet is a bridge serving n robots r1 … rn over Debian's broker,
// the robots played at 10 Hz each by the state publisher in a process of
// its own (so this process's CPU and memory are the bridge's), and the
// process's RSS before the bridge was built.
type benchFleet struct {
	b      *Bridge
	base   string
	broker string
	pub    *mqtttest.StatePublisher
	rss0   int64
	n      int
}

func startBenchFleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	mosq := mqtttest.StartBroker(b)
	cfg, err := hwconfig.Load("../hw-configs/mqtt-sim.yaml")
	require.NoError(b, err)
	cfg.Transport.MQTT.Broker, cfg.Transport.MQTT.Listen = mosq.URL, ""
	// The publisher's robots have no camera and never acknowledge a
	// motion; they say where they are, which is all these benchmarks ask.
	cfg.Camera = nil
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i+1)
	}
	cfg.Fleet = &hwconfig.FleetConf{IDs: ids}
	require.NoError(b, cfg.Validate())
	f := &benchFleet{broker: mosq.URL, n: n, rss0: mqtttest.RSS(b)}
	f.pub = mqtttest.StartStatePublisher(b, mosq.URL, n, 10, "r")
	f.b = newTestBridge(b, cfg, nil)
	f.base = "http://" + f.b.Addr()
	require.Eventually(b, func() bool {
		resp, err := http.Get(f.base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "the fleet never became ready")
	return f
}

// dropped sums robot_bridge_mqtt_dropped_total over its reasons, from
// /metrics as a scraper reads it.
func (f *benchFleet) dropped(b *testing.B) float64 {
	resp, err := http.Get(f.base + "/metrics")
	require.NoError(b, err)
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "robot_bridge_mqtt_dropped_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(b, err)
		sum += v
	}
	return sum
}

// BenchmarkFleet_Bridge100And1000Robots is issue 15's state-ingestion
// benchmark through the whole bridge: n robots at 10 Hz each, every one
// with its own supervisor, runner and perception, over one connection.
// Over each iteration's window it reports the bridge process's CPU
// seconds per second, RSS per robot (over the process before the bridge
// was built), payloads dropped, and get_robot_state over HTTP on random
// robots while the states pour in — p50 and p99, interleaved one for one
// with a bare net/http handler returning the same bytes (the baseline of
// the same run, and the p99 ratio to it).
func BenchmarkFleet_Bridge100And1000Robots(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("robots=%d", n), func(b *testing.B) { benchFleetBridge(b, n) })
	}
}

func benchFleetBridge(b *testing.B, n int) {
	const window = 3 * time.Second
	f := startBenchFleet(b, n)
	time.Sleep(time.Second) // settle: every robot's first states taken in
	rss1 := mqtttest.RSS(b)
	call := newBenchHTTP(f.base)
	body := func(i int, id string) []byte {
		return fmt.Appendf(nil, `{"arguments":{"robot_id":%q},"session_id":"bench-%d"}`, id, i)
	}
	same := call.postRaw(b, body(0, "r1"))
	require.True(b, bytes.HasPrefix(same, []byte(`{"ok":true,`)), "%s", same)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(same)))
		_, _ = w.Write(same)
	}))
	b.Cleanup(bare.Close)
	bareCall := newBenchHTTP(bare.URL)

	rng := rand.New(rand.NewPCG(7, uint64(n)))
	var lat, base []time.Duration
	var cpu, elapsed time.Duration
	var drops, sent float64
	calls, notOK := 0, 0
	b.ResetTimer()
	for range b.N {
		drop0, sent0, cpu0, t0 := f.dropped(b), f.pub.Sent(), mqtttest.CPUTime(b), time.Now()
		for time.Since(t0) < window {
			calls++
			id := "r" + strconv.Itoa(rng.IntN(n)+1)
			s := time.Now()
			out := call.postRaw(b, body(calls, id))
			lat = append(lat, time.Since(s))
			if !bytes.HasPrefix(out, []byte(`{"ok":true,`)) {
				// An honest answer — the state is stale or the link
				// down — that says the bridge is not keeping up: counted,
				// not timed away.
				notOK++
			}
			s = time.Now()
			bareCall.postRaw(b, body(calls, id))
			base = append(base, time.Since(s))
		}
		elapsed += time.Since(t0)
		cpu += mqtttest.CPUTime(b) - cpu0
		drops += f.dropped(b) - drop0
		sent += float64(f.pub.Sent() - sent0)
	}
	b.StopTimer()
	p50, p99 := rostest.Percentiles(lat)
	b50, b99 := rostest.Percentiles(base)
	secs := elapsed.Seconds()
	b.ReportMetric(cpu.Seconds()/secs, "cpu_s/s")
	b.ReportMetric(float64(rss1-f.rss0)/float64(n), "rss_B/robot")
	b.ReportMetric(drops, "dropped")
	b.ReportMetric(float64(notOK)/float64(max(calls, 1)), "not_ok_fraction")
	b.ReportMetric(sent/secs, "sent_states/s")
	b.ReportMetric(p50, "get_state_p50_ms")
	b.ReportMetric(p99, "get_state_p99_ms")
	b.ReportMetric(b50, "bare_p50_ms")
	b.ReportMetric(b99, "bare_p99_ms")
	if b99 > 0 {
		b.ReportMetric(p99/b99, "p99_ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFleet_EStopToLastRobot: the fleet e-stop (POST /v1/estop, no
// robot) → the last of 100 robots' stop commands at a plain subscriber of
// the broker (robots/+/cmd/stop), beside one robot's e-stop → that robot's
// stop in the same run (the baseline, and the p99 ratio to it). An
// operator's reset of every robot runs between iterations, untimed.
func BenchmarkFleet_EStopToLastRobot(b *testing.B) {
	const n = 100
	f := startBenchFleet(b, n)
	type arrival struct {
		id string
		at time.Time
	}
	ch := make(chan arrival, 4*n)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(f.broker).SetClientID("bench-estop-sub").SetCleanSession(true))
	tok := c.Connect()
	require.True(b, tok.WaitTimeout(10*time.Second) && tok.Error() == nil, "connect: %v", tok.Error())
	st := c.Subscribe("robots/+/cmd/stop", 1, func(_ paho.Client, m paho.Message) {
		id := strings.TrimSuffix(strings.TrimPrefix(m.Topic(), "robots/"), "/cmd/stop")
		ch <- arrival{id, time.Now()}
	})
	require.True(b, st.WaitTimeout(10*time.Second) && st.Error() == nil)
	b.Cleanup(func() { c.Disconnect(0) })
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(path, token, body string) {
		req, _ := http.NewRequest("POST", f.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(b, err)
		out, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s %s", path, out)
	}
	// until waits for stops from every id in want and returns the last
	// one's arrival.
	until := func(want map[string]bool) time.Time {
		var last time.Time
		seen := map[string]bool{}
		deadline := time.After(10 * time.Second)
		for len(seen) < len(want) {
			select {
			case a := <-ch:
				if want[a.id] && !seen[a.id] {
					seen[a.id] = true
					last = a.at
				}
			case <-deadline:
				b.Fatalf("stops from %d of %d robots within 10 s", len(seen), len(want))
			}
		}
		return last
	}
	drain := func() {
		time.Sleep(50 * time.Millisecond) // a late copy of the last round's stops
		for len(ch) > 0 {
			<-ch
		}
	}
	all := map[string]bool{}
	for i := 1; i <= n; i++ {
		all["r"+strconv.Itoa(i)] = true
	}
	var mu sync.Mutex
	var fleet, one []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		post("/v1/estop/reset", testOperatorTok, `{"robot_id":"*"}`)
		drain()
		b.StartTimer()
		t0 := time.Now()
		post("/v1/estop", testAgentTok, `{"reason":"bench fleet e-stop"}`)
		last := until(all)
		mu.Lock()
		fleet = append(fleet, last.Sub(t0))
		mu.Unlock()

		b.StopTimer()
		post("/v1/estop/reset", testOperatorTok, `{"robot_id":"*"}`)
		drain()
		id := "r" + strconv.Itoa(i%n+1)
		b.StartTimer()
		t1 := time.Now()
		post("/v1/estop", testAgentTok, fmt.Sprintf(`{"robot_id":%q,"reason":"bench one e-stop"}`, id))
		one = append(one, until(map[string]bool{id: true}).Sub(t1))
	}
	b.StopTimer()
	p50, p99 := rostest.Percentiles(fleet)
	o50, o99 := rostest.Percentiles(one)
	b.ReportMetric(p50, "fleet_estop_p50_ms")
	b.ReportMetric(p99, "fleet_estop_p99_ms")
	b.ReportMetric(o50, "one_estop_p50_ms")
	b.ReportMetric(o99, "one_estop_p99_ms")
	if o99 > 0 {
		b.ReportMetric(p99/o99, "p99_ratio")
	}
	b.ReportMetric(0, "ns/op")
}
