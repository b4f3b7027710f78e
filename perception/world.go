package perception

import (
	"math"
	"slices"

	"github.com/robot-bridge/robot-bridge/geom"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Floor is the surface name of objects resting on the floor.
const Floor = "floor"

// surface is one horizontal plane objects can rest on.
type surface struct {
	name   string
	poly   geom.Polygon // nil for the floor: it is everywhere
	height float64
	// minX.. bound the polygon, a cheap reject before Contains.
	min, max geom.Point
}

func (s *surface) contains(x, y, margin float64) bool {
	if s.poly == nil {
		return true
	}
	if x < s.min.X-margin || x > s.max.X+margin || y < s.min.Y-margin || y > s.max.Y+margin {
		return false
	}
	q := geom.Point{X: x, Y: y}
	return s.poly.Contains(q) || (margin > 0 && s.poly.DistanceToEdge(q) <= margin)
}

// world is the known surfaces, highest first, the floor last.
type world struct {
	surfaces []surface
}

func newWorld(w hwconfig.WorldConf) *world {
	out := &world{}
	for _, s := range w.Surfaces {
		if len(s.Polygon) < 3 || math.IsNaN(s.Height) || math.IsInf(s.Height, 0) || s.Height <= 0 {
			continue // Not a plane anything can rest on; the config validator reports it.
		}
		p := geom.FromPairs(pairs(s.Polygon))
		lo, hi := p.Bounds()
		out.surfaces = append(out.surfaces, surface{name: s.Name, poly: p, height: s.Height, min: lo, max: hi})
	}
	slices.SortStableFunc(out.surfaces, func(a, b surface) int {
		switch {
		case a.height > b.height:
			return -1
		case a.height < b.height:
			return 1
		}
		return 0
	})
	out.surfaces = append(out.surfaces, surface{name: Floor})
	return out
}

func pairs(ps []hwconfig.Point2) [][2]float64 {
	out := make([][2]float64, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// surfaceTolerance is how far (metres) an object's estimated bottom may be
// from a surface's height for the object to count as resting on it. It
// absorbs depth noise and the error of estimating an object's size from
// its box.
const surfaceTolerance = 0.12

// supportOf names the surface an object with centre p (room frame) and
// size s rests on: among surfaces whose outline contains p (with a margin
// of half the object, since objects overhang edges), the one whose height
// is closest to the object's bottom, within surfaceTolerance. It returns ""
// when no known surface fits (the object is held, stacked or mislocated).
func (w *world) supportOf(p robot.Vec3, size float64) string {
	bottom := p.Z - size/2
	best, bestErr := "", surfaceTolerance
	for i := range w.surfaces {
		s := &w.surfaces[i]
		e := math.Abs(bottom - s.height)
		if e > bestErr || !s.contains(p.X, p.Y, math.Min(size/2, 0.1)) {
			continue
		}
		best, bestErr = s.name, e
	}
	return best
}
