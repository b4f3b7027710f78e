package safety

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jargon is what must never reach an operator's words: package, function
// and transport names, Go error chains and over-precise durations.
var jargon = regexp.MustCompile(`inproc|refresh|driver send|mqtt:|ros:|rosaction|safety\.|actions\.|%!|<nil>|context deadline|\d+\.\d{2,}\s?s\b|\d+\.\d{3,}`)

// requireOperatorWords checks one FaultWords: every field a plain
// sentence, no jargon.
func requireOperatorWords(t *testing.T, w FaultWords) {
	t.Helper()
	for name, s := range map[string]string{"what": w.What, "robot_did": w.RobotDid, "check": w.Check} {
		require.NotEmpty(t, s, name)
		require.True(t, strings.HasSuffix(s, "."), "%s %q ends with a full stop", name, s)
		require.False(t, jargon.MatchString(s), "%s %q holds developer jargon", name, s)
	}
	require.NotEqual(t, w.What, w.RobotDid)
	require.NotEqual(t, w.RobotDid, w.Check)
}

// TestFaultWords_EveryLatchPathInOperatorWords goes over every cause a
// motion latches a fault for, with every trip that can lead to it, and
// the restored fault: each says what happened, what the robot did and
// what to check, in an operator's words (issue 14).
func TestFaultWords_EveryLatchPathInOperatorWords(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	kinds := []TripKind{
		TripDeadline, TripSilence, TripStall, TripLimitBreach, TripDriverError, TripRobotFault, TripRobotEStop,
		TripEStop, TripLinkDown, TripVerifyFailed, TripCancelled, TripGrantRevoked, TripGrantExpired,
		TripAborted, TripPauseLimit, TripMovedWhilePaused, TripPauseUnconfirmed,
	}
	causes := []faultCause{causeStopUnconfirmed, causeNotPreauthorized, causeRecoveryFailed, causeRecoveryUnrecorded, causeMovedWhilePaused}
	for _, k := range kinds {
		for _, c := range causes {
			for _, confirmed := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%d/%v", k, c, confirmed), func(t *testing.T) {
					// A transport's error, as it arrives wrapped in a
					// trip's detail, never reaches the operator's words.
					trip := &Trip{
						Kind: k, Detail: "the driver failed to refresh the motion: inproc refresh: no ack within 2.833333333s",
						age: 2833333333 * time.Nanosecond, limit: 12345 * time.Millisecond,
					}
					w := h.sup.faultWords("move_base_to", c, Outcome{Trip: trip, StopConfirmed: confirmed})
					requireOperatorWords(t, w)
				})
			}
		}
	}
	t.Run("restored", func(t *testing.T) { requireOperatorWords(t, restoredFaultWords()) })
	t.Run("silence says the rounded age", func(t *testing.T) {
		w := h.sup.faultWords("move_base_to", causeStopUnconfirmed, Outcome{Trip: &Trip{Kind: TripSilence, age: 2833333333 * time.Nanosecond}})
		require.Equal(t, "The robot stopped sending its state for 2.8 s during move_base_to.", w.What)
		require.Equal(t, "Check the robot's network link and that the robot is at rest, then clear the fault.", w.Check)
	})
}

// TestLatchFault_RoundsDurationsInTheReason: the developer reason keeps
// its detail but writes durations as the rest of the bridge does.
func TestLatchFault_RoundsDurationsInTheReason(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	h.sup.latchFault("task-1", "refresh failed: inproc refresh: no ack within 2.833333333s", FaultWords{What: "x."})
	require.Equal(t, "refresh failed: inproc refresh: no ack within 2.8 s", h.sup.Status().Fault.Reason)
}
