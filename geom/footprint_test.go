package geom

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// room is a 10 m room's 9 m workspace with a table and stairs, as in the
// shipped config, plus an L-shaped variant.
var (
	squareWS = FromPairs([][2]float64{{-4.5, -4.5}, {4.5, -4.5}, {4.5, 4.5}, {-4.5, 4.5}})
	lWS      = FromPairs([][2]float64{{-4.5, -4.5}, {4.5, -4.5}, {4.5, -1}, {-1, -1}, {-1, 4.5}, {-4.5, 4.5}})
	table    = FromPairs([][2]float64{{1.9, 0.5}, {3.1, 0.5}, {3.1, 1.5}, {1.9, 1.5}})
	stairs   = FromPairs([][2]float64{{3.6, -4.5}, {4.5, -4.5}, {4.5, -3.0}, {3.6, -3.0}})
	// triangle is a non-rectangular obstacle.
	triangle = FromPairs([][2]float64{{-3, 1}, {-2, 1}, {-2.5, 2}})
)

func mustShape(t testing.TB, p Polygon) *Shape {
	t.Helper()
	s, err := NewShape(p)
	require.NoError(t, err)
	return s
}

func footprint(t testing.TB, ws Polygon, r float64, obstacles ...Polygon) *Footprint {
	t.Helper()
	f := &Footprint{Radius: r, Workspace: mustShape(t, ws)}
	for _, o := range obstacles {
		f.Obstacles = append(f.Obstacles, mustShape(t, o))
	}
	return f
}

// oracleClearance is the footprint clearance computed with the package's
// older, independent polygon code (even-odd Contains, point-to-segment
// DistanceToEdge), to check the go-geom based Shape against.
func oracleClearance(f *Footprint, p Point) float64 {
	c := math.Inf(1)
	if f.Workspace != nil {
		d := f.Workspace.poly.DistanceToEdge(p)
		if !f.Workspace.poly.Contains(p) {
			d = -d
		}
		c = d - f.Radius
	}
	for _, o := range f.Obstacles {
		d := o.poly.DistanceToEdge(p)
		if o.poly.Contains(p) && d > 1e-9 {
			d = -d
		}
		c = math.Min(c, d-f.Radius)
	}
	return c
}

func TestNewShape_RefusesUnusablePolygons(t *testing.T) {
	tests := []struct {
		name string
		p    Polygon
		ok   bool
	}{
		{"square", squareWS, true},
		{"two points (a wall, no inside)", Polygon{{0, 0}, {1, 0}}, true},
		{"empty", nil, false},
		{"NaN vertex", Polygon{{0, 0}, {math.NaN(), 0}, {1, 1}}, false},
		{"infinite vertex", Polygon{{0, 0}, {math.Inf(1), 0}, {1, 1}}, false},
		{"vertex beyond MaxCoord", Polygon{{0, 0}, {2 * MaxCoord, 0}, {1, 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a polygon
			// When it is prepared
			_, err := NewShape(tc.p)

			// Then only a usable one becomes a shape
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrBadShape)
			}
		})
	}
}

func TestShape_InsideAndDistanceOnAnyInput(t *testing.T) {
	l := mustShape(t, lWS)
	wall := mustShape(t, Polygon{{0, 0}, {1, 0}})
	tests := []struct {
		name   string
		s      *Shape
		q      Point
		inside bool
		dist   float64
	}{
		{"in the south arm", l, Point{3, -2}, true, 1},
		{"in the notch", l, Point{2, 2}, false, 3},
		{"on the inner corner", l, Point{-1, -1}, true, 0},
		{"on an edge", l, Point{0, -4.5}, true, 0},
		{"NaN", l, Point{math.NaN(), 0}, false, math.NaN()},
		{"infinite", l, Point{math.Inf(-1), 0}, false, math.Inf(1)},
		{"huge", l, Point{1e300, 1e300}, false, math.Inf(1)},
		{"a two-point wall has no inside", wall, Point{0.5, 0}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a shape and a query point
			// When it is located and measured
			in := tc.s.Inside(tc.q)
			d := tc.s.Distance(tc.q, math.Inf(1))

			// Then the answers are the geometry's, and nothing panics or hangs
			require.Equal(t, tc.inside, in)
			if math.IsNaN(tc.dist) {
				require.True(t, math.IsNaN(d), "%v", d)
			} else if math.IsInf(tc.dist, 1) {
				require.True(t, math.IsNaN(d) || d >= 1e200, "no finite distance to a point at infinity: %v", d)
			} else {
				require.InDelta(t, tc.dist, d, 1e-12)
			}
		})
	}
}

func TestShape_FirstContactMatchesDenseSampling(t *testing.T) {
	// Given random segments around a non-convex shape
	s := mustShape(t, lWS)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a := Point{rng.Float64()*12 - 6, rng.Float64()*12 - 6}
		b := Point{rng.Float64()*12 - 6, rng.Float64()*12 - 6}
		r := rng.Float64() * 0.6

		// When the first contact with the shape's edges is computed
		tc, ok := s.FirstContact(a, b, r)

		// Then it agrees with sampling the distance along the segment
		const n = 4000
		first := math.Inf(1)
		for k := 0; k <= n; k++ {
			tt := float64(k) / n
			if s.Distance(Point{a.X + tt*(b.X-a.X), a.Y + tt*(b.Y-a.Y)}, math.Inf(1)) <= r {
				first = tt
				break
			}
		}
		step := 1.0 / n
		if !ok {
			// A sampled contact may only be a grazing one the samples
			// straddle; none may be missed by more than a sample.
			require.True(t, math.IsInf(first, 1), "case %d: a=%v b=%v r=%g: sampled contact at %g missed", i, a, b, r, first)
			continue
		}
		require.LessOrEqual(t, tc, first+1e-9, "case %d: a=%v b=%v r=%g", i, a, b, r)
		p := Point{a.X + tc*(b.X-a.X), a.Y + tc*(b.Y-a.Y)}
		require.InDelta(t, r, math.Max(r, s.Distance(p, math.Inf(1))), 1e-7, "case %d: contact point %v is at distance r", i, p)
		if !math.IsInf(first, 1) {
			require.GreaterOrEqual(t, tc, first-step-1e-9, "case %d", i)
		}
	}
}

func TestFootprint_SweepAgreesWithTheIndependentOracle(t *testing.T) {
	// Given the L-shaped workspace with a table, the stairs and a triangle
	f := footprint(t, lWS, 0.3, table, stairs, triangle)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 1500 {
		a := Point{rng.Float64()*10 - 5, rng.Float64()*10 - 5}
		b := Point{rng.Float64()*10 - 5, rng.Float64()*10 - 5}
		startC, _ := f.Clearance(a)
		if startC < 0 {
			continue // the oracle below is for clear starts
		}

		// When a straight sweep is checked
		hit, touched := f.Sweep(a, b)

		// Then a clear sweep is clear at every sample, and a refused one
		// touches within a sample's length of where it says
		const n = 2000
		minC := math.Inf(1)
		for k := 0; k <= n; k++ {
			tt := float64(k) / n
			minC = math.Min(minC, oracleClearance(f, Point{a.X + tt*(b.X-a.X), a.Y + tt*(b.Y-a.Y)}))
		}
		l := math.Hypot(b.X-a.X, b.Y-a.Y)
		if !touched {
			require.GreaterOrEqual(t, minC, -1e-7, "case %d: a=%v b=%v swept clear but the oracle overlaps", i, a, b)
			continue
		}
		require.LessOrEqual(t, minC, l/n+1e-7, "case %d: a=%v b=%v refused (%+v) but the oracle is clear", i, a, b, hit)
		p := Point{a.X + hit.T*(b.X-a.X), a.Y + hit.T*(b.Y-a.Y)}
		require.InDelta(t, 0, oracleClearance(f, p), 1e-6, "case %d: the contact point just touches", i)
		reach := f.Reach(a, b, 0.002)
		require.GreaterOrEqual(t, oracleClearance(f, reach), math.Min(0.002, startC)-1e-6, "case %d: the reach keeps its margin (or the start's clearance)", i)
	}
}

func TestFootprint_NearestIsNearestByGridSearch(t *testing.T) {
	f := footprint(t, lWS, 0.3, table, stairs, triangle)
	tests := []struct {
		name string
		q    Point
	}{
		{"east of the room", Point{7, -2}},
		{"in the notch", Point{1, 1}},
		{"deep in the notch's corner", Point{-0.5, -0.5}},
		{"beyond the outer corner", Point{6, -6}},
		{"in the stairs", Point{4.2, -4.2}},
		{"on the triangle", Point{-2.5, 1.4}},
		{"between the triangle and the west wall", Point{-3.9, 1.5}},
		{"already fine", Point{-3, -3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a point where the disc may not stand
			// When the nearest place it fits is asked for
			p, ok := f.Nearest(tc.q, 0)

			// Then it fits there, and no grid point where it fits is nearer
			require.True(t, ok)
			require.GreaterOrEqual(t, oracleClearance(f, p), -1e-6)
			d := math.Hypot(p.X-tc.q.X, p.Y-tc.q.Y)
			const step = 0.02
			for x := tc.q.X - d; x <= tc.q.X+d; x += step {
				for y := tc.q.Y - d; y <= tc.q.Y+d; y += step {
					g := Point{x, y}
					if math.Hypot(x-tc.q.X, y-tc.q.Y) < d-1e-9 {
						require.Less(t, oracleClearance(f, g), 1e-9, "%v fits and is nearer than %v", g, p)
					}
				}
			}
		})
	}
}

func TestFootprint_NearestWhenTheDiscFitsNowhere(t *testing.T) {
	// Given a workspace narrower than the disc
	f := footprint(t, FromPairs([][2]float64{{0, 0}, {0.4, 0}, {0.4, 5}, {0, 5}}), 0.3)

	// When the nearest place it fits is asked for
	_, ok := f.Nearest(Point{0.2, 1}, 0)

	// Then there is none
	require.False(t, ok)
	_, ok = f.Nearest(Point{math.NaN(), 1}, 0)
	require.False(t, ok)
}

func TestFootprint_SweptClearanceOfABrakingPath(t *testing.T) {
	f := footprint(t, squareWS, 0.3, table)
	tests := []struct {
		name string
		a, b Point
		want float64
		who  int
	}{
		{"well inside, nearest the table corner", Point{0, 0}, Point{1, 0}, math.Sqrt(0.9*0.9+0.5*0.5) - 0.3, 0},
		{"towards the east wall", Point{3, 0}, Point{4.4, 0}, -0.2, OutsideWorkspace},
		{"towards the table", Point{1, 1}, Point{1.8, 1}, -0.2, 0},
		{"through the table", Point{1, 1}, Point{3.5, 1}, -0.3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a straight path
			// When its least clearance is computed
			c, who := f.SweptClearance(tc.a, tc.b)

			// Then it is the deepest overlap along it, with the shape
			require.InDelta(t, tc.want, c, 1e-9)
			require.Equal(t, tc.who, who)
		})
	}
}
