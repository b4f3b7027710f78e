package safety

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClose_WhileStoppingOrRecoveringIsInterruptedNotAFault: a shutdown
// that cuts short the wait for a stop's confirmation, or a recovery
// motion, ends the motion interrupted (the bridge's final stop follows);
// it used to latch a fault "not confirmed stopped" or "recovery failed"
// on every clean shutdown that happened at that moment.
func TestClose_WhileStoppingOrRecoveringIsInterruptedNotAFault(t *testing.T) {
	for _, phase := range []Phase{PhaseStopping, PhaseRecovering} {
		t.Run(string(phase), func(t *testing.T) {
			h := newHarness(t, nil, allowGrant)
			ready, _ := h.cfg.PoseJoints("ready")
			reach, _ := h.cfg.PoseJoints("reach_table")
			for i := range h.st.Joints {
				h.st.Joints[i].Position = ready[i]
			}
			h.publish()
			// Given an arm motion that times out (the arm never moves)
			m := armMotion(reach, 100*time.Millisecond, "g-ok")
			out := h.execute(context.Background(), m)
			require.True(t, h.runUntil(time.Second, func() bool { return len(h.drv.stopTimes()) > 0 }), "the deadline never tripped")
			if phase == PhaseRecovering {
				// and, once the stop is confirmed, the return to the safe
				// pose runs (it never arrives)
				require.True(t, h.runUntil(time.Second, func() bool {
					st := h.sup.Status()
					return st.Active != nil && st.Active.Phase == PhaseRecovering
				}), "recovery never started")
			}
			st := h.sup.Status()
			require.NotNil(t, st.Active)
			require.Equal(t, phase, st.Active.Phase)
			// When the bridge shuts down now
			require.NoError(t, h.sup.Close())
			// Then the motion ends interrupted, no fault is latched, and the
			// last command the robot got is a stop
			o := <-out
			require.Equal(t, OutcomeInterrupted, o.Kind, "fault: %s", o.FaultReason)
			require.False(t, h.sup.Status().Fault.Latched, h.sup.Status().Fault.Reason)
			require.Empty(t, h.eventsOf(EventFaultLatched))
			ev := h.eventsOf(EventStopSent)
			require.Equal(t, "bridge shutting down", ev[len(ev)-1].Reason)
		})
	}
}
