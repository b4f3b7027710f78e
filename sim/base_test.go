package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/geom"
	"github.com/robot-bridge/robot-bridge/robot"
)

// The bridge checks a base move as the footprint swept along the straight
// segment from where the base is to the target; these tests hold the
// simulator's base controller to driving exactly that.

func TestBase_DrivesTheStraightSegmentFromRest(t *testing.T) {
	tests := []struct {
		name      string
		x, y, deg float64
	}{
		{"ahead", 2, 0, 0},
		{"17 degrees to the left", 1, 0.3, 0},
		{"45 degrees to the left", -2, 2, 0},
		{"behind, final heading 90 degrees", -3, 1, 90},
		{"to the right", 0, -3, 0},
		{"nearly behind", -3, -0.2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the base at rest at the origin facing +x
			s := newSim(t)
			a, b := geom.Point{}, geom.Point{X: tc.x, Y: tc.y}

			// When it is sent to the target
			require.NoError(t, s.Command(baseCmd("go", tc.x, tc.y, tc.deg)))
			worst := 0.0
			reached := superviseUntil(s, 30*time.Second, func() bool {
				p := s.Truth().Base
				worst = math.Max(worst, geom.SegmentDistance(geom.Point{X: p.X, Y: p.Y}, a, b))
				return hasEvent(s, EventGoalReached)
			})

			// Then its centre stays on the straight segment
			require.True(t, reached)
			require.LessOrEqual(t, worst, 0.003, "the base drove %.1f mm off the straight segment", worst*1000)
		})
	}
}

func TestBase_NewGoalWhileDrivingBrakesStraightThenTurnsInPlace(t *testing.T) {
	// Given the base driving east at full speed
	s := newSim(t)
	require.NoError(t, s.Command(baseCmd("east", 4, 0, 0)))
	supervise(s, 2500*time.Millisecond, nil)
	tr := s.Truth()
	require.Greater(t, tr.Velocity.V, 0.7)
	p0, th0 := geom.Point{X: tr.Base.X, Y: tr.Base.Y}, tr.Base.Theta
	ahead := geom.Point{X: p0.X + 2*math.Cos(th0), Y: p0.Y + 2*math.Sin(th0)}

	// When it is sent to a target to the south before it stops
	b := geom.Point{X: 2, Y: -3}
	require.NoError(t, s.Command(baseCmd("south", b.X, b.Y, -90)))
	var rest *geom.Point
	worstBraking, worstDrive := 0.0, 0.0
	reached := superviseUntil(s, 30*time.Second, func() bool {
		tr := s.Truth()
		p := geom.Point{X: tr.Base.X, Y: tr.Base.Y}
		if rest == nil {
			worstBraking = math.Max(worstBraking, geom.SegmentDistance(p, p0, ahead))
			if math.Abs(tr.Velocity.V) < restV {
				rest = &p
			}
		} else {
			worstDrive = math.Max(worstDrive, geom.SegmentDistance(p, *rest, b))
		}
		return hasEvent(s, EventGoalReached)
	})

	// Then it brakes along its heading, turns in place, and drives the
	// straight segment from where it stopped (turning while it braked
	// swept an arc no straight-path check saw)
	require.True(t, reached)
	require.NotNil(t, rest)
	require.LessOrEqual(t, worstBraking, 0.001, "the base left its heading by %.1f mm while braking", worstBraking*1000)
	require.LessOrEqual(t, worstDrive, 0.003, "the base drove %.1f mm off the segment from where it stopped", worstDrive*1000)
	require.InDelta(t, 0, robot.NormalizeAngle(s.Truth().Base.Theta+math.Pi/2), robot.Radians(3))
}
