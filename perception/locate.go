package perception

import (
	"math"

	"github.com/robot-bridge/robot-bridge/robot"
)

// estimate is where one detection puts an object.
type estimate struct {
	// room is the object's centre in the room frame.
	room robot.Vec3
	// size is the object's apparent size in metres (box width at the
	// estimated depth).
	size float64
	// rng is the distance from the optical centre, metres.
	rng float64
}

// locate estimates the room-frame centre of the object seen in d, with the
// robot at pose.
//
// An object of size S resting on a plane at height h has its centre at
// h + S/2 on the ray through the box centre, and S is the box's apparent
// size k (metres per metre of depth, see boxGeometry) times the centre's
// optical depth t, which gives t in closed form for each known surface and
// the floor (planeHypothesis). Without a depth the first surface, highest
// first, whose outline holds that centre wins: a ray that meets a table top
// inside its outline cannot reach the floor below it.
//
// With a depth, the plane hypotheses consistent with it (within three
// standard deviations of both) are candidates, the closest one wins, and
// depth and plane are averaged weighted by their variances: a depth
// camera's noise grows with the square of the distance, while the plane
// estimate stays within centimetres, so near objects lean on the depth and
// far ones on the geometry. A depth no plane agrees with is used alone
// (the object is held or stands on something unknown), unless it would put
// the object under the floor, where the floor hypothesis is used instead.
//
// ok is false when nothing puts the object in front of the camera within
// twice its range (no depth and a box above the horizon).
func (s *Summarizer) locate(pose robot.Pose2D, d *robot.Detection) (estimate, bool) {
	cam := s.cam
	uc, vc, k := cam.boxGeometry(&d.BBox)
	ray := cam.Ray(uc, vc)
	t, ok := 0.0, false
	if d.Depth > 0 {
		sd := s.depthBase + s.depthQuad*d.Depth*d.Depth
		bestScore, floorT, floorOK := math.Inf(1), 0.0, false
		for i := range s.world.surfaces {
			sf := &s.world.surfaces[i]
			tp, sp, okp := s.planeHypothesis(pose, ray, k, sf)
			if !okp {
				continue
			}
			if sf.poly == nil {
				floorT, floorOK = tp, true
			}
			comb := math.Sqrt(sd*sd + sp*sp)
			diff := math.Abs(tp - d.Depth)
			if diff > 3*comb || diff/comb >= bestScore {
				continue
			}
			bestScore = diff / comb
			wd, wp := 1/(sd*sd), 1/(sp*sp)
			t, ok = (d.Depth*wd+tp*wp)/(wd+wp), true
		}
		if !ok {
			t, ok = d.Depth, true
			if cam.origin.Z+ray.Z*t < -surfaceTolerance && floorOK {
				t = floorT
			}
		}
	} else {
		for i := range s.world.surfaces {
			if tp, _, okp := s.planeHypothesis(pose, ray, k, &s.world.surfaces[i]); okp {
				t, ok = tp, true
				break
			}
		}
	}
	if !ok {
		return estimate{}, false
	}
	p := add(cam.origin, scale(ray, t))
	return estimate{room: ToRoom(pose, p), size: k * t, rng: norm(sub(p, cam.origin))}, true
}

// planeHypothesis returns the optical depth t at which an object of
// apparent size k seen along ray would rest on sf, and its standard
// deviation from pixel noise (box centre and size) plus 1 % for the object
// not being the ideal round shape. ok is false when the object could not
// rest there: behind the camera, beyond twice the range, or outside the
// surface's outline.
func (s *Summarizer) planeHypothesis(pose robot.Pose2D, ray robot.Vec3, k float64, sf *surface) (t, sigma float64, ok bool) {
	cam := s.cam
	denom := ray.Z - k/2
	if math.Abs(denom) < 1e-9 {
		return 0, 0, false
	}
	t = (sf.height - cam.origin.Z) / denom
	if t <= 0 {
		return 0, 0, false
	}
	p := add(cam.origin, scale(ray, t))
	if norm(sub(p, cam.origin)) > 2*cam.maxRange {
		return 0, 0, false
	}
	room := ToRoom(pose, p)
	if !sf.contains(room.X, room.Y, math.Min(k*t/2, 0.05)) {
		return 0, 0, false
	}
	// dt = t/|denom| · |d(ray.z) − dk/2|; the centre row has the noise of
	// the mean of two edges, the size that of their difference.
	dRay := cam.up.Z / cam.fy * s.pixelNoise / math.Sqrt2
	dK := math.Sqrt2 * s.pixelNoise / cam.fx / 2
	geom := t / math.Abs(denom) * math.Hypot(dRay, dK)
	return t, math.Hypot(geom, 0.01*t), true
}

// iou returns the intersection over union of two boxes. The boxes are
// validated (finite, non-inverted), so plain comparisons replace math.Min
// and math.Max and their NaN handling on this hot path of NMS.
func iou(a, b *[4]float64) float64 {
	ix := min(a[2], b[2]) - max(a[0], b[0])
	if ix <= 0 {
		return 0
	}
	iy := min(a[3], b[3]) - max(a[1], b[1])
	if iy <= 0 {
		return 0
	}
	inter := ix * iy
	union := (a[2]-a[0])*(a[3]-a[1]) + (b[2]-b[0])*(b[3]-b[1]) - inter
	if union <= 0 {
		return 0
	}
	return inter / union
}

// boxGeometry returns a box's centre pixel and its apparent size in metres
// per metre of optical depth. The size is the larger of the box's width
// and height in angular terms — the object's largest dimension, as the
// simulator and most detectors draw boxes around the whole object. A box
// cut by the image border on one axis only keeps its true extent on the
// other; the object is then taken to be as wide as it is high (or the
// reverse) and the centre is moved away from the border to match, which is
// exact for the round-ish objects a gripper picks up and far better than
// the cut box's centre for anything else.
func (c *Camera) boxGeometry(b *[4]float64) (uc, vc, k float64) {
	const edge = 1.0 // pixels: a box this close to the border is cut by it
	x0, y0, x1, y1 := b[0], b[1], b[2], b[3]
	uc, vc = (x0+x1)/2, (y0+y1)/2
	kw, kh := (x1-x0)/c.fx, (y1-y0)/c.fy
	cutL, cutR := x0 <= edge, x1 >= c.width-edge
	cutT, cutB := y0 <= edge, y1 >= c.height-edge
	cutX, cutY := cutL || cutR, cutT || cutB
	switch {
	case cutX && !cutY && (!cutL || !cutR) && kh > kw:
		half := kh * c.fx / 2 // the half width the box would have uncut
		if cutR {
			uc = x0 + half
		} else {
			uc = x1 - half
		}
		return uc, vc, kh
	case cutY && !cutX && (!cutT || !cutB) && kw > kh:
		half := kw * c.fy / 2
		if cutB {
			vc = y0 + half
		} else {
			vc = y1 - half
		}
		return uc, vc, kw
	}
	return uc, vc, math.Max(kw, kh)
}
