package sim

import (
	"math"

	"github.com/robot-bridge/robot-bridge/robot"
)

// Camera model constants.
const (
	// minDepth: points closer than this along the optical axis are not
	// imaged (behind or at the lens).
	minDepth = 0.1
	// minConfidence: detections below this are dropped by the simulated
	// detector, like a real detector's score threshold.
	minConfidence = 0.15
	// falsePositiveMaxConfidence: spurious detections score below this.
	falsePositiveMaxConfidence = 0.4
)

// project maps a room-frame point into the image of the camera on a base at
// pose. It returns the pixel (u, v) and the depth along the optical axis.
// The camera frame is the usual optical one: z forward along the axis, x
// right, y down; pitch is positive down.
func (s *Sim) project(pose robot.Pose2D, p robot.Vec3) (u, v, depth float64) {
	c := s.cfg.Camera
	// Room → base.
	cb, sb := math.Cos(pose.Theta), math.Sin(pose.Theta)
	dx, dy := p.X-pose.X, p.Y-pose.Y
	bx, by := cb*dx+sb*dy, -sb*dx+cb*dy
	// Base → camera body (forward, left, up), undoing the mount yaw.
	fx, fy, fz := bx-c.Mount.X, by-c.Mount.Y, p.Z-c.Mount.Z
	yaw := robot.Radians(c.YawDeg)
	cy, sy := math.Cos(yaw), math.Sin(yaw)
	f, l, up := cy*fx+sy*fy, -sy*fx+cy*fy, fz
	// Pitch down by PitchDeg: optical axis (cos p, 0, -sin p) in (f, l, up).
	pitch := robot.Radians(c.PitchDeg)
	cp, sp := math.Cos(pitch), math.Sin(pitch)
	zc := f*cp - up*sp
	yc := -f*sp - up*cp
	xc := -l
	if zc <= 0 {
		return 0, 0, zc
	}
	return c.Cx + c.Fx*xc/zc, c.Cy + c.Fy*yc/zc, zc
}

// captureFrame renders one camera frame: every object whose centre is in
// front of the camera, within range and whose box overlaps the image gets a
// detection with seeded pixel and depth noise and a confidence that falls
// with distance and with the part of the box cut off by the image border;
// then, with the configured probability, one low-confidence false positive.
func (s *Sim) captureFrame() {
	c := s.cfg.Camera
	sc := s.cfg.Sim
	w, h := float64(c.Width), float64(c.Height)
	noisePx := sc.DetectionNoisePx + s.noisePx
	s.detections = s.detections[:0:0]
	s.inView = s.inView[:0:0]
	for _, o := range s.objects {
		u, v, zc := s.project(s.pose, o.pos)
		if zc < minDepth {
			continue
		}
		rng := dist3(s.cameraPosition(), o.pos)
		if rng > s.camRange {
			continue
		}
		hw := o.conf.Size / 2 * c.Fx / zc
		hh := o.conf.Size / 2 * c.Fy / zc
		box := [4]float64{u - hw, v - hh, u + hw, v + hh}
		vis := visibleFraction(box, w, h)
		if vis <= 0 {
			continue
		}
		if u < 0 || u > w || v < 0 || v > h {
			// Centre outside the image: a real detector rarely fires
			// on a sliver of an object.
			if vis < 0.5 {
				continue
			}
		}
		s.inView = append(s.inView, o.conf.ID)
		for i := range box {
			box[i] += s.rng.NormFloat64() * noisePx
		}
		box = clipBox(box, w, h)
		conf := 0.97 * (1 - 0.5*rng/s.camRange) * (0.3 + 0.7*vis)
		conf = clamp(conf+s.rng.NormFloat64()*0.02, 0, 0.99)
		depth := math.Max(minDepth, zc+s.rng.NormFloat64()*(0.005+0.01*zc*zc))
		if conf < minConfidence {
			continue
		}
		s.detections = append(s.detections, robot.Detection{Label: o.conf.Label, BBox: box, Confidence: conf, Depth: depth, Stamp: s.now})
	}
	if sc.FalsePositiveRate > 0 && s.rng.Float64() < sc.FalsePositiveRate {
		label := s.fpLabels[s.rng.IntN(len(s.fpLabels))]
		size := 20 + s.rng.Float64()*80
		x0, y0 := s.rng.Float64()*(w-size), s.rng.Float64()*(h-size)
		s.detections = append(s.detections, robot.Detection{
			Label:      label,
			BBox:       [4]float64{x0, y0, x0 + size, y0 + size},
			Confidence: 0.05 + s.rng.Float64()*(falsePositiveMaxConfidence-0.06),
			Depth:      1 + s.rng.Float64()*(s.camRange-1),
			Stamp:      s.now,
		})
	}
}

func (s *Sim) cameraPosition() robot.Vec3 {
	m := s.cfg.Camera.Mount
	c, sn := math.Cos(s.pose.Theta), math.Sin(s.pose.Theta)
	return robot.Vec3{X: s.pose.X + c*m.X - sn*m.Y, Y: s.pose.Y + sn*m.X + c*m.Y, Z: m.Z}
}

func visibleFraction(b [4]float64, w, h float64) float64 {
	area := (b[2] - b[0]) * (b[3] - b[1])
	if area <= 0 {
		return 0
	}
	ix := math.Min(b[2], w) - math.Max(b[0], 0)
	iy := math.Min(b[3], h) - math.Max(b[1], 0)
	if ix <= 0 || iy <= 0 {
		return 0
	}
	return ix * iy / area
}

func clipBox(b [4]float64, w, h float64) [4]float64 {
	x0, x1 := math.Min(b[0], b[2]), math.Max(b[0], b[2])
	y0, y1 := math.Min(b[1], b[3]), math.Max(b[1], b[3])
	return [4]float64{clamp(x0, 0, w), clamp(y0, 0, h), clamp(x1, 0, w), clamp(y1, 0, h)}
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
