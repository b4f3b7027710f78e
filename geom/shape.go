package geom

import (
	"errors"
	"fmt"
	"math"

	gg "github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/xy"
	"github.com/twpayne/go-geom/xy/location"
)

// MaxCoord bounds, in metres, the coordinates a Shape accepts. A room is a
// few tens of metres; the bound exists because the robust orientation
// predicate behind Shape.Inside loops on non-finite differences, so no
// coordinate that could overflow a difference may ever reach it.
const MaxCoord = 1e9

// Touch is the slack, in metres, below which a footprint counts as touching
// a limit rather than crossing it. It absorbs floating-point rounding only
// (4.5 - 4.2 is 0.2999999999999998, and a disc of radius 0.3 centred at 4.2
// must fit inside x <= 4.5); it is no safety margin.
const Touch = 1e-9

// box is an axis-aligned bounding box.
type box struct{ minX, minY, maxX, maxY float64 }

func boxOf(a, b Point) box {
	return box{math.Min(a.X, b.X), math.Min(a.Y, b.Y), math.Max(a.X, b.X), math.Max(a.Y, b.Y)}
}

// gap returns a lower bound of the distance between any point of b and any
// point of o: the larger of the x and y gaps (0 when the boxes overlap).
// NaN compares false everywhere, so a NaN box never prunes anything.
func (b box) gap(o box) float64 {
	dx := math.Max(0, math.Max(o.minX-b.maxX, b.minX-o.maxX))
	dy := math.Max(0, math.Max(o.minY-b.maxY, b.minY-o.maxY))
	return math.Max(dx, dy)
}

func (b box) contains(q Point) bool {
	return q.X >= b.minX && q.X <= b.maxX && q.Y >= b.minY && q.Y <= b.maxY
}

func (b box) grow(r float64) box { return box{b.minX - r, b.minY - r, b.maxX + r, b.maxY + r} }

// ErrBadShape is returned by NewShape for a polygon that no clearance
// question can be asked of.
var ErrBadShape = errors.New("geom: unusable polygon")

// Shape is a polygon prepared for repeated clearance questions: its ring in
// the flat layout go-geom's predicates take, and the bounding box of every
// edge, so that a query skips the edges that cannot be near. The queries
// neither allocate nor panic, whatever the query point (NaN and ±Inf
// included).
//
// A Shape with fewer than three vertices has no inside; its edges still
// count for distances, so a degenerate obstacle is a wall, not nothing.
type Shape struct {
	poly   Polygon
	ring   []float64
	edges  []box
	bounds box
	area   bool
}

// NewShape prepares p. It fails on an empty polygon and on any vertex that
// is not finite or farther than MaxCoord from the origin: such a polygon
// cannot be reasoned about, and a safety limit that silently means
// nothing is worse than a refused config.
func NewShape(p Polygon) (*Shape, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("%w: no vertices", ErrBadShape)
	}
	for i, v := range p {
		if math.IsNaN(v.X) || math.IsNaN(v.Y) || math.Abs(v.X) > MaxCoord || math.Abs(v.Y) > MaxCoord {
			return nil, fmt.Errorf("%w: vertex %d (%g, %g) is not a finite coordinate within %g m", ErrBadShape, i, v.X, v.Y, float64(MaxCoord))
		}
	}
	n := len(p)
	s := &Shape{poly: append(Polygon(nil), p...), ring: make([]float64, 0, 2*(n+1)), edges: make([]box, n), area: n >= 3}
	s.bounds = box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for i, v := range p {
		s.ring = append(s.ring, v.X, v.Y)
		s.edges[i] = boxOf(v, p[(i+1)%n])
		s.bounds = box{math.Min(s.bounds.minX, v.X), math.Min(s.bounds.minY, v.Y), math.Max(s.bounds.maxX, v.X), math.Max(s.bounds.maxY, v.Y)}
	}
	s.ring = append(s.ring, p[0].X, p[0].Y)
	return s, nil
}

// Polygon returns the shape's vertices.
func (s *Shape) Polygon() Polygon { return s.poly }

// Bounds returns the shape's axis-aligned bounding box.
func (s *Shape) Bounds() (min, max Point) {
	return Point{s.bounds.minX, s.bounds.minY}, Point{s.bounds.maxX, s.bounds.maxY}
}

func (s *Shape) edge(i int) (Point, Point) { return s.poly[i], s.poly[(i+1)%len(s.poly)] }

// Inside reports whether q is inside s or on its boundary, with go-geom's
// ray-crossing counter (a port of JTS's, robust on the boundary). The
// bounding-box test first keeps non-finite and far-away points away from
// the robust predicate.
func (s *Shape) Inside(q Point) bool {
	if !s.area || !s.bounds.contains(q) {
		return false
	}
	return xy.LocatePointInRing(gg.XY, gg.Coord{q.X, q.Y}, s.ring) != location.Exterior
}

// Distance returns the distance from q to the nearest edge of s. Edges
// whose bounding box is farther than limit are skipped, so the answer is
// exact when it is below limit and only known to be at least limit
// otherwise (+Inf when every edge was skipped). Pass math.Inf(1) for the
// exact distance.
func (s *Shape) Distance(q Point, limit float64) float64 {
	best := math.Inf(1)
	qb := box{q.X, q.Y, q.X, q.Y}
	for i, e := range s.edges {
		if e.gap(qb) > math.Min(limit, best) {
			continue
		}
		a, b := s.edge(i)
		best = math.Min(best, SegmentDistance(q, a, b))
	}
	return best
}

// SegmentDistance returns the distance from the segment ab to the nearest
// edge of s (0 when ab crosses or touches an edge), with the same limit
// rule as Distance. The segment-to-segment distance is go-geom's
// (xy.DistanceFromLineToLine, a port of JTS's).
func (s *Shape) SegmentDistance(a, b Point, limit float64) float64 {
	best := math.Inf(1)
	ab := boxOf(a, b)
	ca, cb := gg.Coord{a.X, a.Y}, gg.Coord{b.X, b.Y}
	for i, e := range s.edges {
		if e.gap(ab) > math.Min(limit, best) {
			continue
		}
		c, d := s.edge(i)
		best = math.Min(best, xy.DistanceFromLineToLine(ca, cb, gg.Coord{c.X, c.Y}, gg.Coord{d.X, d.Y}))
	}
	return best
}

// FirstContact returns the smallest t in [0, 1] at which a point moving
// from a to b comes within r of an edge of s, and false when it never
// does. Per edge this is the entry of a ray into a capsule (the edge
// inflated by r): the first hit of its two end circles and its two long
// sides, which is exact because the capsule is their union.
func (s *Shape) FirstContact(a, b Point, r float64) (float64, bool) {
	if !(r >= 0) {
		return 0, false
	}
	best, found := math.Inf(1), false
	ab := boxOf(a, b)
	for i, e := range s.edges {
		if e.gap(ab) > r {
			continue
		}
		c, d := s.edge(i)
		if t, ok := capsuleEntry(a, b, c, d, r); ok && t < best {
			best, found = t, true
		}
	}
	return best, found
}

// capsuleEntry returns the first t in [0, 1] at which a + t(b-a) is within
// r of the segment cd.
func capsuleEntry(a, b, c, d Point, r float64) (float64, bool) {
	if SegmentDistance(a, c, d) <= r {
		return 0, true
	}
	ux, uy := b.X-a.X, b.Y-a.Y
	best, found := math.Inf(1), false
	take := func(t float64) {
		if t >= 0 && t <= 1 && t < best {
			best, found = t, true
		}
	}
	for _, o := range [2]Point{c, d} {
		// |a + t u - o|² = r²
		fx, fy := a.X-o.X, a.Y-o.Y
		qa, qb, qc := ux*ux+uy*uy, 2*(ux*fx+uy*fy), fx*fx+fy*fy-r*r
		if qa == 0 {
			continue
		}
		if disc := qb*qb - 4*qa*qc; disc >= 0 {
			take((-qb - math.Sqrt(disc)) / (2 * qa))
		}
	}
	ex, ey := d.X-c.X, d.Y-c.Y
	if l := math.Hypot(ex, ey); l > 0 {
		nx, ny := -ey/l*r, ex/l*r
		for _, sg := range [2]float64{1, -1} {
			p := Point{c.X + sg*nx, c.Y + sg*ny}
			q := Point{d.X + sg*nx, d.Y + sg*ny}
			if t, _, ok := segmentParams(a, b, p, q); ok {
				take(t)
			}
		}
	}
	return best, found
}

// segmentParams returns the parameters (t on ab, s on cd) of the crossing
// of two non-parallel segments, and false when they are parallel or do
// not cross.
func segmentParams(a, b, c, d Point) (t, s float64, ok bool) {
	rx, ry := b.X-a.X, b.Y-a.Y
	sx, sy := d.X-c.X, d.Y-c.Y
	den := rx*sy - ry*sx
	if den == 0 || math.IsNaN(den) {
		return 0, 0, false
	}
	qx, qy := c.X-a.X, c.Y-a.Y
	t = (qx*sy - qy*sx) / den
	s = (qx*ry - qy*rx) / den
	return t, s, t >= 0 && t <= 1 && s >= 0 && s <= 1
}
