package safety

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/geom"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// fuzzRoom builds the limits a fuzz case runs against: room 0 is the
// shipped room, 1 the same robot in an L-shaped workspace, and 2 and 3
// add to them a triangle obstacle made of fuzzed numbers (degenerate,
// collinear, NaN or huge as the fuzzer likes). It returns nil when the
// config is refused, which is itself an answer (no panic). oracle is true
// when the independent oracle applies (no fuzzed obstacle).
func fuzzRoom(t *testing.T, room uint8, ox, oy, os float64) (lim *Limits, cfg *hwconfig.Config, oracle bool) {
	fuzzBaseOnce.Do(func() { fuzzBase = loadConfig(t) })
	c := *fuzzBase // the slices below are replaced, never written to
	cfg = &c
	cfg.World.Surfaces = slices.Clone(cfg.World.Surfaces)
	if room%2 == 1 {
		cfg.Base.Workspace = []hwconfig.Point2{{-4.5, -4.5}, {4.5, -4.5}, {4.5, -1}, {-1, -1}, {-1, 4.5}, {-4.5, 4.5}}
	}
	if room%4 >= 2 {
		cfg.World.Surfaces = append(cfg.World.Surfaces, hwconfig.SurfaceConf{
			Name: "fuzzed", Polygon: []hwconfig.Point2{{ox, oy}, {ox + os, oy}, {ox, oy + os}},
		})
	}
	lim, err := NewLimits(cfg)
	if err != nil {
		return nil, cfg, false
	}
	return lim, cfg, room%4 < 2
}

var (
	fuzzBaseOnce sync.Once
	fuzzBase     *hwconfig.Config
)

// oracleClearance is the footprint clearance at p computed with geom's
// older polygon code (even-odd Contains, point-to-segment DistanceToEdge),
// independent of the go-geom predicates Limits uses.
func oracleClearance(cfg *hwconfig.Config, p geom.Point) float64 {
	r := cfg.Base.Radius
	ws := polygonOf(cfg.Base.Workspace)
	d := ws.DistanceToEdge(p)
	if !ws.Contains(p) {
		d = -d
	}
	c := d - r
	var obstacles []geom.Polygon
	for _, rg := range cfg.World.Regions {
		if rg.KeepOut {
			obstacles = append(obstacles, polygonOf(rg.Polygon))
		}
	}
	for _, s := range cfg.World.Surfaces {
		obstacles = append(obstacles, polygonOf(s.Polygon))
	}
	for _, o := range obstacles {
		d := o.DistanceToEdge(p)
		if o.Contains(p) && d > 1e-9 {
			d = -d
		}
		c = math.Min(c, d-r)
	}
	return c
}

func sensible(vs ...float64) bool {
	for _, v := range vs {
		if !finite(v) || math.Abs(v) > 100 {
			return false
		}
	}
	return true
}

// FuzzLimitsPathCheck checks a straight base move from (x0, y0) to (x1,
// y1). Whatever the numbers, Check answers without panicking; on sensible
// numbers an accepted path keeps the footprint clear at every sample (the
// start's own overlap aside), a refused one really comes within a sample
// of touching, and every closest-allowed point is itself allowed.
func FuzzLimitsPathCheck(f *testing.F) {
	f.Add(uint8(0), 0.0, 0.0, 3.0, 2.0, 0.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, room uint8, x0, y0, x1, y1, ox, oy, os float64) {
		lim, cfg, oracle := fuzzRoom(t, room, ox, oy, os)
		if lim == nil {
			return
		}
		// Given a start pose and a target
		from := &robot.Pose2D{X: x0, Y: y0}
		cmd := baseCmd(x1, y1)

		// When the move is checked
		err := lim.Check(cmd, from)

		// Then the answer is nil or a *LimitError, consistent with the geometry
		var le *LimitError
		if err != nil {
			require.ErrorAs(t, err, &le, "%T %v", err, err)
			require.NotEmpty(t, le.Error())
			_ = le.ToolError()
		}
		if !sensible(x0, y0, x1, y1) {
			return
		}
		a, b := geom.Point{X: x0, Y: y0}, geom.Point{X: x1, Y: y1}
		if le != nil && le.ClosestAllowed != nil {
			c := *le.ClosestAllowed
			switch le.Limit {
			case LimitPathWorkspace, LimitPathKeepOut, LimitPathSurface:
				if c0, _ := lim.fp.Clearance(a); c0 >= 0 {
					require.InDelta(t, 0, geom.SegmentDistance(c, a, b), 1e-6, "the farthest reachable point is on the path")
					require.NoError(t, lim.Check(baseCmd(c.X, c.Y), from), "the farthest reachable point %v is reachable", c)
				}
			default:
				require.NoError(t, lim.Check(baseCmd(round3(c.X), round3(c.Y)), nil), "the closest allowed point %v is allowed", c)
			}
		}
		if !oracle {
			return
		}
		start := oracleClearance(cfg, a)
		const n = 512
		minC := math.Inf(1)
		for k := 0; k <= n; k++ {
			tt := float64(k) / n
			minC = math.Min(minC, oracleClearance(cfg, geom.Point{X: a.X + tt*(b.X-a.X), Y: a.Y + tt*(b.Y-a.Y)}))
		}
		if err == nil {
			require.GreaterOrEqual(t, minC, math.Min(0, start)-1e-6, "accepted, but the oracle overlaps along the path")
			return
		}
		if start >= 0 && le.Limit != LimitLinearSpeed && le.Limit != LimitAngularSpeed {
			step := math.Hypot(b.X-a.X, b.Y-a.Y) / n
			require.LessOrEqual(t, minC, step+1e-6, "refused (%v), but the oracle is clear", err)
		}
	})
}

// FuzzLimitsBreach checks the breach monitor on any measured state:
// it never panics, and when it stays quiet the footprint is at most tol
// over a limit now and, braking straight from a straight drive, stops at
// most that far over too.
func FuzzLimitsBreach(f *testing.F) {
	f.Add(uint8(0), 3.7, 0.0, 0.0, 0.8, 0.0, 0.05)
	f.Fuzz(func(t *testing.T, room uint8, x, y, theta, v, w, tol float64) {
		lim, cfg, oracle := fuzzRoom(t, room, 0, 0, 0)
		if lim == nil {
			return
		}
		// Given a measured state
		st := robot.State{Base: robot.Pose2D{X: x, Y: y, Theta: theta}, Velocity: robot.Twist2D{V: v, W: w}}

		// When the breach monitor looks at it
		got := lim.Breach(st, tol)

		// Then a quiet monitor means the footprint is, and will stop, inside
		if got != "" || !oracle || !sensible(x, y, theta, v, w, tol) || tol < 0 || math.Abs(v) > 5 {
			return
		}
		p := geom.Point{X: x, Y: y}
		now := oracleClearance(cfg, p)
		require.GreaterOrEqual(t, now, -tol-1e-6, "quiet, but the footprint is over a limit")
		if w != 0 {
			return
		}
		dist := math.Abs(v)*cfg.Safety.ControlPeriod.D().Seconds() + v*v/(2*cfg.Base.MaxLinearAccel)
		dir := math.Copysign(1, v)
		stop := geom.Point{X: x + dir*dist*math.Cos(theta), Y: y + dir*dist*math.Sin(theta)}
		require.GreaterOrEqual(t, oracleClearance(cfg, stop), math.Min(0, now-tol)-1e-6, "quiet, but braking ends over a limit at %v", stop)
	})
}
