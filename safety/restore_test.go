package safety

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestRestoreLatches_RefusesMotionUntilAnOperatorReleases(t *testing.T) {
	since := time.Date(2025, 1, 1, 11, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		estop   EStopStatus
		fault   FaultStatus
		want    toolerr.Type
		is      error
		release func(h *harness) error
	}{
		{
			"e-stop",
			EStopStatus{Active: true, By: "alice", Reason: "person near the arm", Since: since},
			FaultStatus{},
			toolerr.EStopActive, ErrEStopActive, func(h *harness) error { return h.sup.ResetEStop("bob") },
		},
		{
			"fault",
			EStopStatus{},
			FaultStatus{Latched: true, Reason: "recovery failed", TaskID: "task-1", Since: since},
			toolerr.SafetyViolation, ErrFaultLatched, func(h *harness) error { return h.sup.ClearFault("bob") },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a fresh supervisor and the latch a previous run left
			h := newHarness(t, nil, allowGrant)
			_, cmd := readyCmd(t, h)
			h.sup.RestoreLatches(tc.estop, tc.fault)
			// Then the status shows the original latch, cause and time
			st := h.sup.Status()
			require.Equal(t, tc.estop, st.EStop)
			want := tc.fault
			if want.Latched {
				// The store keeps the reason only; the operator's words
				// of a restored fault say that it was restored.
				want.FaultWords = restoredFaultWords()
			}
			require.Equal(t, want, st.Fault)
			// And motion is refused as if the bridge had never restarted
			err := h.sup.Admit(Authorization{TaskID: "t1", Tool: "move_arm_to", GrantID: "g-ok"}, cmd)
			require.Equal(t, tc.want, toolerr.TypeOf(err), "%v", err)
			require.ErrorIs(t, err, tc.is)
			// And restoring emitted nothing new
			require.Empty(t, h.eventsOf(EventEStopPressed))
			require.Empty(t, h.eventsOf(EventFaultLatched))
			// When an operator releases it, motion is admitted again
			require.NoError(t, tc.release(h))
			require.NoError(t, h.sup.Admit(Authorization{TaskID: "t1", Tool: "move_arm_to", GrantID: "g-ok"}, cmd))
		})
	}
}

func TestRestoreLatches_NeverReleasesOrOverwrites(t *testing.T) {
	// Given a supervisor whose e-stop was pressed in this run
	h := newHarness(t, nil, allowGrant)
	require.NoError(t, h.sup.EStop(t.Context(), "carol", "now"))
	// When an inactive or older latch is restored
	h.sup.RestoreLatches(EStopStatus{}, FaultStatus{})
	h.sup.RestoreLatches(EStopStatus{Active: true, By: "old", Reason: "before"}, FaultStatus{})
	// Then the current latch stays, with its own cause
	st := h.sup.Status()
	require.True(t, st.EStop.Active)
	require.Equal(t, "carol", st.EStop.By)
	require.False(t, st.Fault.Latched)
}
