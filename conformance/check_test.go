package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An expected refusal that was accepted is a failure — also under chaos,
// unless an earlier step of the case already went otherwise under the
// fault (its premise may not hold any more). Refused with another type
// under chaos is a deviation. The robot-side verdict judges every case
// either way.
func TestCheck_AnAcceptedCallThatHadToBeRefusedFailsUnlessChaosBrokeThePremise(t *testing.T) {
	accepted := answer{via: "http", status: 200, ok: true, text: "task awaiting_approval"}
	refusedOther := answer{via: "http", status: 200, ok: false, errType: "UNAVAILABLE", text: "link down"}
	want := &Expect{Error: "SAFETY_VIOLATION"}
	run := func(chaos bool, earlier []string, a answer) *CaseResult {
		c := &caseRun{res: &CaseResult{Deviations: append([]string(nil), earlier...)}, vars: map[string]string{}}
		if chaos {
			c.chaosFrom.Store(time.Now().UnixNano())
		}
		c.check("9", want, a)
		return c.res
	}
	// No chaos: a failure
	r := run(false, nil, accepted)
	require.Len(t, r.Failures, 1)
	// Chaos, but every earlier step went as expected: still a failure
	r = run(true, nil, accepted)
	require.Len(t, r.Failures, 1)
	// Chaos after an earlier deviation: a deviation
	r = run(true, []string{"step 8: expected task status fault; got succeeded (under chaos)"}, accepted)
	require.Empty(t, r.Failures)
	require.Len(t, r.Deviations, 2)
	// Refused with another type under chaos: a deviation, counted as a refusal
	r = run(true, nil, refusedOther)
	require.Empty(t, r.Failures)
	require.Equal(t, 1, r.RefusedOtherUnderChaos)
	// Refused with another type without chaos: a failure
	r = run(false, nil, refusedOther)
	require.Len(t, r.Failures, 1)
}
