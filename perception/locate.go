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
// robot at pose. With a depth it back-projects the box centre; without one
// it intersects the ray through the box's bottom edge with the surfaces,
// highest first (a ray that meets a table top inside its outline cannot
// reach the floor below), then places the centre half the apparent size
// above that contact. ok is false when no depth is given and the ray meets
// no surface in front of the camera within twice its range (a box above the
// horizon).
func (s *Summarizer) locate(pose robot.Pose2D, d *robot.Detection) (estimate, bool) {
	cam := s.cam
	uc := (d.BBox[0] + d.BBox[2]) / 2
	vc := (d.BBox[1] + d.BBox[3]) / 2
	bw := d.BBox[2] - d.BBox[0]
	if d.Depth > 0 {
		p := add(cam.origin, scale(cam.Ray(uc, vc), d.Depth))
		return estimate{room: ToRoom(pose, p), size: bw * d.Depth / cam.fx, rng: norm(sub(p, cam.origin))}, true
	}
	bottom := cam.Ray(uc, d.BBox[3])
	centre := cam.Ray(uc, vc)
	limit := 2 * cam.maxRange
	for i := range s.world.surfaces {
		sf := &s.world.surfaces[i]
		// The bottom ray meets the plane z = h at optical depth t.
		if bottom.Z >= -1e-9 {
			break // The ray never descends: nothing below it to rest on.
		}
		t := (sf.height - cam.origin.Z) / bottom.Z
		if t <= 0 {
			continue // The plane is above the camera.
		}
		contact := add(cam.origin, scale(bottom, t))
		if norm(sub(contact, cam.origin)) > limit {
			continue
		}
		rc := ToRoom(pose, contact)
		if !sf.contains(rc.X, rc.Y, 0) {
			continue
		}
		// The centre lies on the centre ray at height h + size/2, and the
		// size is the box width at the centre's depth: two refinements
		// converge to well under a millimetre.
		size := bw * t / cam.fx
		p := add(contact, robot.Vec3{Z: size / 2})
		for range 2 {
			if centre.Z >= -1e-9 {
				break
			}
			tc := (sf.height + size/2 - cam.origin.Z) / centre.Z
			if tc <= 0 {
				break
			}
			size = bw * tc / cam.fx
			p = add(cam.origin, scale(centre, tc))
		}
		return estimate{room: ToRoom(pose, p), size: size, rng: norm(sub(p, cam.origin))}, true
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
