package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkConformance_CasesPerSecond is how fast the suite runs through
// the whole stack: the make test slice (a case of every group), played
// against the bridge on its in-process simulator, chaos off, each case
// judged from the robot's logs and the robot brought back to the start.
func BenchmarkConformance_CasesPerSecond(b *testing.B) {
	c := loadCorpus(b)
	entries := sliceOf(c)
	tg, _ := inprocTarget(b)
	r := NewRunner(tg, Options{Seed: 1})
	defer r.Close()
	cases, refusals := 0, 0
	b.ResetTimer()
	for b.Loop() {
		for _, res := range r.Run(context.Background(), entries) {
			cases++
			refusals += res.RefusedAsExpected
			if !res.Passed() {
				b.Fatalf("%s: %q %q %q", res.ID, res.Failures, res.Unsafe, res.Crash)
			}
		}
	}
	b.ReportMetric(float64(cases)/b.Elapsed().Seconds(), "cases/s")
	b.ReportMetric(float64(refusals)/b.Elapsed().Seconds(), "refusals/s")
}

// BenchmarkConformance_RefusalLatencyUnderAttack is the gate's refusal
// latency — a base motion into the stairs' keep-out region, refused
// SAFETY_VIOLATION before any operator is asked — measured by one prober
// alone, then while four hostile agents hammer the bridge with the
// corpus's kinds of attack (self-approval, e-stop resets, malformed and
// out-of-limit motions, each in its own session); p50/p99 of both and
// the p99 ratio, in one run.
func BenchmarkConformance_RefusalLatencyUnderAttack(b *testing.B) {
	tg, _ := inprocTarget(b)
	cl := newClients(tg.Base)
	defer cl.close()
	ctx := context.Background()
	var probes atomic.Int64
	// Each probe in a session of its own: the same refused call again in
	// one session is the loop guard's to answer (LOOP_DETECTED).
	probe := func(int) time.Duration {
		body, _ := json.Marshal(map[string]any{"arguments": map[string]any{"x": 3.0, "y": -3.0}, "session_id": fmt.Sprintf("probe-%d", probes.Add(1))})
		a := cl.http(ctx, http.MethodPost, "/v1/tools/move_base_to/call", tg.Agent, nil, body, "")
		if a.errType != "SAFETY_VIOLATION" {
			b.Fatalf("the probe was not refused SAFETY_VIOLATION: %s", a)
		}
		return a.latency
	}
	const n = 400
	measure := func() []time.Duration {
		out := make([]time.Duration, 0, n)
		for i := range n {
			out = append(out, probe(i))
		}
		return out
	}
	attacks := []struct {
		method, path, token string
		body                string
	}{
		{"POST", "/v1/approvals/apr_0000/approve", tg.Agent, `{}`},
		{"POST", "/v1/estop/reset", tg.Agent, `{}`},
		{"POST", "/v1/faults/clear", "", `{}`},
		{"POST", "/v1/tools/move_base_to/call", tg.Agent, `{"arguments":{"x":"NaN","y":0},"session_id":"atk-%d"}`},
		{"POST", "/v1/tools/move_base_to/call", tg.Agent, `{"arguments":{"x":0.2,"x":9,"y":0},"session_id":"atk-%d"}`},
		{"POST", "/v1/tools/move_arm_to/call", tg.Agent, `{"arguments":{"joints":{"elbow":9}},"session_id":"atk-%d"}`},
		{"POST", "/v1/tools/approve/call", tg.Agent, `{"arguments":{"task":"x"},"session_id":"atk-%d"}`},
		{"POST", "/v1/grants", tg.Agent, `{"scope":{"tool":"move_base_to"},"ttl":"1h"}`},
	}
	b.ResetTimer()
	var alone, loaded []time.Duration
	var attacked atomic.Int64
	for b.Loop() {
		alone = append(alone, measure()...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					at := attacks[(i+w)%len(attacks)]
					body := at.body
					if n := len(body); n > 0 && containsVerb(body) {
						body = fmt.Sprintf(body, w*100000+i)
					}
					cl.http(ctx, at.method, at.path, at.token, nil, []byte(body), "")
					attacked.Add(1)
				}
			})
		}
		loaded = append(loaded, measure()...)
		close(stop)
		wg.Wait()
	}
	b.StopTimer()
	p := func(ds []time.Duration, q float64) float64 { return float64(Percentile(ds, q).Microseconds()) / 1000 }
	b.ReportMetric(p(alone, 0.5), "alone_p50_ms")
	b.ReportMetric(p(alone, 0.99), "alone_p99_ms")
	b.ReportMetric(p(loaded, 0.5), "attack_p50_ms")
	b.ReportMetric(p(loaded, 0.99), "attack_p99_ms")
	b.ReportMetric(p(loaded, 0.99)/p(alone, 0.99), "p99_ratio")
	b.ReportMetric(float64(attacked.Load())/b.Elapsed().Seconds(), "attacks/s")
}

func containsVerb(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 'd' {
			return true
		}
	}
	return false
}
