package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

// testdata/bench-sample.txt is captured `go test -bench` output of several
// packages and runs, cut down to the lines that matter: a run that FAILed
// (a test binary started outside its package directory), then results of
// bridge, store, toolapi and internal/benchreport.
func readSample(t *testing.T) []Result {
	t.Helper()
	f, err := os.Open("testdata/bench-sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rs, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestParse_CapturedOutput(t *testing.T) {
	rs := readSample(t)
	s := NewSet(rs)
	for _, c := range []struct {
		pkg, bench, unit string
		want             float64
	}{
		{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "http_p50_ms", 5.060},
		{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "direct_p99_ms", 0.9640},
		{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "allocs/op", 1524},
		{"/bridge", "BenchmarkStateChangeToAgentSSE", "ns/op", 40588},
		{"/store", "BenchmarkTransitionWrite/synchronous=FULL", "p50-µs", 435.1},
		{"/store", "BenchmarkTransitionWrite/synchronous=NORMAL", "transitions/s", 3982},
		{"/toolapi", "BenchmarkGetRobotState_HTTPvsBare", "p50_ratio", 1.665},
		{"/bridge", "BenchmarkToolCallAllocs/get_robot_state", "allocs/op", 116},
		{"/internal/benchreport", "BenchmarkIdleRSS", "rss-MB", 33.95},
	} {
		runs := s.Find(c.pkg, c.bench)
		if len(runs) != 1 {
			t.Errorf("%s %s: %d runs, want 1", c.pkg, c.bench, len(runs))
			continue
		}
		if got := runs[0].Metrics[c.unit]; !near(got, c.want) {
			t.Errorf("%s %s %s = %v, want %v", c.pkg, c.bench, c.unit, got, c.want)
		}
		if runs[0].Procs != 2 {
			t.Errorf("%s: procs %d, want 2 (the -2 suffix)", c.bench, runs[0].Procs)
		}
	}
	r := s.Find("/bridge", "BenchmarkROS_ApprovedCommandLatency/grant")[0]
	if r.Pkg != "github.com/robot-bridge/robot-bridge/bridge" || r.N != 200 {
		t.Errorf("pkg %q N %d", r.Pkg, r.N)
	}
	// The package suffix matters: no other package has this benchmark.
	if got := s.Find("/store", "BenchmarkROS_ApprovedCommandLatency"); len(got) != 0 {
		t.Errorf("found in /store: %v", got)
	}
	// The first run FAILed (it starts the file) and left no result: the
	// one result above is the second run's.
	if n := len(rs); n != 9 {
		t.Errorf("%d results, want 9", n)
	}
}

// A benchmark that prints while it runs splits its result: the name, the
// printed lines, then the figures.
func TestParse_SplitResultLine(t *testing.T) {
	in := "pkg: example.com/m/bridge\n" +
		"BenchmarkROS_StopLatency-2              \t\n" +
		"2026/12/02 18:20:01 a line the benchmark printed\n" +
		"     200\t         0.3530 cancel_p50_ms\t         2.551 cancel_p99_ms\t   32627 B/op\t     467 allocs/op\n" +
		"BenchmarkX-8 \t 10 \t 5 ns/op\n"
	rs, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("got %d results, want 2: %+v", len(rs), rs)
	}
	if rs[0].Name != "BenchmarkROS_StopLatency" || rs[0].N != 200 || !near(rs[0].Metrics["cancel_p99_ms"], 2.551) {
		t.Errorf("split result: %+v", rs[0])
	}
	if rs[1].Name != "BenchmarkX" || rs[1].Procs != 8 || rs[1].Metrics["ns/op"] != 5 {
		t.Errorf("second result: %+v", rs[1])
	}
}

func TestParse_NotResults(t *testing.T) {
	in := "goos: linux\nBenchmarkResult is a type\nBenchmarks: 3\nok  \tx\t1s\nBenchmarkY-2 \t 1 \t x ns/op\n"
	rs, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 0 {
		t.Errorf("parsed %+v", rs)
	}
}

func TestMedianOfRepeatedRuns(t *testing.T) {
	in := "pkg: m/store\n"
	for _, v := range []string{"400", "100", "300", "200"} {
		in += "BenchmarkTransitionWrite/synchronous=FULL-2 \t 10 \t " + v + " p50-µs\n"
	}
	rs, _ := Parse(strings.NewReader(in))
	v, n := Median(NewSet(rs).Find("/store", "BenchmarkTransitionWrite/synchronous=FULL"), "p50-µs")
	if n != 4 || v != 250 {
		t.Errorf("median %v of %d runs, want 250 of 4", v, n)
	}
}

func TestEvaluate_CapturedOutput(t *testing.T) {
	rows := Evaluate(NewSet(readSample(t)), Targets)
	by := map[string]Row{}
	for _, r := range rows {
		by[r.Name] = r
	}
	approved := by["approved command (scoped grant) HTTP → ROS subscriber, p50"]
	if approved.Verdict != Miss || !near(approved.Value, 5.060) || !near(approved.Base, 0.5060) || !near(approved.Ratio, 5.060/0.5060) {
		t.Errorf("approved p50: %+v", approved)
	}
	if r := by["stop over ROS: HTTP stop → cancel at subscriber, p99"]; r.Verdict != Pass || !near(r.Value, 2.551) || r.HaveBase {
		t.Errorf("stop p99 (no direct floor in this capture): %+v", r)
	}
	if r := by["durable transition (SQLite synchronous=FULL), p50"]; r.Verdict != Miss || !near(r.Value, 0.4351) || !near(r.Base, 0.1296) {
		t.Errorf("durable: %+v", r)
	}
	if r := by["get_robot_state over HTTP, p50 (ratio to bare handler)"]; r.Verdict != Miss || !near(r.Ratio, 91.0/55.0) || !near(r.Value, 0.091) {
		t.Errorf("get_robot_state: %+v", r)
	}
	if r := by["idle RSS, bridge on the simulator"]; r.Verdict != Pass || !near(r.Value, 33.95) || !near(r.Base, 8.055) {
		t.Errorf("rss: %+v", r)
	}
	if r := by["allocations per approved command (server side, call → task done, simulator)"]; r.Verdict != Missing {
		t.Errorf("a benchmark that did not run must be MISSING: %+v", r)
	}
	fig, base, ratio, target := approved.Cells()
	if fig != "5.06 ms" || ratio != "10.0×" || target != "≤ 0.4 ms" || !strings.Contains(base, "0.506 ms") {
		t.Errorf("cells %q %q %q %q", fig, base, ratio, target)
	}
}

func TestWriteCompare(t *testing.T) {
	head := Evaluate(NewSet(readSample(t)), Targets)
	baseIn := "pkg: github.com/robot-bridge/robot-bridge/store\n" +
		"BenchmarkTransitionWrite/synchronous=FULL-2 \t 100 \t 870.2 p50-µs\n"
	brs, err := Parse(strings.NewReader(baseIn))
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]Row{}
	for _, r := range Evaluate(NewSet(brs), Targets) {
		base[r.Name] = r
	}
	var out strings.Builder
	writeCompare(&out, head, base)
	var line string
	for l := range strings.Lines(out.String()) {
		if strings.HasPrefix(l, "durable transition") {
			line = l
		}
	}
	// 0.4351 ms against 0.8702 ms: half.
	for _, want := range []string{"0.87 ms", "0.435 ms", "-50.0%", "MISS"} {
		if !strings.Contains(line, want) {
			t.Errorf("row %q lacks %q", line, want)
		}
	}
}
