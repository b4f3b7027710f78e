package geom

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPolygonContains(t *testing.T) {
	sq := FromPairs([][2]float64{{-1, -1}, {1, -1}, {1, 1}, {-1, 1}})
	l := FromPairs([][2]float64{{0, 0}, {4, 0}, {4, 1}, {1, 1}, {1, 4}, {0, 4}})
	tests := []struct {
		name string
		p    Polygon
		q    Point
		want bool
	}{
		{"centre of square", sq, Point{0, 0}, true},
		{"on edge", sq, Point{1, 0}, true},
		{"on vertex", sq, Point{-1, -1}, true},
		{"just outside", sq, Point{1.0001, 0}, false},
		{"far outside", sq, Point{7, 0}, false},
		{"inside L arm", l, Point{3, 0.5}, true},
		{"in L notch", l, Point{3, 3}, false},
		{"degenerate polygon", Polygon{{0, 0}, {1, 1}}, Point{0.5, 0.5}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.p.Contains(tc.q))
		})
	}
}

func TestDescribeAndCrossing(t *testing.T) {
	sq := FromPairs([][2]float64{{-4.5, -4.5}, {4.5, -4.5}, {4.5, 4.5}, {-4.5, 4.5}})
	require.Equal(t, "x in [-4.5, 4.5], y in [-4.5, 4.5]", sq.Describe())
	require.True(t, sq.CrossesSegment(Point{0, 0}, Point{9, 0}))
	require.False(t, sq.CrossesSegment(Point{0, 0}, Point{1, 1}))
	require.InDelta(t, 0.5, SegmentDistance(Point{0, 0.5}, Point{-1, 0}, Point{1, 0}), 1e-12)
}
