package fsm

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// allowed is the lifecycle of ARCHITECTURE.md written out by hand, one row
// per (state, event), independently of the table in fsm.go: the test fails
// if either drifts.
var allowed = []struct {
	from  State
	event Event
	to    State
}{
	{Requested, EvNeedApproval, AwaitingApproval},
	{Requested, EvPreauthorized, Approved},
	{Requested, EvCancel, Cancelled},
	{Requested, EvReject, Failed},
	{Requested, EvEStop, EStopped},
	{Requested, EvInterrupt, Interrupted},
	{AwaitingApproval, EvApprove, Approved},
	{AwaitingApproval, EvDeny, Denied},
	{AwaitingApproval, EvExpire, Expired},
	{AwaitingApproval, EvCancel, Cancelled},
	{AwaitingApproval, EvEStop, EStopped},
	{AwaitingApproval, EvInterrupt, Interrupted},
	{Approved, EvStart, Executing},
	{Approved, EvCancel, Cancelled},
	{Approved, EvReject, Failed},
	{Approved, EvEStop, EStopped},
	{Approved, EvInterrupt, Interrupted},
	{Executing, EvSucceed, Succeeded},
	{Executing, EvAbort, Stopping},
	{Executing, EvCancel, Stopping},
	{Executing, EvEStop, EStopped},
	{Executing, EvInterrupt, Interrupted},
	{Executing, EvPause, Paused},
	{Paused, EvResume, Executing},
	{Paused, EvAbort, Stopping},
	{Paused, EvCancel, Stopping},
	{Paused, EvEStop, EStopped},
	{Paused, EvInterrupt, Interrupted},
	{Stopping, EvStopConfirmed, Cancelled},
	{Stopping, EvRecover, Recovering},
	{Stopping, EvLatchFault, Fault},
	{Stopping, EvEStop, EStopped},
	{Stopping, EvInterrupt, Interrupted},
	{Recovering, EvRecovered, Recovered},
	{Recovering, EvStopConfirmed, Cancelled},
	{Recovering, EvLatchFault, Fault},
	{Recovering, EvEStop, EStopped},
	{Recovering, EvInterrupt, Interrupted},
}

func TestTransitions_EveryAllowedTransition(t *testing.T) {
	for _, tc := range allowed {
		t.Run(fmt.Sprintf("%s --%s--> %s", tc.from, tc.event, tc.to), func(t *testing.T) {
			// Given a task in tc.from
			m := New(tc.from)
			require.True(t, m.Can(tc.event))
			// When the event fires
			from, to, err := m.Fire(tc.event)
			// Then it lands in tc.to
			require.NoError(t, err)
			require.Equal(t, tc.from, from)
			require.Equal(t, tc.to, to)
			require.Equal(t, tc.to, m.State())
			next, ok := Next(tc.from, tc.event)
			require.True(t, ok)
			require.Equal(t, tc.to, next)
		})
	}
}

func TestTransitions_TableHasNothingElse(t *testing.T) {
	// Every (state, event) pair not listed above must be forbidden: the
	// table allows exactly the hand-written lifecycle.
	want := map[[2]string]State{}
	for _, a := range allowed {
		want[[2]string{string(a.from), string(a.event)}] = a.to
	}
	n := 0
	for _, s := range AllStates() {
		for _, e := range Events() {
			next, ok := Next(s, e)
			exp, listed := want[[2]string{string(s), string(e)}]
			require.Equal(t, listed, ok, "%s --%s-->", s, e)
			if ok {
				require.Equal(t, exp, next)
				n++
			}
		}
	}
	require.Equal(t, len(allowed), n)
}

func TestTransitions_ForbiddenSample(t *testing.T) {
	tests := []struct {
		name  string
		from  State
		event Event
	}{
		{"no motion straight from a request", Requested, EvStart},
		{"no motion while awaiting approval", AwaitingApproval, EvStart},
		{"no success without executing", Approved, EvSucceed},
		{"a denied task never starts", Denied, EvStart},
		{"an expired task is not approved late", Expired, EvApprove},
		{"approve only once", Approved, EvApprove},
		{"no reject once moving", Executing, EvReject},
		{"no recovery without stopping first", Executing, EvRecover},
		{"no success after an abort", Stopping, EvSucceed},
		{"a recovering task cannot be cancelled", Recovering, EvCancel},
		{"a fault is never recovered by the task", Fault, EvRecovered},
		{"an e-stopped task never recovers", EStopped, EvRecover},
		{"an e-stopped task never restarts", EStopped, EvStart},
		{"succeeded is final", Succeeded, EvAbort},
		{"cancelled is final", Cancelled, EvCancel},
		{"interrupted is final", Interrupted, EvInterrupt},
		{"recovered is final", Recovered, EvEStop},
		{"a paused task never succeeds without resuming", Paused, EvSucceed},
		{"pause only a moving task", Approved, EvPause},
		{"no pause of a stopping task", Stopping, EvPause},
		{"no pause of a recovery", Recovering, EvPause},
		{"no double pause", Paused, EvPause},
		{"resume only a paused task", Executing, EvResume},
		{"a stopping task is not resumed", Stopping, EvResume},
		{"a cancelled task is not resumed", Cancelled, EvResume},
		{"a fault is not resumed", Fault, EvResume},
		{"a paused task does not recover without stopping", Paused, EvRecover},
		{"a paused task does not latch a fault without stopping", Paused, EvLatchFault},
		{"a paused task is not rejected", Paused, EvReject},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(tc.from)
			require.False(t, m.Can(tc.event))
			from, to, err := m.Fire(tc.event)
			require.Error(t, err)
			require.ErrorIs(t, err, ErrForbidden)
			var te *TransitionError
			require.ErrorAs(t, err, &te)
			require.Equal(t, tc.from, te.From)
			require.Equal(t, tc.event, te.Event)
			require.Equal(t, tc.from, from)
			require.Equal(t, tc.from, to)
			require.Equal(t, tc.from, m.State(), "a forbidden event leaves the state unchanged")
		})
	}
}

func TestStates_TerminalAndMotion(t *testing.T) {
	for _, s := range AllStates() {
		t.Run(string(s), func(t *testing.T) {
			hasExit := false
			for _, e := range Events() {
				if _, ok := Next(s, e); ok {
					hasExit = true
				}
			}
			require.Equal(t, !hasExit, s.Terminal(), "terminal means no event leaves the state")
			if s.Motion() {
				require.False(t, s.Terminal())
			}
			got, err := ParseState(string(s))
			require.NoError(t, err)
			require.Equal(t, s, got)
		})
	}
	_, err := ParseState("flying")
	require.Error(t, err)
}

func TestTable_ReturnsACopy(t *testing.T) {
	tb := Table()
	tb[0].Src[0] = Succeeded
	require.NotEqual(t, Succeeded, Table()[0].Src[0])
}

func TestMermaid_GeneratedFromTable(t *testing.T) {
	d := Mermaid()
	require.Contains(t, d, "stateDiagram")
	for _, a := range allowed {
		require.Contains(t, d, fmt.Sprintf("%s --> %s: %s", a.from, a.to, a.event))
	}
}

func TestStates_PausedIsLiveHeldAndInMotion(t *testing.T) {
	// Given the paused state
	// Then it is live (not terminal), counted as a motion under way (a
	// restart has the robot stopped and interrupts it), held at rest, and
	// the only held state
	require.False(t, Paused.Terminal())
	require.True(t, Paused.Motion())
	require.True(t, Paused.Held())
	for _, s := range AllStates() {
		if s != Paused {
			require.False(t, s.Held(), "%s", s)
		}
	}
	for _, e := range []Event{EvEStop, EvInterrupt} {
		next, ok := Next(Paused, e)
		require.True(t, ok, "%s must end a paused task", e)
		require.True(t, next.Terminal())
	}
}
