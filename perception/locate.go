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
// robot at pose. With a depth it back-projects the box centre. Without one
// it tries each known surface, highest first, then the floor: an object of
// size S resting on a plane at height h has its centre at h + S/2 on the
// ray through the box centre, and S is the box's apparent size k (metres
// per metre of depth, see boxGeometry) times the centre's optical depth t,
// which gives t in closed form:
//
//	t = (h − camZ) / (ray.z − k/2)
//
// The first surface whose outline holds that centre wins: a ray that meets
// a table top inside its outline cannot reach the floor below it. ok is
// false when no hypothesis puts the object in front of the camera within
// twice its range (a box above the horizon).
func (s *Summarizer) locate(pose robot.Pose2D, d *robot.Detection) (estimate, bool) {
	cam := s.cam
	uc, vc, wf := cam.boxGeometry(&d.BBox)
	ray := cam.Ray(uc, vc)
	if d.Depth > 0 {
		p := add(cam.origin, scale(ray, d.Depth))
		return estimate{room: ToRoom(pose, p), size: wf * d.Depth, rng: norm(sub(p, cam.origin))}, true
	}
	limit := 2 * cam.maxRange
	for i := range s.world.surfaces {
		sf := &s.world.surfaces[i]
		denom := ray.Z - wf/2 // wf is k
		if math.Abs(denom) < 1e-9 {
			continue
		}
		t := (sf.height - cam.origin.Z) / denom
		if t <= 0 {
			continue
		}
		p := add(cam.origin, scale(ray, t))
		rng := norm(sub(p, cam.origin))
		if rng > limit {
			continue
		}
		size := wf * t
		room := ToRoom(pose, p)
		if !sf.contains(room.X, room.Y, math.Min(size/2, 0.05)) {
			continue
		}
		return estimate{room: room, size: size, rng: rng}, true
	}
	return estimate{}, false
}

// iou returns the intersection over union of two boxes.
func iou(a, b *[4]float64) float64 {
	ix := math.Min(a[2], b[2]) - math.Max(a[0], b[0])
	iy := math.Min(a[3], b[3]) - math.Max(a[1], b[1])
	if ix <= 0 || iy <= 0 {
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
	case cutX && !cutY && !(cutL && cutR) && kh > kw:
		half := kh * c.fx / 2 // the half width the box would have uncut
		if cutR {
			uc = x0 + half
		} else {
			uc = x1 - half
		}
		return uc, vc, kh
	case cutY && !cutX && !(cutT && cutB) && kw > kh:
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
