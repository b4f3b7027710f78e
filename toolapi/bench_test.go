package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchHarness is a harness without a rate limit whose robot state
// source allocates nothing (staticRobot), so that what is measured is the
// tool API's own.
func benchHarness(b *testing.B) *harness {
	return newHarness(b, func(c *Conf) {
		c.RatePerSecond, c.RateBurst, c.CallBudget = 1e9, 1<<30, 1<<30
		c.Robot = staticRobot{st: testState(), clock: c.Clock}
	})
}

func post(b *testing.B, c *http.Client, url, token string, body []byte) []byte {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d: %v %s", resp.StatusCode, err, out)
	}
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkGetRobotState_HTTPvsBare measures the tool API's overhead on
// the hottest state call: get_robot_state over real loopback TCP, and in
// the same run a bare net/http handler returning the same bytes, with the
// calls interleaved so both see the same machine. It reports p50/p99 of
// each and their ratios (goal: p50 ratio ≤ 1.25, bridge p99 ≤ 0.3 ms),
// and allocs/call: the server side's heap allocations per call through
// the whole handler, counted in process on the same bridge (the client's
// and the bare server's are not in it; allocs/op counts everything in
// the process, both servers and both clients).
func BenchmarkGetRobotState_HTTPvsBare(b *testing.B) {
	h := benchHarness(b)
	body := []byte(`{"arguments": {}, "session_id": "bench"}`)
	url := h.ts.URL + "/v1/tools/get_robot_state/call"
	client := h.ts.Client()
	same := post(b, client, url, testTokens.Agent, body)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(same)
	}))
	defer bare.Close()
	bareClient := bare.Client()
	bridgeLat := make([]time.Duration, 0, b.N)
	bareLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		post(b, client, url, testTokens.Agent, body)
		t1 := time.Now()
		post(b, bareClient, bare.URL, "", body)
		t2 := time.Now()
		bridgeLat = append(bridgeLat, t1.Sub(t0))
		bareLat = append(bareLat, t2.Sub(t1))
	}
	b.StopTimer()
	bp50, bp99 := pct(bridgeLat, 0.50), pct(bridgeLat, 0.99)
	np50, np99 := pct(bareLat, 0.50), pct(bareLat, 0.99)
	b.ReportMetric(float64(bp50.Microseconds()), "bridge_p50_µs")
	b.ReportMetric(float64(bp99.Microseconds()), "bridge_p99_µs")
	b.ReportMetric(float64(np50.Microseconds()), "bare_p50_µs")
	b.ReportMetric(float64(np99.Microseconds()), "bare_p99_µs")
	b.ReportMetric(float64(bp50)/float64(np50), "p50_ratio")
	b.ReportMetric(float64(bp99)/float64(np99), "p99_ratio")
	b.ReportMetric(allocsPerCall(h, string(body)), "allocs/call")
}

// BenchmarkToolCalls_8ParallelState measures POST /v1/tool_calls carrying
// eight state calls, which the bridge runs in parallel.
func BenchmarkToolCalls_8ParallelState(b *testing.B) {
	h := benchHarness(b)
	var calls []any
	for i := range 8 {
		name := "get_robot_state"
		if i%2 == 1 {
			name = "list_named_poses"
		}
		calls = append(calls, toolCall("call_"+strings.Repeat("x", i), name, "{}"))
	}
	body, _ := json.Marshal(map[string]any{"role": "assistant", "tool_calls": calls, "session_id": "bench"})
	url := h.ts.URL + "/v1/tool_calls"
	client := h.ts.Client()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		post(b, client, url, testTokens.Agent, body)
	}
	el := time.Since(start)
	b.ReportMetric(float64(8*b.N)/el.Seconds(), "state_calls/s")
	b.ReportMetric(float64(b.N)/el.Seconds(), "messages/s")
}

// BenchmarkFleetRouting measures what naming the robot costs a call: the
// same in-process call — get_task of a known task, routed to its robot's
// runner, with the robot field of that robot — on a one-robot bridge and
// on a bridge of 1,000 robots, interleaved in one run so both see the same
// machine; and the resolution of robot_id alone (Server.robotFor). It
// reports the p50 of each and their ratio (goal: the fleet's call within
// 10% of the one robot's).
func BenchmarkFleetRouting(b *testing.B) {
	unlimited := func(c *Conf) { c.RatePerSecond, c.RateBurst, c.CallBudget = 1e9, 1<<30, 1<<30 }
	one := newHarness(b, unlimited)
	fleet, f := newFleetHarness(b, 1000, unlimited)
	ctx := context.Background()
	p := Principal{Name: "agent", Role: RoleAgent}
	submit := func(s *Server, robotID string) string {
		env := s.Call(ctx, p, CallRequest{Tool: ToolMoveBaseTo, Arguments: map[string]any{"location": "home", "robot_id": robotID}})
		if !env.OK || env.Task == nil {
			b.Fatalf("submit on %s: %+v", robotID, env.Error)
		}
		return env.Task.ID
	}
	reqOne := CallRequest{Tool: ToolGetTask, Arguments: map[string]any{"task_id": submit(one.srv, "sim-1"), "robot_id": "sim-1"}, SessionID: "bench"}
	reqFleet := CallRequest{Tool: ToolGetTask, Arguments: map[string]any{"task_id": submit(fleet.srv, "r777"), "robot_id": "r777"}, SessionID: "bench"}
	if f.tasks["r777"].submits.Load() != 1 {
		b.Fatal("the fleet's task is not r777's")
	}
	tool, _ := fleet.srv.reg.Lookup(ToolGetTask)
	callOne := make([]time.Duration, 0, b.N)
	callFleet := make([]time.Duration, 0, b.N)
	resOne := make([]time.Duration, 0, b.N)
	resFleet := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if env := one.srv.Call(ctx, p, reqOne); !env.OK {
			b.Fatal(env.Error)
		}
		t1 := time.Now()
		if env := fleet.srv.Call(ctx, p, reqFleet); !env.OK {
			b.Fatal(env.Error)
		}
		t2 := time.Now()
		if _, te := one.srv.robotFor(tool, reqOne.Arguments); te != nil {
			b.Fatal(te)
		}
		t3 := time.Now()
		if _, te := fleet.srv.robotFor(tool, reqFleet.Arguments); te != nil {
			b.Fatal(te)
		}
		t4 := time.Now()
		callOne, callFleet = append(callOne, t1.Sub(t0)), append(callFleet, t2.Sub(t1))
		resOne, resFleet = append(resOne, t3.Sub(t2)), append(resFleet, t4.Sub(t3))
	}
	b.StopTimer()
	c1, c1000 := pct(callOne, 0.5), pct(callFleet, 0.5)
	b.ReportMetric(float64(c1.Nanoseconds()), "call_1_p50_ns")
	b.ReportMetric(float64(c1000.Nanoseconds()), "call_1000_p50_ns")
	b.ReportMetric(float64(c1000)/float64(c1), "call_ratio")
	b.ReportMetric(float64(pct(resOne, 0.5).Nanoseconds()), "resolve_1_p50_ns")
	b.ReportMetric(float64(pct(resFleet, 0.5).Nanoseconds()), "resolve_1000_p50_ns")
}
