package main

import (
	"fmt"
	"math"
	"strconv"
)

// Metric names one figure: a benchmark (by the suffix of its package's
// import path and its name without -GOMAXPROCS) and one of its units.
type Metric struct {
	Pkg   string // import path suffix, e.g. "/bridge"
	Bench string // e.g. "BenchmarkROS_ApprovedCommandLatency"
	Unit  string // e.g. "http_p50_ms", "allocs/op"
}

// Target is one goal of issue 19: a figure, the baseline measured in the
// same run that the figure is read against, and the bound.
type Target struct {
	Name string
	// Figure is what is measured; Baseline (optional) is the floor of the
	// same run: a bare handler, a direct publish, the same write without
	// fsync.
	Figure, Baseline Metric
	BaseName         string
	// Scale turns both metrics into Display units (e.g. 1e-3 for µs → ms).
	Scale   float64
	Display string
	// Limit bounds the figure (or, with OnRatio, figure/baseline) from
	// above; 0 means no bound: the row is reported, never judged.
	Limit   float64
	OnRatio bool
}

// Targets are the figures `make bench` reports, in the order printed.
var Targets = []Target{
	{
		Name:     "approved command (scoped grant) HTTP → ROS subscriber, p50",
		Figure:   Metric{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "http_p50_ms"},
		Baseline: Metric{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "durable_floor_p50_ms"},
		BaseName: "one fdatasync + goroslib publish → subscribe", Scale: 1, Display: "ms", Limit: 0.4,
	},
	{
		Name:     "approved command (scoped grant) HTTP → ROS subscriber, p99",
		Figure:   Metric{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "http_p99_ms"},
		Baseline: Metric{"/bridge", "BenchmarkROS_ApprovedCommandLatency/grant", "durable_floor_p99_ms"},
		BaseName: "one fdatasync + goroslib publish → subscribe", Scale: 1, Display: "ms", Limit: 1.2,
	},
	{
		Name:     "approved command (approval: never) HTTP → ROS subscriber, p50",
		Figure:   Metric{"/bridge", "BenchmarkROS_ApprovedCommandLatency/config", "http_p50_ms"},
		Baseline: Metric{"/bridge", "BenchmarkROS_ApprovedCommandLatency/config", "durable_floor_p50_ms"},
		BaseName: "one fdatasync + goroslib publish → subscribe", Scale: 1, Display: "ms",
	},
	{
		Name:     "stop over ROS: HTTP stop → cancel at subscriber, p99",
		Figure:   Metric{"/bridge", "BenchmarkROS_StopLatency", "cancel_p99_ms"},
		Baseline: Metric{"/bridge", "BenchmarkROS_StopLatency", "direct_p99_ms"},
		BaseName: "goroslib publish → subscribe", Scale: 1, Display: "ms", Limit: 3,
	},
	{
		Name:     "stop over ROS: HTTP stop → zero Twist at subscriber, p99",
		Figure:   Metric{"/bridge", "BenchmarkROS_StopLatency", "twist_p99_ms"},
		Baseline: Metric{"/bridge", "BenchmarkROS_StopLatency", "direct_p99_ms"},
		BaseName: "goroslib publish → subscribe", Scale: 1, Display: "ms", Limit: 3,
	},
	{
		Name:     "get_robot_state over HTTP, p50 (ratio to bare handler)",
		Figure:   Metric{"/toolapi", "BenchmarkGetRobotState_HTTPvsBare", "bridge_p50_µs"},
		Baseline: Metric{"/toolapi", "BenchmarkGetRobotState_HTTPvsBare", "bare_p50_µs"},
		BaseName: "bare net/http handler, same bytes", Scale: 1e-3, Display: "ms", Limit: 1.25, OnRatio: true,
	},
	{
		Name:     "durable transition (SQLite synchronous=FULL), p50",
		Figure:   Metric{"/store", "BenchmarkTransitionWrite/synchronous=FULL", "p50-µs"},
		Baseline: Metric{"/store", "BenchmarkTransitionWrite/synchronous=NORMAL", "p50-µs"},
		BaseName: "same write, synchronous=NORMAL (no fsync)", Scale: 1e-3, Display: "ms", Limit: 0.15,
	},
	{
		Name:     "idle RSS, bridge on the simulator",
		Figure:   Metric{"/internal/benchreport", "BenchmarkIdleRSS", "rss-MB"},
		Baseline: Metric{"/internal/benchreport", "BenchmarkIdleRSS", "bare-rss-MB"},
		BaseName: "bare Go net/http server process", Scale: 1, Display: "MB", Limit: 40,
	},
	{
		Name:     "allocations per get_robot_state call (server side)",
		Figure:   Metric{"/bridge", "BenchmarkToolCallAllocs/get_robot_state", "allocs/op"},
		Baseline: Metric{"/bridge", "BenchmarkToolCallAllocs/bare_handler", "allocs/op"},
		BaseName: "bare handler, same bytes", Scale: 1, Display: "allocs",
	},
	{
		Name:     "allocations per approved command (server side, call → task done, simulator)",
		Figure:   Metric{"/bridge", "BenchmarkToolCallAllocs/move_base_to", "allocs/cmd"},
		Baseline: Metric{"/bridge", "BenchmarkToolCallAllocs/get_robot_state", "allocs/op"},
		BaseName: "one get_robot_state call", Scale: 1, Display: "allocs",
	},
}

// Verdict is a target evaluated against one set of results.
type Verdict string

// Verdicts.
const (
	Pass    Verdict = "PASS"
	Miss    Verdict = "MISS"
	Info    Verdict = "INFO"    // reported, no bound
	Missing Verdict = "MISSING" // the benchmark did not run (or failed)
)

// Row is one evaluated target.
type Row struct {
	Target
	Value, Base, Ratio float64
	HaveBase           bool
	Runs               int
	Verdict            Verdict
}

// Evaluate reads every target from s (medians over repeated runs).
func Evaluate(s *Set, ts []Target) []Row {
	rows := make([]Row, 0, len(ts))
	for _, t := range ts {
		r := Row{Target: t}
		v, n := Median(s.Find(t.Figure.Pkg, t.Figure.Bench), t.Figure.Unit)
		if n == 0 {
			r.Verdict = Missing
			rows = append(rows, r)
			continue
		}
		r.Value, r.Runs = v*t.Scale, n
		if t.Baseline.Bench != "" {
			if b, bn := Median(s.Find(t.Baseline.Pkg, t.Baseline.Bench), t.Baseline.Unit); bn > 0 {
				r.Base, r.HaveBase = b*t.Scale, true
				if b != 0 {
					r.Ratio = v / b
				}
			}
		}
		switch {
		case t.Limit == 0:
			r.Verdict = Info
		case t.OnRatio && !r.HaveBase:
			r.Verdict = Missing
		case t.OnRatio:
			r.Verdict = judge(r.Ratio <= t.Limit)
		default:
			r.Verdict = judge(r.Value <= t.Limit)
		}
		rows = append(rows, r)
	}
	return rows
}

func judge(ok bool) Verdict {
	if ok {
		return Pass
	}
	return Miss
}

// fmtNum prints a figure with three significant digits.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// Cells are the printed columns of a row.
func (r Row) Cells() (figure, base, ratio, target string) {
	if r.Verdict == Missing && r.Runs == 0 {
		figure = "—"
	} else {
		figure = fmtNum(r.Value) + " " + r.Display
	}
	base, ratio = "—", "—"
	if r.HaveBase {
		base = fmtNum(r.Base) + " " + r.Display + " (" + r.BaseName + ")"
		if r.Base != 0 {
			ratio = fmtNum(r.Ratio) + "×"
		}
	}
	switch {
	case r.Limit == 0:
		target = "—"
	case r.OnRatio:
		target = "≤ " + strconv.FormatFloat(r.Limit, 'g', -1, 64) + "×"
	default:
		target = "≤ " + strconv.FormatFloat(r.Limit, 'g', -1, 64) + " " + r.Display
	}
	return figure, base, ratio, target
}
