package geom

import "math"

// feature is one piece of the boundary of the space where a disc of
// radius r fits: an edge moved r along one of its normals (a segment), or
// a circle of radius r around a vertex.
type feature struct {
	circle bool
	a, b   Point // segment ends; a is the centre of a circle
	r      float64
	bb     box
}

// Nearest returns the point nearest q at which the disc, grown by margin,
// fits, and false when it fits nowhere (or q is not finite). It is exact:
// the free space's boundary is made of offset edges and arcs around
// vertices, so the nearest free point is the foot of q on one of those
// pieces or a corner where two of them meet, and every such candidate is
// tried. Candidates farther than the best one found so far are skipped,
// so the cost is about quadratic only in the pieces near q.
//
// It allocates and is meant for error paths (the "closest allowed" point
// of a refusal), not for a control loop.
func (f *Footprint) Nearest(q Point, margin float64) (Point, bool) {
	if !finitePoint(q) || math.Abs(q.X) > MaxCoord || math.Abs(q.Y) > MaxCoord {
		return Point{}, false
	}
	rr := f.radius() + math.Max(0, margin)
	fits := func(p Point) bool {
		c, _ := f.clearance(p, rr)
		return c >= -1e-7
	}
	if fits(q) {
		return q, true
	}
	var feats []feature
	for i := OutsideWorkspace; i < len(f.Obstacles); i++ {
		s, _ := f.shape(i)
		if s == nil {
			continue
		}
		for k := range s.poly {
			a, b := s.edge(k)
			feats = append(feats, feature{circle: true, a: a, r: rr, bb: box{a.X - rr, a.Y - rr, a.X + rr, a.Y + rr}})
			l := math.Hypot(b.X-a.X, b.Y-a.Y)
			if l == 0 || rr == 0 {
				continue
			}
			nx, ny := -(b.Y-a.Y)/l*rr, (b.X-a.X)/l*rr
			for _, sg := range [2]float64{1, -1} {
				p, e := Point{a.X + sg*nx, a.Y + sg*ny}, Point{b.X + sg*nx, b.Y + sg*ny}
				feats = append(feats, feature{a: p, b: e, bb: boxOf(p, e)})
			}
		}
	}
	best, bestD, found := Point{}, math.Inf(1), false
	try := func(p Point) {
		if d := math.Hypot(p.X-q.X, p.Y-q.Y); d < bestD && fits(p) {
			best, bestD, found = p, d, true
		}
	}
	for _, ft := range feats {
		if ft.circle {
			dx, dy := q.X-ft.a.X, q.Y-ft.a.Y
			if l := math.Hypot(dx, dy); l > 0 {
				try(Point{ft.a.X + dx/l*ft.r, ft.a.Y + dy/l*ft.r})
			} else {
				try(Point{ft.a.X + ft.r, ft.a.Y})
			}
			continue
		}
		try(project(q, ft.a, ft.b))
		try(ft.a)
		try(ft.b)
	}
	qb := box{q.X, q.Y, q.X, q.Y}
	var pts [2]Point
	for i := range feats {
		fi := &feats[i]
		if fi.bb.gap(qb) > bestD {
			continue
		}
		for j := i + 1; j < len(feats); j++ {
			fj := &feats[j]
			if fj.bb.gap(qb) > bestD || fi.bb.gap(fj.bb) > 0 {
				continue
			}
			for _, p := range intersect(fi, fj, pts[:0]) {
				try(p)
			}
		}
	}
	return best, found
}

// project returns the point of segment ab nearest q.
func project(q, a, b Point) Point {
	dx, dy := b.X-a.X, b.Y-a.Y
	l2 := dx*dx + dy*dy
	if l2 == 0 {
		return a
	}
	t := math.Max(0, math.Min(1, ((q.X-a.X)*dx+(q.Y-a.Y)*dy)/l2))
	return Point{a.X + t*dx, a.Y + t*dy}
}

// intersect appends the crossing points of two features to out.
func intersect(f, g *feature, out []Point) []Point {
	switch {
	case !f.circle && !g.circle:
		if t, _, ok := segmentParams(f.a, f.b, g.a, g.b); ok {
			out = append(out, Point{f.a.X + t*(f.b.X-f.a.X), f.a.Y + t*(f.b.Y-f.a.Y)})
		}
	case f.circle && g.circle:
		dx, dy := g.a.X-f.a.X, g.a.Y-f.a.Y
		d := math.Hypot(dx, dy)
		if d == 0 || d > f.r+g.r {
			return out
		}
		// Radii may differ only by rounding; use the general formula.
		a := (d*d + f.r*f.r - g.r*g.r) / (2 * d)
		h := math.Sqrt(math.Max(0, f.r*f.r-a*a))
		mx, my := f.a.X+a*dx/d, f.a.Y+a*dy/d
		out = append(out, Point{mx - h*dy/d, my + h*dx/d}, Point{mx + h*dy/d, my - h*dx/d})
	default:
		s, c := f, g
		if s.circle {
			s, c = g, f
		}
		ux, uy := s.b.X-s.a.X, s.b.Y-s.a.Y
		fx, fy := s.a.X-c.a.X, s.a.Y-c.a.Y
		qa, qb, qc := ux*ux+uy*uy, 2*(ux*fx+uy*fy), fx*fx+fy*fy-c.r*c.r
		if qa == 0 {
			return out
		}
		disc := qb*qb - 4*qa*qc
		if disc < 0 {
			return out
		}
		sq := math.Sqrt(disc)
		for _, t := range [2]float64{(-qb - sq) / (2 * qa), (-qb + sq) / (2 * qa)} {
			if t >= 0 && t <= 1 {
				out = append(out, Point{s.a.X + t*ux, s.a.Y + t*uy})
			}
		}
	}
	return out
}
