package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Result is one benchmark result line of `go test -bench` output (the Go
// benchmark format that benchstat reads): the package it ran in, its
// name without the -GOMAXPROCS suffix, the iteration count and every
// value/unit pair, including the custom metrics of b.ReportMetric.
type Result struct {
	Pkg     string
	Name    string // e.g. BenchmarkTransitionWrite/synchronous=FULL
	Procs   int    // the -N suffix; 1 when there is none
	N       int64
	Metrics map[string]float64 // unit → value, e.g. "http_p50_ms" → 2.7
}

// procsRE splits the -GOMAXPROCS suffix off a benchmark name.
var procsRE = regexp.MustCompile(`^(.*)-(\d+)$`)

// Parse reads `go test -bench` output. It keeps the `pkg:` header of each
// block, and joins a result whose name and figures were split over two
// lines (a benchmark that printed to stdout while it ran). Lines that are
// not results (headers, PASS, ok, logs) are skipped.
func Parse(r io.Reader) ([]Result, error) {
	var (
		out     []Result
		pkg     string
		pending string // a "BenchmarkX-2" printed alone, waiting for its figures
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg, pending = strings.TrimSpace(p), ""
			continue
		}
		if strings.HasPrefix(line, "Benchmark") {
			f := strings.Fields(line)
			if len(f) == 1 {
				pending = f[0]
				continue
			}
			if res, ok := parseFields(pkg, f); ok {
				out = append(out, res)
				pending = ""
				continue
			}
			// "BenchmarkX-2 <stray output>": the figures may follow later.
			pending = f[0]
			continue
		}
		if pending != "" {
			f := strings.Fields(line)
			if len(f) > 0 && isInt(f[0]) {
				if res, ok := parseFields(pkg, append([]string{pending}, f...)); ok {
					out = append(out, res)
					pending = ""
				}
			}
			if strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "--- SKIP") {
				pending = ""
			}
		}
	}
	return out, sc.Err()
}

// parseFields parses name, iterations and value/unit pairs.
func parseFields(pkg string, f []string) (Result, bool) {
	if len(f) < 4 || len(f)%2 != 0 || !isInt(f[1]) {
		return Result{}, false
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	res := Result{Pkg: pkg, Name: f[0], Procs: 1, N: n, Metrics: map[string]float64{}}
	if m := procsRE.FindStringSubmatch(f[0]); m != nil {
		res.Name = m[1]
		res.Procs, _ = strconv.Atoi(m[2])
	}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
}

func isInt(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Set holds every result of one or more runs (-count N), by package and
// name, in the order they were read.
type Set struct {
	byKey map[string][]Result
}

// NewSet indexes results.
func NewSet(rs []Result) *Set {
	s := &Set{byKey: map[string][]Result{}}
	for _, r := range rs {
		k := r.Pkg + " " + r.Name
		s.byKey[k] = append(s.byKey[k], r)
	}
	return s
}

// Find returns the runs of benchmark name in the package whose import path
// ends with pkgSuffix ("/bridge"), or in any package when pkgSuffix is "".
func (s *Set) Find(pkgSuffix, name string) []Result {
	var out []Result
	for k, rs := range s.byKey {
		pkg, n, _ := strings.Cut(k, " ")
		if n == name && (pkgSuffix == "" || strings.HasSuffix(pkg, pkgSuffix)) {
			out = append(out, rs...)
		}
	}
	return out
}

// Median returns the median of metric unit over the runs that report it,
// and how many did.
func Median(rs []Result, unit string) (float64, int) {
	var vs []float64
	for _, r := range rs {
		if v, ok := r.Metrics[unit]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, 0
	}
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m], len(vs)
	}
	return (vs[m-1] + vs[m]) / 2, len(vs)
}
