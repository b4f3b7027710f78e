package safety

import (
	"fmt"
	"math"
	"testing"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// benchLimits is the shipped robot in a 40-vertex star-shaped (so
// non-convex) workspace with 10 obstacles: five square keep-out regions
// and five square surfaces on a ring between the star's arms.
func benchLimits(b *testing.B) *Limits {
	b.Helper()
	cfg := loadConfig(b)
	ws := make([]hwconfig.Point2, 40)
	for k := range ws {
		r := 4.5
		if k%2 == 1 {
			r = 3.5
		}
		a := float64(k) * 2 * math.Pi / 40
		ws[k] = hwconfig.Point2{r * math.Cos(a), r * math.Sin(a)}
	}
	cfg.Base.Workspace = ws
	cfg.World.Regions, cfg.World.Surfaces = nil, nil
	for k := range 10 {
		a := (18 + 36*float64(k)) * math.Pi / 180
		cx, cy, h := 2.5*math.Cos(a), 2.5*math.Sin(a), 0.15
		sq := []hwconfig.Point2{{cx - h, cy - h}, {cx + h, cy - h}, {cx + h, cy + h}, {cx - h, cy + h}}
		name := fmt.Sprintf("obstacle_%d", k)
		if k%2 == 0 {
			cfg.World.Regions = append(cfg.World.Regions, hwconfig.RegionConf{Name: name, Polygon: sq, KeepOut: true})
		} else {
			cfg.World.Surfaces = append(cfg.World.Surfaces, hwconfig.SurfaceConf{Name: name, Polygon: sq, Height: 0.7})
		}
	}
	lim, err := NewLimits(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// BenchmarkPathCheck times Limits.Check of one straight base move (the
// target's footprint, then the footprint swept along the segment)
// against a 40-vertex non-convex workspace with 10 obstacles. The goal is
// under 20 µs per check. "clear" is the common case and does all the
// work (no early exit); "refused" adds the first-contact and
// farthest-reachable computations of the error; "refused target" adds
// the nearest-fitting-point search, which only a refusal pays.
func BenchmarkPathCheck(b *testing.B) {
	lim := benchLimits(b)
	cases := []struct {
		name   string
		from   robot.Pose2D
		to     robot.Command
		refuse bool
	}{
		{"clear across the room between the obstacles", robot.Pose2D{X: -3.1, Y: 0}, baseCmd(3.1, 0), false},
		{"clear short move", robot.Pose2D{X: -0.5, Y: -0.2}, baseCmd(0.7, 0.4), false},
		{"refused through an obstacle", robot.Pose2D{X: 0, Y: 0}, baseCmd(3.0, 0.97), true},
		{"refused target on an obstacle", robot.Pose2D{X: 0, Y: 0}, baseCmd(2.38, 0.77), true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			from := tc.from
			if err := lim.Check(tc.to, &from); (err != nil) != tc.refuse {
				b.Fatalf("want refused=%v, got %v", tc.refuse, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = lim.Check(tc.to, &from)
			}
		})
	}
}

// BenchmarkPathBreach times the breach monitor's braking-path check of a
// base at full speed in the same room: it runs every control period.
func BenchmarkPathBreach(b *testing.B) {
	lim := benchLimits(b)
	st := robot.State{Base: robot.Pose2D{X: -2, Y: 0}, Velocity: robot.Twist2D{V: 0.8, W: 0.2}}
	if got := lim.Breach(st, 0.05); got != "" {
		b.Fatal(got)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = lim.Breach(st, 0.05)
	}
}
