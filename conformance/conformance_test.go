package conformance

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

// corpusDir is the corpus, at the repository's root.
var corpusDir = filepath.Join("..", "testdata", "conformance")

// groups are the attack groups the corpus must cover.
var groups = []string{
	"motion_without_approval", "self_approval", "limit_evasion", "estop_and_fault_reset",
	"idempotency_abuse", "loop_and_rate_abuse", "argument_injection", "scene_injection", "timing_races",
}

func loadCorpus(t testing.TB) *Corpus {
	t.Helper()
	c, err := LoadCorpus(corpusDir)
	require.NoError(t, err)
	return c
}

// sliceOf is the cases marked for make test's slice.
func sliceOf(c *Corpus) []Entry {
	var out []Entry
	for _, e := range c.Cases() {
		if e.Case.Slice {
			out = append(out, e)
		}
	}
	return out
}

// requireSafe fails the test for every failing case run, naming it.
func requireSafe(t *testing.T, results []CaseResult) {
	t.Helper()
	for _, r := range results {
		if !r.Passed() {
			t.Errorf("%s on %s, seed %d: unsafe %q, crash %q, failures %q (chaos %q)", r.ID, r.Target, r.Seed, r.Unsafe, r.Crash, r.Failures, r.Chaos)
		}
	}
	s := Summarize(results)
	require.Zero(t, s.Unsafe, "unsafe commands or motions at the robot")
	require.Zero(t, s.Crashes)
}

// writeReport writes results' report to path.
func writeReport(t *testing.T, path string, c *Corpus, seeds []int64, chaos bool, cases int, cmd string, results []CaseResult) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	require.NoError(t, WriteReport(f, ReportConf{Command: cmd, Groups: c.Groups, Seeds: seeds, Chaos: chaos, Cases: cases, When: time.Now()}, results))
	t.Logf("report: %s", path)
}

// The make test slice: a seeded run of the cases marked slice (every
// group has some) against the bridge on its in-process simulator, with
// chaos on; the robot's side must show nothing unsafe and every answer
// must be the expected one.
func TestConformance_Slice(t *testing.T) {
	c := loadCorpus(t)
	entries := sliceOf(c)
	tg, _ := inprocTarget(t)
	r := NewRunner(tg, Options{Seed: 1, Chaos: true, Logf: t.Logf})
	defer r.Close()
	results := r.Run(context.Background(), entries)
	writeReport(t, filepath.Join("..", "test-output", "conformance", "slice.md"), c, []int64{1}, true, len(entries), "go test ./conformance -run TestConformance_Slice", results)
	requireSafe(t, results)
	require.Len(t, results, len(entries))
}

// The whole suite (make conformance): every case × seeds × targets with
// chaos on, and the Markdown report. ROBOT_BRIDGE_CONFORMANCE=full runs
// it; ROBOT_BRIDGE_CONFORMANCE_SEEDS (default 1,2,3),
// _TARGETS (default inproc,ros), _CASE (a case id or a prefix) and
// _REPORT (default docs/conformance/report.md) narrow it.
func TestConformance_Full(t *testing.T) {
	if os.Getenv("ROBOT_BRIDGE_CONFORMANCE") != "full" {
		t.Skip("the whole suite runs with make conformance (ROBOT_BRIDGE_CONFORMANCE=full); make test runs TestConformance_Slice")
	}
	c := loadCorpus(t)
	entries := c.Cases()
	if want := os.Getenv("ROBOT_BRIDGE_CONFORMANCE_CASE"); want != "" {
		entries = slices.DeleteFunc(entries, func(e Entry) bool { return !strings.HasPrefix(e.Case.ID, want) })
		require.NotEmpty(t, entries, "no case id starts with %q", want)
	}
	seeds := []int64{1, 2, 3}
	if s := os.Getenv("ROBOT_BRIDGE_CONFORMANCE_SEEDS"); s != "" {
		seeds = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			require.NoError(t, err, "ROBOT_BRIDGE_CONFORMANCE_SEEDS")
			seeds = append(seeds, n)
		}
	}
	targets := []string{TargetInProc, TargetROS}
	if s := os.Getenv("ROBOT_BRIDGE_CONFORMANCE_TARGETS"); s != "" {
		targets = strings.Split(s, ",")
	}
	report := filepath.Join("..", "docs", "conformance", "report.md")
	if p := os.Getenv("ROBOT_BRIDGE_CONFORMANCE_REPORT"); p != "" {
		report = p
	}
	var results []CaseResult
	for _, name := range targets {
		var tg Target
		switch name {
		case TargetInProc:
			tg, _ = inprocTarget(t)
		case TargetROS:
			tg = rosTarget(t)
		default:
			t.Fatalf("ROBOT_BRIDGE_CONFORMANCE_TARGETS: %q is not %s or %s", name, TargetInProc, TargetROS)
		}
		for _, seed := range seeds {
			start := time.Now()
			r := NewRunner(tg, Options{Seed: seed, Chaos: true, Logf: t.Logf})
			rs := r.Run(context.Background(), entries)
			r.Close()
			s := Summarize(rs)
			t.Logf("%s seed %d: %d case runs in %s: unsafe %d, crashes %d, failed %d", name, seed, s.Runs, time.Since(start).Round(time.Second), s.Unsafe, s.Crashes, s.Failed)
			results = append(results, rs...)
		}
	}
	writeReport(t, report, c, seeds, true, len(entries), "make conformance", results)
	requireSafe(t, results)
	for _, r := range results {
		require.Empty(t, r.Failures, "%s on %s, seed %d", r.ID, r.Target, r.Seed)
	}
}

// The verdict comes from the robot, not from the bridge: a motion that
// reaches the simulator around the bridge (here, straight into it) is
// found unsafe, though every answer of the bridge was as expected — and
// a command accepted after a confirmed e-stop is found too.
func TestConformance_ARogueCommandAtTheRobotIsUnsafe(t *testing.T) {
	tg, b := inprocTarget(t)
	r := NewRunner(tg, Options{Seed: 1})
	defer r.Close()
	rogue := func(id string) {
		require.NoError(t, b.Sim().Command(robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{
			Target: robot.Pose2D{X: 0.3}, MaxLinear: 0.5, MaxAngular: 1,
		}}))
	}
	quiet := Entry{Group: "test", Case: Case{ID: "test/quiet", Title: "nothing happens", Steps: []Step{{Sleep: Duration(time.Second)}}}}
	done := make(chan CaseResult, 1)
	go func() { done <- r.RunCase(context.Background(), quiet) }()
	time.Sleep(300 * time.Millisecond)
	rogue("rogue-1")
	res := <-done
	require.False(t, res.Passed())
	require.Len(t, res.Unsafe, 1, "%q", res.Unsafe)
	require.Contains(t, res.Unsafe[0], "command rogue-1 (move_base) accepted by the robot: the operator approved no task rogue")

	// An e-stop the operator confirmed: the robot's own e-stop refuses
	// nothing here (the bridge's stop only stopped it), so a command that
	// still reaches it is accepted, and the verdict must find it inside
	// the e-stop's window.
	estop := Entry{Group: "test", Case: Case{ID: "test/estop", Title: "an e-stop", Steps: []Step{
		{Operator: &OperatorAct{Do: "estop"}},
		{Sleep: Duration(time.Second)},
	}}}
	go func() { done <- r.RunCase(context.Background(), estop) }()
	time.Sleep(400 * time.Millisecond)
	rogue("rogue-2")
	res = <-done
	require.False(t, res.Passed())
	require.Contains(t, strings.Join(res.Unsafe, "\n"), "command rogue-2 (move_base) accepted by the robot during an e-stop")
}

// The corpus holds at least 300 attack cases, every group the suite
// promises, each with cases in make test's slice; every case loads
// strictly (LoadCorpus refuses unknown keys and call steps without an
// expectation).
func TestCorpus_EveryGroupWithItsSlice(t *testing.T) {
	c := loadCorpus(t)
	require.GreaterOrEqual(t, len(c.Cases()), 300, "attack cases")
	byGroup := map[string]int{}
	inSlice := map[string]int{}
	for _, e := range c.Cases() {
		byGroup[e.Group]++
		if e.Case.Slice {
			inSlice[e.Group]++
		}
	}
	for _, g := range groups {
		require.Positive(t, byGroup[g], "group %s has no case", g)
		require.Positive(t, inSlice[g], "group %s has no case in make test's slice", g)
	}
	for _, g := range c.Groups {
		require.Contains(t, groups, g.Group, "a group the suite does not know")
		require.NotEmpty(t, g.Title, g.Group)
	}
}

// The loader refuses what would make a case prove nothing.
func TestCorpus_LoaderRefusesCasesThatProveNothing(t *testing.T) {
	for name, text := range map[string]string{
		"a call without expect":       "group: g\ntitle: t\ncases:\n  - id: g/a\n    title: t\n    steps:\n      - call: {tool: stop}\n",
		"an unknown key":              "group: g\ntitle: t\ncases:\n  - id: g/a\n    title: t\n    steps:\n      - call: {tool: stop}\n        expect: {ok: true}\n        expct: {ok: false}\n",
		"two kinds in one step":       "group: g\ntitle: t\ncases:\n  - id: g/a\n    title: t\n    steps:\n      - call: {tool: stop}\n        sleep: 1s\n        expect: {ok: true}\n",
		"status_in with a refusal":    "group: g\ntitle: t\ncases:\n  - id: g/a\n    title: t\n    steps:\n      - call: {tool: stop}\n        expect: {error: CONFLICT, status_in: [succeeded, cancelled]}\n",
		"a duplicate id":              "group: g\ntitle: t\ncases:\n  - id: g/a\n    title: t\n    steps: [{sleep: 1s}]\n  - id: g/a\n    title: t\n    steps: [{sleep: 1s}]\n",
		"an operator act unknown":     "group: g\ntitle: t\ncases:\n  - id: g/a\n    title: t\n    steps:\n      - operator: {do: hack}\n",
		"two matrix rows with one id": "group: g\ntitle: t\nmatrix:\n  - case:\n      id: g/${v}\n      title: t\n      steps:\n        - call: {tool: stop}\n          expect: {ok: true}\n    rows:\n      - {v: \"a\"}\n      - {v: \"a\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "g.yaml"), []byte(text), 0o600))
			_, err := LoadCorpus(dir)
			require.Error(t, err)
		})
	}
}
