package conformance

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Summary totals a set of results.
type Summary struct {
	Runs, Steps                                         int
	Refusals, RefusedAsExpected, RefusedOtherUnderChaos int
	Approved, Motions                                   int
	Unsafe, Crashes, Failed, Deviations, Chaos          int
	Duration                                            time.Duration
}

// Summarize totals results.
func Summarize(results []CaseResult) Summary {
	var s Summary
	for _, r := range results {
		s.Runs++
		s.Steps += r.Steps
		s.Refusals += r.Refusals
		s.RefusedAsExpected += r.RefusedAsExpected
		s.RefusedOtherUnderChaos += r.RefusedOtherUnderChaos
		s.Approved += r.Approved
		s.Motions += r.Motions
		s.Unsafe += len(r.Unsafe)
		s.Deviations += len(r.Deviations)
		s.Chaos += len(r.Chaos)
		if r.Crash != "" {
			s.Crashes++
		}
		if !r.Passed() {
			s.Failed++
		}
		s.Duration += r.Duration
	}
	return s
}

// ReportConf says what a report was run with.
type ReportConf struct {
	// Command regenerates the report.
	Command string
	// Titles are the groups' titles by id, in corpus order.
	Groups []Group
	Seeds  []int64
	Chaos  bool
	Cases  int
	When   time.Time
}

// WriteReport writes the Markdown report of results.
func WriteReport(w io.Writer, rc ReportConf, results []CaseResult) error {
	var b strings.Builder
	all := Summarize(results)
	targets := map[string]bool{}
	for _, r := range results {
		targets[r.Target] = true
	}
	tnames := make([]string, 0, len(targets))
	for t := range targets {
		tnames = append(tnames, t)
	}
	slices.Sort(tnames)
	fmt.Fprintf(&b, "# Safety conformance report\n\n")
	fmt.Fprintf(&b, "Generated %s by `%s`.\n\n", rc.When.UTC().Format("2006-01-02 15:04 MST"), rc.Command)
	fmt.Fprintf(&b, "A scripted, fully hostile agent ran **%d attack cases** × seeds %v × targets %s = **%d case runs**, chaos %s. "+
		"The verdict comes from the simulated robot's own command log and motion trace, never from the bridge's answers.\n\n",
		rc.Cases, rc.Seeds, strings.Join(tnames, ", "), all.Runs, onOff(rc.Chaos))
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| unsafe actuator commands or motions (robot-side) | **%d** |\n", all.Unsafe)
	fmt.Fprintf(&b, "| crashes (no answer, 5xx, INTERNAL) | **%d** |\n", all.Crashes)
	fmt.Fprintf(&b, "| case runs with an unmet expectation | %d |\n", all.Failed)
	fmt.Fprintf(&b, "| API calls and operator acts | %d |\n", all.Steps)
	fmt.Fprintf(&b, "| answers that had to be refusals | %d |\n", all.Refusals)
	fmt.Fprintf(&b, "| … refused with the expected error type | %d |\n", all.RefusedAsExpected)
	fmt.Fprintf(&b, "| … refused with another type while a chaos fault was in force | %d |\n", all.RefusedOtherUnderChaos)
	fmt.Fprintf(&b, "| motions the operator approved / motion commands the robot accepted | %d / %d |\n", all.Approved, all.Motions)
	fmt.Fprintf(&b, "| chaos faults injected | %d |\n", all.Chaos)
	fmt.Fprintf(&b, "| refusal latency p50 / p99 | %s |\n", latencies(results))
	fmt.Fprintf(&b, "| time (sum of case runs) | %s |\n\n", all.Duration.Round(time.Second))

	fmt.Fprintf(&b, "## Per attack group\n\n")
	fmt.Fprintf(&b, "| group | what it tries | cases | runs | calls | refusals expected | refused as expected | refused otherwise under chaos | approved / accepted motions | unsafe | crashes | failed runs |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range rc.Groups {
		var rs []CaseResult
		ids := map[string]bool{}
		for _, r := range results {
			if r.Group == g.Group {
				rs = append(rs, r)
				ids[r.ID] = true
			}
		}
		s := Summarize(rs)
		fmt.Fprintf(&b, "| `%s` | %s | %d | %d | %d | %d | %d | %d | %d / %d | %d | %d | %d |\n",
			g.Group, g.Title, len(ids), s.Runs, s.Steps, s.Refusals, s.RefusedAsExpected, s.RefusedOtherUnderChaos, s.Approved, s.Motions, s.Unsafe, s.Crashes, s.Failed)
	}
	b.WriteString("\n")

	if len(tnames) > 1 || len(rc.Seeds) > 1 {
		fmt.Fprintf(&b, "## Per target and seed\n\n| target | seed | runs | unsafe | crashes | failed runs | refused as expected | time |\n|---|---|---|---|---|---|---|---|\n")
		for _, t := range tnames {
			for _, seed := range rc.Seeds {
				var rs []CaseResult
				for _, r := range results {
					if r.Target == t && r.Seed == seed {
						rs = append(rs, r)
					}
				}
				s := Summarize(rs)
				fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", t, seed, s.Runs, s.Unsafe, s.Crashes, s.Failed, s.RefusedAsExpected, s.Duration.Round(time.Second))
			}
		}
		b.WriteString("\n")
	}

	slow := slices.Clone(results)
	slices.SortFunc(slow, func(a, b CaseResult) int { return int(b.Duration - a.Duration) })
	if len(slow) > 10 {
		slow = slow[:10]
	}
	if len(slow) > 0 {
		fmt.Fprintf(&b, "## Slowest case runs\n\n| case | target | seed | time |\n|---|---|---|---|\n")
		for _, r := range slow {
			fmt.Fprintf(&b, "| %s | %s | %d | %s |\n", r.ID, r.Target, r.Seed, r.Duration.Round(time.Millisecond))
		}
		b.WriteString("\n")
	}

	chaos := map[string]int{}
	for _, r := range results {
		for _, c := range r.Chaos {
			chaos[strings.Fields(c)[0]]++
		}
	}
	if len(chaos) > 0 {
		fmt.Fprintf(&b, "## Chaos\n\nFaults injected by the simulator at seeded random moments while the attacks ran:\n\n| fault | times |\n|---|---|\n")
		kinds := make([]string, 0, len(chaos))
		for k := range chaos {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			fmt.Fprintf(&b, "| %s | %d |\n", k, chaos[k])
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "## Failing case runs\n\n")
	failed := 0
	for _, r := range results {
		if r.Passed() {
			continue
		}
		failed++
		if failed > 50 {
			continue
		}
		fmt.Fprintf(&b, "### %s on %s, seed %d\n\n%s (%s)\n\n", r.ID, r.Target, r.Seed, r.Title, r.Duration.Round(time.Millisecond))
		fmt.Fprintf(&b, "Replay: `ROBOT_BRIDGE_CONFORMANCE_CASE=%s ROBOT_BRIDGE_CONFORMANCE_SEEDS=%d ROBOT_BRIDGE_CONFORMANCE_TARGETS=%s make conformance`\n\n", r.ID, r.Seed, r.Target)
		for _, u := range r.Unsafe {
			fmt.Fprintf(&b, "- **unsafe**: %s\n", u)
		}
		if r.Crash != "" {
			fmt.Fprintf(&b, "- **crash**: %s\n", r.Crash)
		}
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- failed: %s\n", f)
		}
		for _, c := range r.Chaos {
			fmt.Fprintf(&b, "- chaos: %s\n", c)
		}
		b.WriteString("\n")
	}
	if failed == 0 {
		b.WriteString("None.\n")
	} else if failed > 50 {
		fmt.Fprintf(&b, "… and %d more.\n", failed-50)
	}

	// What chaos changed, so a reader can see it was chaos and nothing
	// else: every deviation, with the fault in force.
	fmt.Fprintf(&b, "\n## Answers that chaos changed\n\nWhile a fault was in force these answers differed from the case's expectation without being unsafe (a refusal of another type, an approved motion that did not finish); the robot-side verdict was applied to them unchanged.\n\n")
	n := 0
	for _, r := range results {
		for _, d := range r.Deviations {
			n++
			if n <= 40 {
				fmt.Fprintf(&b, "- %s on %s, seed %d (%s): %s\n", r.ID, r.Target, r.Seed, strings.Join(r.Chaos, "; "), trim(d, 300))
			}
		}
	}
	switch {
	case n == 0:
		b.WriteString("None.\n")
	case n > 40:
		fmt.Fprintf(&b, "- … and %d more.\n", n-40)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// latencies is the p50 / p99 of the expected refusals' latencies.
func latencies(results []CaseResult) string {
	var all []time.Duration
	for _, r := range results {
		all = append(all, r.RefusalLatencies...)
	}
	if len(all) == 0 {
		return "—"
	}
	p50, p99 := Percentile(all, 0.50), Percentile(all, 0.99)
	return fmt.Sprintf("%.2f / %.2f ms (%d refusals)", float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000, len(all))
}

// Percentile is the q-quantile of ds (nearest rank).
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
