// Command benchreport prints the performance targets of issue 19 from raw
// `go test -bench` output (the benchstat format `make bench` writes to
// test-output/bench/bench.txt): for each target the figure measured, the
// baseline measured in the same run, their ratio, the bound, and PASS or
// MISS. With several runs of a benchmark (-count N) it reports medians.
//
// Usage:
//
//	go run ./internal/benchreport [-md] [-strict] [bench.txt ...]
//
// It reads standard input when no file is named. A target whose
// benchmark did not run is MISSING. The exit status is 0 unless -strict
// is given and a target is MISS or MISSING, or the input cannot be read:
// the figures come from a shared machine, so by default they inform and
// never fail a build.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	md := flag.Bool("md", false, "print a Markdown table")
	strict := flag.Bool("strict", false, "exit 1 when a target is MISS or MISSING")
	flag.Parse()
	var rs []Result
	var names []string
	if flag.NArg() == 0 {
		r, err := Parse(os.Stdin)
		if err != nil {
			fatal(err)
		}
		rs, names = r, []string{"stdin"}
	}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fatal(err)
		}
		r, err := Parse(f)
		_ = f.Close()
		if err != nil {
			fatal(fmt.Errorf("%s: %w", name, err))
		}
		rs, names = append(rs, r...), append(names, name)
	}
	rows := Evaluate(NewSet(rs), Targets)
	fmt.Printf("performance targets (issue 19) from %s: %d results; figures are medians over repeated runs\n",
		strings.Join(names, ", "), len(rs))
	if *md {
		writeMarkdown(os.Stdout, rows)
	} else {
		writeText(os.Stdout, rows)
	}
	bad := 0
	for _, r := range rows {
		if r.Verdict == Miss || r.Verdict == Missing {
			bad++
		}
		if r.Verdict == Missing {
			fmt.Printf("MISSING %s: no %s of %s (package …%s) in the input\n", r.Name, r.Figure.Unit, r.Figure.Bench, r.Figure.Pkg)
		}
	}
	if *strict && bad > 0 {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchreport:", err)
	os.Exit(2)
}

func writeText(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tmeasured\tbaseline, same run\tratio\ttarget\tresult\truns")
	for _, r := range rows {
		fig, base, ratio, target := r.Cells()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Name, fig, base, ratio, target, r.Verdict, r.Runs)
	}
	_ = tw.Flush()
}

func writeMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| target | measured | baseline, same run | ratio | target | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		fig, base, ratio, target := r.Cells()
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Name, fig, base, ratio, target, r.Verdict)
	}
}
