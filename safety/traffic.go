package safety

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/geom"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Traffic keeps the robots of one bridge that share a room out of each
// other's way: to the gate, another robot is an obstacle like a table,
// except that it moves. A base motion is admitted only when the disc of
// its robot, swept along the straight path from where it is to its
// target, stays TrafficMargin clear of every other robot of the room —
// of the disc where that robot is now, and of the whole corridor of the
// base motion it is running. An admitted motion reserves its corridor
// until its task's motion ends (Execute returns), so two robots are never
// sent into one corridor: whichever reaches the gate first holds it, and
// the other is refused ROBOT_BUSY, which an agent may retry once the
// first robot is through. A robot whose pose is not known yet is where it
// was last seen or, never seen, blocks nothing it cannot be placed in —
// its own supervisor refuses its motions until it reports a state.
type Traffic struct {
	mu     sync.Mutex
	robots map[string]*trafficRobot // guarded by mu
}

// TrafficMargin is the clearance kept between two robots' discs, on top
// of their radii: odometry drift and a controller's tracking error of the
// two.
const TrafficMargin = 0.2

// trafficRobot is one robot as the traffic sees it.
type trafficRobot struct {
	id, room string
	radius   float64
	pose     func() (robot.Pose2D, bool)
	// corridor is the reserved path of its running base motion, nil when
	// it runs none.
	corridor *[2]geom.Point
}

// NewTraffic returns an empty traffic guard; each robot's supervisor
// joins it (Conf.Traffic, Conf.Room).
func NewTraffic() *Traffic { return &Traffic{robots: map[string]*trafficRobot{}} }

// join registers robot id in room with its base radius and pose source.
func (t *Traffic) join(id, room string, radius float64, pose func() (robot.Pose2D, bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.robots[id] = &trafficRobot{id: id, room: room, radius: radius, pose: pose}
}

// reserve admits robot id's straight base motion from → to, or refuses it
// naming the robot in the way; admitted, the corridor is held until
// release.
func (t *Traffic) reserve(id string, from, to robot.Pose2D) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	me, ok := t.robots[id]
	if !ok {
		return nil
	}
	a, b := geom.Point{X: from.X, Y: from.Y}, geom.Point{X: to.X, Y: to.Y}
	ids := make([]string, 0, len(t.robots))
	for oid := range t.robots {
		ids = append(ids, oid)
	}
	sort.Strings(ids) // the same refusal for the same situation
	for _, oid := range ids {
		o := t.robots[oid]
		if oid == id || o.room != me.room {
			continue
		}
		need := me.radius + o.radius + TrafficMargin
		if p, ok := o.pose(); ok {
			q := geom.Point{X: p.X, Y: p.Y}
			if d := geom.SegmentDistance(q, a, b); d < need {
				return trafficRefusal(id, o, fmt.Sprintf("robot %s stands at (%.2f, %.2f), %.2f m from this path (at least %.2f m needed between the two robots)",
					oid, p.X, p.Y, d, need))
			}
		}
		if c := o.corridor; c != nil {
			if d := segmentGap(a, b, c[0], c[1]); d < need {
				return trafficRefusal(id, o, fmt.Sprintf("robot %s is driving from (%.2f, %.2f) to (%.2f, %.2f), and this path comes within %.2f m of its path (at least %.2f m needed)",
					oid, c[0].X, c[0].Y, c[1].X, c[1].Y, d, need))
			}
		}
	}
	me.corridor = &[2]geom.Point{a, b}
	return nil
}

// release ends robot id's reservation: its motion is over, and from now
// on the others keep clear of where it is.
func (t *Traffic) release(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.robots[id]; ok {
		r.corridor = nil
	}
}

// segmentGap is the distance between segments ab and cd.
func segmentGap(a, b, c, d geom.Point) float64 {
	if geom.SegmentIntersects(a, b, c, d) {
		return 0
	}
	return math.Min(math.Min(geom.SegmentDistance(a, c, d), geom.SegmentDistance(b, c, d)),
		math.Min(geom.SegmentDistance(c, a, b), geom.SegmentDistance(d, a, b)))
}

// ErrTrafficBlocked is the cause of a base motion refused because another
// robot of the room is in its way.
var ErrTrafficBlocked = fmt.Errorf("another robot is in the way")

func trafficRefusal(id string, o *trafficRobot, why string) *toolerr.Error {
	e := toolerr.New(toolerr.RobotBusy, "robot %s's path is blocked: %s; nothing was sent", id, why).Wrap(ErrTrafficBlocked).
		With("blocked_by", o.id).With("room", o.room)
	e.Suggestion = fmt.Sprintf("wait until robot %s has moved on (list_robots shows where it is and whether it is busy), then call again; or choose a target whose straight path keeps clear of it", o.id)
	e.RetryAfter = 2 * time.Second
	return e
}
