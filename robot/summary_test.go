package robot

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/summary.golden from the current output")

// t0 is the bridge clock's "now" in these tests.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func atRest() State {
	return State{
		Base: Pose2D{X: 1.2, Y: 0.4, Theta: 1.5707963}, Battery: Battery{Percent: 87, Known: true},
		Gripper: &Gripper{Opening: 0.09},
	}
}

func inMotion() State {
	s := atRest()
	s.Velocity.V = 0.3
	return s
}

// seen is an observation at t0 of st received age ago over a live link.
func seen(st State, age time.Duration) Observation {
	return Observation{State: st, Have: true, ReceivedAt: t0.Add(-age), Now: t0, StaleAfter: 500 * time.Millisecond, LinkUp: true}
}

// summaryCases are every condition the bridge can be in when it
// describes the robot, the cases of the issue first.
func summaryCases() []struct {
	name string
	obs  Observation
	want Condition
} {
	linkDown := func(o Observation) Observation { o.LinkUp = false; return o }
	stopAt := func(o Observation, at time.Time) Observation { o.StopSentAt = at; return o }
	noState := Observation{Now: t0, LinkUp: true}
	return []struct {
		name string
		obs  Observation
		want Condition
	}{
		{"silent mid-motion: link up, last state moving, 2.5 s old", seen(inMotion(), 2500*time.Millisecond), ConditionStale},
		{"silent at rest: link up, last state still, 2.5 s old", seen(atRest(), 2500*time.Millisecond), ConditionStale},
		{"just past the state timeout", seen(atRest(), 501*time.Millisecond), ConditionStale},
		{"link down, last state moving", linkDown(seen(inMotion(), 12*time.Second)), ConditionLinkDown},
		{"link down, last state at rest and fresh", linkDown(seen(atRest(), 0)), ConditionLinkDown},
		{"stop sent, newest state from before it, moving", stopAt(seen(inMotion(), 20*time.Millisecond), t0.Add(-10*time.Millisecond)), ConditionStopUnconfirmed},
		{"stop sent, newest state from before it, at rest", stopAt(seen(atRest(), 20*time.Millisecond), t0.Add(-10*time.Millisecond)), ConditionStopUnconfirmed},
		{"stop sent, newest state received the same instant", stopAt(seen(atRest(), 0), t0), ConditionStopUnconfirmed},
		{"stop sent, a later state shows rest", stopAt(seen(atRest(), 5*time.Millisecond), t0.Add(-10*time.Millisecond)), ConditionStopped},
		{"stop sent, a later state still shows motion", stopAt(seen(inMotion(), 5*time.Millisecond), t0.Add(-10*time.Millisecond)), ConditionMoving},
		{"stop sent, the robot then went silent", stopAt(seen(inMotion(), 3*time.Second), t0.Add(-3500*time.Millisecond)), ConditionStale},
		{"stop sent, the link then went down", linkDown(stopAt(seen(atRest(), 5*time.Millisecond), t0.Add(-10*time.Millisecond))), ConditionLinkDown},
		{"current state at rest", seen(atRest(), 100*time.Millisecond), ConditionStopped},
		{"current state at the state timeout exactly", seen(atRest(), 500*time.Millisecond), ConditionStopped},
		{"current state moving", seen(inMotion(), 100*time.Millisecond), ConditionMoving},
		{"current state, only a joint moving", seen(func() State { s := atRest(); s.Joints = []Joint{{Name: "elbow", Velocity: 0.5}}; return s }(), 0), ConditionMoving},
		{"stale, with e-stop and faults", seen(func() State { s := atRest(); s.EStop, s.Faults = true, []string{"motor_stall"}; return s }(), 75*time.Second), ConditionStale},
		{"stale for minutes", seen(atRest(), 13*time.Minute), ConditionStale},
		{"stale for hours", seen(atRest(), 5*time.Hour+time.Minute), ConditionStale},
		{"no StaleAfter: the 500 ms default", func() Observation { o := seen(atRest(), 600*time.Millisecond); o.StaleAfter = 0; return o }(), ConditionStale},
		{"a receive time after Now counts as age 0", seen(atRest(), -time.Second), ConditionStopped},
		{"no state yet, link up", noState, ConditionUnknown},
		{"no state yet, link down", linkDown(noState), ConditionUnknown},
		{"no state yet, stop sent", stopAt(noState, t0), ConditionUnknown},
	}
}

func TestSummary_StaleStateSaysLastSeen(t *testing.T) {
	tests := []struct {
		name string
		age  time.Duration
		st   State
		want string
	}{
		{
			"went silent mid-motion", 2500 * time.Millisecond, inMotion(),
			"last seen moving at (1.20, 0.40) facing 90° 2.5 s ago (no state since), gripper open, battery 87%",
		},
		{
			"went silent at rest", 2500 * time.Millisecond, atRest(),
			"last seen at (1.20, 0.40) facing 90° 2.5 s ago (no state since), gripper open, battery 87%",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a link that is up and a state older than the state timeout
			obs := seen(tc.st, tc.age)
			// When the robot is described
			got := obs.Summary()
			// Then it is where it was last seen, how long ago, and never
			// "stopped" or "moving" as if that were now
			require.Equal(t, tc.want, got)
			require.Equal(t, ConditionStale, obs.Condition())
			require.False(t, obs.Condition().Current())
			require.NotRegexp(t, `^(stopped|moving)`, got)
			require.NotContains(t, got, "stopped")
		})
	}
}

func TestSummary_LinkDownIsSaid(t *testing.T) {
	// Given a link that just went down, with a fresh state that shows rest
	obs := seen(atRest(), 0)
	obs.LinkUp = false
	// When the robot is described
	got := obs.Summary()
	// Then the link is down and the state is only where it was last seen
	require.Equal(t, "robot link down; last seen at (1.20, 0.40) facing 90° 0.0 s ago (no state since), gripper open, battery 87%", got)
	require.NotContains(t, got, "stopped")
}

func TestSummary_StopIsConfirmedOnlyByALaterState(t *testing.T) {
	sent := t0.Add(-10 * time.Millisecond)
	tests := []struct {
		name       string
		receivedAt time.Time
		st         State
		want       string
	}{
		{
			"state from before the stop, moving", sent.Add(-time.Millisecond), inMotion(),
			"stop sent, not confirmed; last seen moving at (1.20, 0.40) facing 90° 0.0 s ago (before the stop), gripper open, battery 87%",
		},
		{
			"state from before the stop, at rest", sent.Add(-time.Millisecond), atRest(),
			"stop sent, not confirmed; last seen at (1.20, 0.40) facing 90° 0.0 s ago (before the stop), gripper open, battery 87%",
		},
		{
			"state after the stop, at rest", sent.Add(time.Millisecond), atRest(),
			"stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%",
		},
		{
			"state after the stop, still moving", sent.Add(time.Millisecond), inMotion(),
			"stop sent, not confirmed; moving at (1.20, 0.40) facing 90°, gripper open, battery 87%",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a stop sent 10 ms ago and the newest state
			obs := Observation{State: tc.st, Have: true, ReceivedAt: tc.receivedAt, Now: t0, LinkUp: true, StopSentAt: sent}
			// When the robot is described, then "stopped" needs a state
			// received after the stop that shows rest
			require.Equal(t, tc.want, obs.Summary())
		})
	}
}

// TestSummary_Golden pins the words for every condition; "stopped" and
// "moving" at the start appear only for a current state. Run with -update
// to rewrite testdata/summary.golden after an intended change, and read
// the diff.
func TestSummary_Golden(t *testing.T) {
	var b strings.Builder
	for _, tc := range summaryCases() {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.obs.Condition())
			got := tc.obs.Summary()
			if !tc.want.Current() {
				require.NotRegexp(t, `^(stopped|moving)|; (stopped|moving) at`, got, "only a current state says stopped or moving")
			}
			if tc.want == ConditionLinkDown || (tc.want == ConditionUnknown && !tc.obs.LinkUp) {
				require.Contains(t, got, "link down")
			}
			fmt.Fprintf(&b, "%s [%s]\n  %s\n", tc.name, tc.want, got)
		})
	}
	path := filepath.Join("testdata", "summary.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./robot -run TestSummary_Golden -update to create it")
	require.Equal(t, string(want), b.String())
}

func TestFormatAge(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"zero", 0, "0.0 s"},
		{"negative is zero", -time.Second, "0.0 s"},
		{"tenths, rounded down", 2590 * time.Millisecond, "2.5 s"},
		{"just under ten seconds", 9999 * time.Millisecond, "9.9 s"},
		{"whole seconds", 75*time.Second + 900*time.Millisecond, "75 s"},
		{"minutes", 13*time.Minute + 59*time.Second, "13 min"},
		{"hours", 5*time.Hour + 59*time.Minute, "5 h"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, FormatAge(tc.d))
		})
	}
}

func TestBattery_UnreportedIsAbsentNeverZero(t *testing.T) {
	// Given a robot without a battery input, and one that reports 87%
	none := State{Base: Pose2D{X: 1, Y: 2}}
	some := State{Base: Pose2D{X: 1, Y: 2}, Battery: Battery{Percent: 87, Known: true}}

	// Then the first says nothing about a battery, in words or in JSON,
	// instead of "battery 0%"
	require.NotContains(t, none.Summary(), "battery")
	raw, err := json.Marshal(none)
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"battery"`)

	// And the second says its charge, and survives a JSON round trip as known
	require.Contains(t, some.Summary(), "battery 87%")
	raw, err = json.Marshal(some)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(raw, &back))
	require.True(t, back.Battery.Known)
	require.InDelta(t, 87.0, back.Battery.Percent, 1e-9)
}
