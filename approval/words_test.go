package approval

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWords_NoGoValuesInTexts: a wait, a lifetime and a moment read as a
// person writes them, never as Go prints a time.Duration ("2h0m0s") or a
// time.Time in RFC 3339.
func TestWords_NoGoValuesInTexts(t *testing.T) {
	tests := []struct{ got, want string }{
		{waitWords(45*time.Second + 400*time.Millisecond), "45 s"},
		{waitWords(-time.Second), "0 s"},
		{waitWords(12*time.Minute + 30*time.Second), "12 min"},
		{ttlWords(2 * time.Hour), "2h"},
		{ttlWords(30 * time.Minute), "30m"},
		{ttlWords(90 * time.Minute), "1h30m"},
		{ttlWords(45 * time.Second), "45s"},
		{ttlWords(300 * time.Millisecond), "300ms"},
		{clockTime(time.Date(2026, 3, 1, 12, 5, 0, 0, time.FixedZone("CET", 3600))), "11:05:00 UTC"},
		{operatorName("operator"), "the operator"},
		{operatorName("bob"), "operator bob"},
		{operatorName(""), "an operator"},
		{quoteReason("  not now\n"), "\"  not now\n\""},
		{quoteReason(" "), "none given"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tc.got)
	}
}
