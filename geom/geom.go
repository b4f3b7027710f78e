// Package geom holds the small planar geometry the supervisor, perception
// and simulator share: polygons in the room frame, containment, distances
// and axis-aligned bounds. Pure functions, no allocation on the hot paths.
//
// Footprint (footprint.go) answers the safety limits' questions about the
// round base: does its disc fit at a point, does it stay clear when swept
// along a straight segment, where does it first touch, what is the
// nearest place it fits. Its Shape delegates the robust predicates,
// point-in-ring location and segment-to-segment distance, to go-geom's
// xy package (a port of JTS); what no maintained Go library offers in
// pure Go (a swept disc's first contact, the nearest free point of a
// disc among polygons) is written here and tested against this file's
// older, independent polygon code.
package geom

import (
	"fmt"
	"math"
	"strings"
)

// Point is a point in the plane, metres.
type Point struct{ X, Y float64 }

// Polygon is a simple polygon given by its vertices in order (either
// winding); the last vertex connects back to the first.
type Polygon []Point

// FromPairs builds a polygon from [x, y] pairs.
func FromPairs(pairs [][2]float64) Polygon {
	p := make(Polygon, len(pairs))
	for i, v := range pairs {
		p[i] = Point{v[0], v[1]}
	}
	return p
}

// Contains reports whether q is inside p or on its boundary.
func (p Polygon) Contains(q Point) bool {
	if len(p) < 3 {
		return false
	}
	if p.DistanceToEdge(q) < 1e-9 {
		return true
	}
	in := false
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		a, b := p[i], p[j]
		if (a.Y > q.Y) != (b.Y > q.Y) {
			x := (b.X-a.X)*(q.Y-a.Y)/(b.Y-a.Y) + a.X
			if q.X < x {
				in = !in
			}
		}
	}
	return in
}

// DistanceToEdge returns the distance from q to the nearest edge of p.
func (p Polygon) DistanceToEdge(q Point) float64 {
	d := math.Inf(1)
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		d = math.Min(d, SegmentDistance(q, p[j], p[i]))
	}
	return d
}

// SegmentDistance returns the distance from q to the segment ab.
func SegmentDistance(q, a, b Point) float64 {
	dx, dy := b.X-a.X, b.Y-a.Y
	l2 := dx*dx + dy*dy
	t := 0.0
	if l2 > 0 {
		t = math.Max(0, math.Min(1, ((q.X-a.X)*dx+(q.Y-a.Y)*dy)/l2))
	}
	return math.Hypot(q.X-(a.X+t*dx), q.Y-(a.Y+t*dy))
}

// SegmentIntersects reports whether segments ab and cd intersect.
func SegmentIntersects(a, b, c, d Point) bool {
	o := func(p, q, r Point) float64 { return (q.X-p.X)*(r.Y-p.Y) - (q.Y-p.Y)*(r.X-p.X) }
	d1, d2, d3, d4 := o(c, d, a), o(c, d, b), o(a, b, c), o(a, b, d)
	if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) {
		return true
	}
	on := func(p, q, r Point) bool {
		return math.Min(p.X, q.X) <= r.X && r.X <= math.Max(p.X, q.X) && math.Min(p.Y, q.Y) <= r.Y && r.Y <= math.Max(p.Y, q.Y)
	}
	return (d1 == 0 && on(c, d, a)) || (d2 == 0 && on(c, d, b)) || (d3 == 0 && on(a, b, c)) || (d4 == 0 && on(a, b, d))
}

// CrossesSegment reports whether segment ab crosses any edge of p.
func (p Polygon) CrossesSegment(a, b Point) bool {
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		if SegmentIntersects(a, b, p[j], p[i]) {
			return true
		}
	}
	return false
}

// Bounds returns the axis-aligned bounding box of p.
func (p Polygon) Bounds() (min, max Point) {
	if len(p) == 0 {
		return Point{}, Point{}
	}
	min, max = p[0], p[0]
	for _, v := range p[1:] {
		min.X, min.Y = math.Min(min.X, v.X), math.Min(min.Y, v.Y)
		max.X, max.Y = math.Max(max.X, v.X), math.Max(max.Y, v.Y)
	}
	return min, max
}

// Centroid returns the vertex average of p (good enough for labels).
func (p Polygon) Centroid() Point {
	var c Point
	for _, v := range p {
		c.X += v.X
		c.Y += v.Y
	}
	if n := float64(len(p)); n > 0 {
		c.X /= n
		c.Y /= n
	}
	return c
}

// IsRectangle reports whether p is an axis-aligned rectangle.
func (p Polygon) IsRectangle() bool {
	if len(p) != 4 {
		return false
	}
	min, max := p.Bounds()
	for _, v := range p {
		if (v.X != min.X && v.X != max.X) || (v.Y != min.Y && v.Y != max.Y) {
			return false
		}
	}
	return true
}

// Describe states p's extent for an error message: "x in [-4.5, 4.5], y
// in [-4.5, 4.5]" for a rectangle, the vertex list otherwise.
func (p Polygon) Describe() string {
	min, max := p.Bounds()
	if p.IsRectangle() {
		return fmt.Sprintf("x in [%g, %g], y in [%g, %g]", min.X, max.X, min.Y, max.Y)
	}
	var b strings.Builder
	b.WriteString("the polygon")
	for _, v := range p {
		fmt.Fprintf(&b, " (%g, %g)", v.X, v.Y)
	}
	fmt.Fprintf(&b, " (x in [%g, %g], y in [%g, %g])", min.X, max.X, min.Y, max.Y)
	return b.String()
}
