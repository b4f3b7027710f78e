// Command benchreport prints the performance targets of issue 19 from raw
// `go test -bench` output (the benchstat format `make bench` writes to
// test-output/bench/bench.txt): for each target the figure measured, the
// baseline measured in the same run, their ratio, the bound, and PASS or
// MISS. With several runs of a benchmark (-count N) it reports medians.
//
// Usage:
//
//	go run ./internal/benchreport [-md] [-strict] [-present] [-base base.txt] [bench.txt ...]
//
// It reads standard input when no file is named. A target whose
// benchmark did not run is MISSING (-present leaves such rows out, for a
// narrowed BENCH selection). With -base, each row also shows the figure
// of the base results and the change (make bench-compare). The exit status is 0 unless -strict
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
	present := flag.Bool("present", false, "leave out targets whose benchmark is not in the input")
	baseFile := flag.String("base", "", "`FILE` of base results to compare against")
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
	var base map[string]Row
	if *baseFile != "" {
		f, err := os.Open(*baseFile)
		if err != nil {
			fatal(err)
		}
		brs, err := Parse(f)
		_ = f.Close()
		if err != nil {
			fatal(fmt.Errorf("%s: %w", *baseFile, err))
		}
		base = map[string]Row{}
		for _, r := range Evaluate(NewSet(brs), Targets) {
			base[r.Name] = r
		}
	}
	if *present {
		kept := rows[:0]
		for _, r := range rows {
			if r.Runs > 0 {
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	fmt.Printf("performance targets (issue 19) from %s: %d results; figures are medians over repeated runs\n",
		strings.Join(names, ", "), len(rs))
	if len(rows) == 0 {
		fmt.Println("no target's benchmark is in the input")
		return
	}
	switch {
	case base != nil:
		fmt.Printf("base: %s\n", *baseFile)
		writeCompare(os.Stdout, rows, base)
	case *md:
		writeMarkdown(os.Stdout, rows)
	default:
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
	_, _ = fmt.Fprintln(tw, "target\tmeasured\tbaseline, same run\tratio\ttarget\tresult\truns")
	for _, r := range rows {
		fig, base, ratio, target := r.Cells()
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Name, fig, base, ratio, target, r.Verdict, r.Runs)
	}
	_ = tw.Flush()
}

// writeCompare prints each target's base figure, head figure and change,
// beside the head's own same-run baseline ratio and verdict.
func writeCompare(w io.Writer, rows []Row, base map[string]Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "target\tbase\thead\tchange\thead vs its same-run baseline\ttarget\thead result")
	for _, r := range rows {
		fig, _, ratio, target := r.Cells()
		b, ok := base[r.Name]
		bfig, change := "—", "—"
		if ok && b.Runs > 0 {
			bfig, _, _, _ = b.Cells()
			if b.Value != 0 && r.Runs > 0 {
				change = fmt.Sprintf("%+.1f%%", (r.Value/b.Value-1)*100)
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, bfig, fig, change, ratio, target, r.Verdict)
	}
	_ = tw.Flush()
}

func writeMarkdown(w io.Writer, rows []Row) {
	_, _ = fmt.Fprintln(w, "| target | measured | baseline, same run | ratio | target | result |")
	_, _ = fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		fig, base, ratio, target := r.Cells()
		_, _ = fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Name, fig, base, ratio, target, r.Verdict)
	}
}
