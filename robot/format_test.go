package robot

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFormat_NoNegativeZero is issue 12's "-0°": a heading of -0.0001 rad
// and a position a hair below zero were written "-0°" and "(-0.00, -0.00)".
func TestFormat_NoNegativeZero(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"heading a hair below zero", Heading(-0.0001), "0°"},
		{"heading rounding to zero from below", Heading(Radians(-0.49)), "0°"},
		{"heading of one degree below", Heading(Radians(-1)), "-1°"},
		{"heading of a right angle", Heading(math.Pi / 2), "90°"},
		{"heading that rounds to -180° is 180°", Heading(Radians(-179.7)), "180°"},
		{"heading of a half turn", Heading(math.Pi), "180°"},
		{"heading past a full turn", Heading(2*math.Pi + 0.1), "6°"},
		{"fixed a hair below zero", Fixed(-0.001, 2), "0.00"},
		{"fixed whole a hair below zero", Fixed(-0.4, 0), "0"},
		{"fixed negative", Fixed(-0.006, 2), "-0.01"},
		{"fixed positive", Fixed(1.255, 1), "1.3"},
		{"fixed not a number", Fixed(math.NaN(), 2), "unknown"},
		{"pose a hair below the origin", FormatPose(Pose2D{X: -0.001, Y: -0.002, Theta: -0.0001}), "(0.00, 0.00) facing 0°"},
		{"pose", FormatPose(Pose2D{X: 1.25, Y: -0.5, Theta: 1.5708}), "(1.25, -0.50) facing 90°"},
		{"point", FormatPoint(-0.004, 3), "(0.00, 3.00)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.got)
		})
	}
}

// TestSummary_AHairBelowZeroReadsZero: the summary of a robot resting a
// hair below the origin says "(0.00, 0.00) facing 0°".
func TestSummary_AHairBelowZeroReadsZero(t *testing.T) {
	// Given a robot at rest at (-0.001, -0.002) facing -0.0001 rad
	st := State{Base: Pose2D{X: -0.001, Y: -0.002, Theta: -0.0001}, Battery: Battery{Percent: 95, Known: true}}
	// When it is described, Then no number carries a minus sign
	require.Equal(t, "stopped at (0.00, 0.00) facing 0°, battery 95%", st.Summary())
	require.Equal(t, "last seen at (0.00, 0.00) facing 0° 0.0 s ago", seen(st, 0).LastSeen())
}
