package geom

import (
	"math"
)

// OutsideWorkspace is the Contact.Shape (and Clearance shape index) of
// the workspace edge; obstacles are numbered from 0.
const OutsideWorkspace = -1

// Footprint is a disc of Radius that must stay inside Workspace (when it
// is set) and off every obstacle. It answers the questions the safety
// limits ask of a round base: does the disc fit here, does it stay clear
// while swept along a straight segment, where does it first touch, and
// what is the nearest place it fits.
//
// No maintained Go geometry library offers a polygon buffer in pure Go, so
// none of this erodes or inflates polygons: a disc of radius r swept along
// ab stays clear of an obstacle P iff a is outside P and every edge of P is
// at least r from the segment ab (which rules out crossings, distance 0),
// and it stays inside a workspace W iff a is inside W and every edge of W
// is at least r from ab. That needs only segment-to-segment distances and
// point-in-polygon tests, which Shape takes from go-geom.
type Footprint struct {
	Radius    float64
	Workspace *Shape
	Obstacles []*Shape
}

// shape returns the shape at index i (OutsideWorkspace for the workspace)
// and whether the disc must stay inside it; s is nil for an unset
// workspace. Loops run i from OutsideWorkspace to len(Obstacles)-1 (plain
// loops, not callbacks, so that nothing escapes to the heap on the
// monitor's path).
func (f *Footprint) shape(i int) (s *Shape, inside bool) {
	if i == OutsideWorkspace {
		return f.Workspace, true
	}
	return f.Obstacles[i], false
}

func (f *Footprint) radius() float64 {
	if f.Radius > 0 {
		return f.Radius
	}
	return 0
}

// Clearance returns how far the disc centred at p is from touching a
// limit (negative: how deep it overlaps) and which shape is nearest
// (OutsideWorkspace or an obstacle index). A centre on the wrong side of a
// shape counts as overlapping by its distance to the edge plus the radius.
// A non-finite p gives NaN, which every caller treats as a violation.
func (f *Footprint) Clearance(p Point) (float64, int) {
	return f.clearance(p, f.radius())
}

func (f *Footprint) clearance(p Point, r float64) (float64, int) {
	if !finitePoint(p) {
		return math.NaN(), OutsideWorkspace
	}
	best, who := math.Inf(1), OutsideWorkspace
	for i := OutsideWorkspace; i < len(f.Obstacles); i++ {
		s, inside := f.shape(i)
		if s == nil {
			continue
		}
		var c float64
		if s.Inside(p) == inside {
			// Only an edge nearer than best+r can lower the minimum.
			c = s.Distance(p, best+r) - r
		} else {
			c = -s.Distance(p, math.Inf(1)) - r
		}
		if c < best {
			best, who = c, i
		}
	}
	return best, who
}

// Fits reports whether the disc centred at p overlaps no limit (touching
// is allowed) and, when it does not fit, the shape it overlaps most.
func (f *Footprint) Fits(p Point) (bool, int) {
	c, who := f.Clearance(p)
	return c >= -Touch, who
}

// Contact is where a swept disc first touches a limit.
type Contact struct {
	// Shape is OutsideWorkspace or the index of the obstacle touched.
	Shape int
	// T is the fraction of the segment travelled at first contact: 0 at
	// the start, 1 at the end.
	T float64
}

// Sweep checks the disc moved along the straight segment from a to b and
// returns the first contact, or false when the whole sweep is clear.
//
// A start that already overlaps a shape (the robot was pushed, or stopped
// a little past a limit) does not freeze the robot: the sweep is clear of
// that shape as long as the disc never gets closer to it than it starts,
// so the robot may back away. A centre on the wrong side of a shape (in
// an obstacle, outside the workspace) is a contact at T = 0.
func (f *Footprint) Sweep(a, b Point) (Contact, bool) {
	return f.sweep(a, b, 0)
}

// Reach returns the farthest point along the segment from a to b that the
// disc, grown by margin, reaches before touching any limit: b when the
// sweep is clear, a when it touches at once. The margin keeps the point
// allowed after an agent rounds it; a start already closer than margin to
// a limit keeps the start's clearance instead.
func (f *Footprint) Reach(a, b Point, margin float64) Point {
	c, hit := f.sweep(a, b, math.Max(0, margin))
	if !hit {
		return b
	}
	return Point{a.X + c.T*(b.X-a.X), a.Y + c.T*(b.Y-a.Y)}
}

func (f *Footprint) sweep(a, b Point, margin float64) (Contact, bool) {
	if !finitePoint(a) || !finitePoint(b) {
		return Contact{Shape: OutsideWorkspace}, true
	}
	r := f.radius() + margin
	best, hit := Contact{T: math.Inf(1)}, false
	record := func(i int, t float64) {
		if t < best.T {
			best, hit = Contact{Shape: i, T: t}, true
		}
	}
	for i := OutsideWorkspace; i < len(f.Obstacles); i++ {
		s, inside := f.shape(i)
		if s == nil {
			continue
		}
		if s.Inside(a) != inside {
			record(i, 0)
			continue
		}
		if !inside && s.bounds.grow(r).gap(boxOf(a, b)) > 0 {
			continue // the whole sweep is farther than r from this obstacle
		}
		// The distance the sweep must keep: the radius, or less when the
		// start already overlaps, but never touching (a zero radius is a
		// point that may not cross an edge). The check forgives rounding
		// (Touch); Reach, whose answer must pass that check, does not.
		need := math.Min(r, s.Distance(a, r+Touch))
		if margin == 0 {
			need -= Touch
		}
		need = math.Max(need, Touch)
		if d := s.SegmentDistance(a, b, need); d >= need {
			continue
		}
		t, ok := s.FirstContact(a, b, need)
		if !ok {
			t = 0 // rounding disagreed with the distance: fail safe
		}
		record(i, t)
	}
	return best, hit
}

// SweptClearance returns the least clearance of the disc along the
// straight segment from a to b (negative: the deepest overlap, exact while
// the centre stays on the right side of every edge, at most -Radius once
// it crosses one) and the shape it belongs to.
func (f *Footprint) SweptClearance(a, b Point) (float64, int) {
	return f.PathClearance([]Point{a, b})
}

// PathClearance is SweptClearance along the polyline through pts: the
// breach monitor asks it of the path a braking robot will take. Each
// vertex is located once per shape, and a shape whose bounding box is
// too far from the path to lower the answer is skipped.
func (f *Footprint) PathClearance(pts []Point) (float64, int) {
	if len(pts) == 0 {
		return math.Inf(1), OutsideWorkspace
	}
	pb := box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for _, p := range pts {
		if !finitePoint(p) {
			return math.NaN(), OutsideWorkspace
		}
		pb = box{math.Min(pb.minX, p.X), math.Min(pb.minY, p.Y), math.Max(pb.maxX, p.X), math.Max(pb.maxY, p.Y)}
	}
	r := f.radius()
	best, who := math.Inf(1), OutsideWorkspace
	for i := OutsideWorkspace; i < len(f.Obstacles); i++ {
		s, inside := f.shape(i)
		if s == nil {
			continue
		}
		if !inside && s.bounds.gap(pb)-r > best {
			continue
		}
		c := math.Inf(1)
		prevOK := s.Inside(pts[0]) == inside
		if !prevOK {
			c = -r - s.Distance(pts[0], math.Inf(1))
		}
		if len(pts) == 1 && prevOK {
			c = s.Distance(pts[0], best+r) - r
		}
		for k := 1; k < len(pts); k++ {
			ok := s.Inside(pts[k]) == inside
			switch {
			case !ok:
				c = math.Min(c, -r-s.Distance(pts[k], math.Inf(1)))
			case prevOK:
				d := s.SegmentDistance(pts[k-1], pts[k], math.Min(best, c)+r)
				if d == 0 {
					c = math.Min(c, -r) // the centre crosses an edge and comes back
				} else {
					c = math.Min(c, d-r)
				}
			default:
				c = math.Min(c, -r)
			}
			prevOK = ok
		}
		if c < best {
			best, who = c, i
		}
	}
	return best, who
}

func finitePoint(p Point) bool {
	return !math.IsNaN(p.X) && !math.IsNaN(p.Y) && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0)
}
