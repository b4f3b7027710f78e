package ros

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/trajectory_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/vision_msgs"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
)

// The conversions below turn what arrives from a robot into robot types and
// back. Every incoming message is outside input: a robot driver with a bug
// can publish NaN, a quaternion of zeros, arrays of mismatched lengths or a
// million joint names. They return an error for anything that cannot be
// turned into a trustworthy value and never put a NaN or an infinity into
// robot.State (it would also make the state impossible to encode as JSON).

// ErrBadMessage is wrapped by every conversion error.
var ErrBadMessage = errors.New("malformed ROS message")

// Size bounds on incoming arrays. Real robots stay far below them; beyond
// them a message is refused rather than allocated.
const (
	MaxJointNames = 512
	MaxDetections = 256
	MaxHypotheses = 64
)

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadMessage}, args...)...)
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Yaw returns the heading (rotation about +z) of a quaternion, normalising
// it first. A zero or non-finite quaternion is an error.
func Yaw(q geometry_msgs.Quaternion) (float64, error) {
	if !finite(q.X, q.Y, q.Z, q.W) {
		return 0, badf("orientation is not finite (%g, %g, %g, %g)", q.X, q.Y, q.Z, q.W)
	}
	n := math.Sqrt(q.X*q.X + q.Y*q.Y + q.Z*q.Z + q.W*q.W)
	if n < 1e-9 || math.IsInf(n, 0) {
		return 0, badf("orientation quaternion has norm %g", n)
	}
	x, y, z, w := q.X/n, q.Y/n, q.Z/n, q.W/n
	return math.Atan2(2*(w*z+x*y), 1-2*(y*y+z*z)), nil
}

// QuaternionFromYaw returns the rotation about +z by yaw.
func QuaternionFromYaw(yaw float64) geometry_msgs.Quaternion {
	return geometry_msgs.Quaternion{Z: math.Sin(yaw / 2), W: math.Cos(yaw / 2)}
}

// OdomToBase converts nav_msgs/Odometry into the base pose and velocity.
// The pose is taken as the robot's pose in the room frame (a robot whose
// odometry drifts publishes its localised pose under the odom topic name
// the config gives). The twist is in the child (robot) frame, as
// nav_msgs/Odometry defines.
func OdomToBase(m *nav_msgs.Odometry) (robot.Pose2D, robot.Twist2D, error) {
	p := m.Pose.Pose.Position
	if !finite(p.X, p.Y, p.Z) {
		return robot.Pose2D{}, robot.Twist2D{}, badf("odometry position is not finite (%g, %g)", p.X, p.Y)
	}
	yaw, err := Yaw(m.Pose.Pose.Orientation)
	if err != nil {
		return robot.Pose2D{}, robot.Twist2D{}, fmt.Errorf("odometry: %w", err)
	}
	v, w := m.Twist.Twist.Linear.X, m.Twist.Twist.Angular.Z
	if !finite(v, w) {
		return robot.Pose2D{}, robot.Twist2D{}, badf("odometry twist is not finite (v=%g, w=%g)", v, w)
	}
	return robot.Pose2D{X: p.X, Y: p.Y, Theta: robot.NormalizeAngle(yaw)}, robot.Twist2D{V: v, W: w}, nil
}

// JointSample is one joint's reading from a JointState message.
type JointSample struct {
	Position float64
	Velocity float64
}

// JointStateSamples extracts the readings of the joints in want (arm
// joints and the gripper joint) from a sensor_msgs/JointState. Joints the
// message does not mention are absent from the result (robots often split
// arm and gripper into two messages); names not in want are ignored. A
// position array shorter than the names, a velocity array that is neither
// empty nor as long as the names, a duplicated wanted name or a non-finite
// reading of a wanted joint is an error.
func JointStateSamples(m *sensor_msgs.JointState, want map[string]bool) (map[string]JointSample, error) {
	if len(m.Name) > MaxJointNames {
		return nil, badf("joint_states has %d names (at most %d)", len(m.Name), MaxJointNames)
	}
	if len(m.Position) != len(m.Name) {
		return nil, badf("joint_states has %d names but %d positions", len(m.Name), len(m.Position))
	}
	if len(m.Velocity) != 0 && len(m.Velocity) != len(m.Name) {
		return nil, badf("joint_states has %d names but %d velocities", len(m.Name), len(m.Velocity))
	}
	out := make(map[string]JointSample, len(want))
	for i, n := range m.Name {
		if !want[n] {
			continue
		}
		if _, dup := out[n]; dup {
			return nil, badf("joint_states names joint %q twice", n)
		}
		s := JointSample{Position: m.Position[i]}
		if len(m.Velocity) > 0 {
			s.Velocity = m.Velocity[i]
		}
		if !finite(s.Position, s.Velocity) {
			return nil, badf("joint %q reading is not finite (position %g, velocity %g)", n, s.Position, s.Velocity)
		}
		out[n] = s
	}
	return out, nil
}

// BatteryFromMsg converts sensor_msgs/BatteryState. The ROS convention is
// a percentage in [0, 1] and NaN for an unmeasured value; when the
// percentage is NaN it is derived from charge/capacity, and when that is
// impossible too, ok is false and the caller keeps its previous reading.
func BatteryFromMsg(m *sensor_msgs.BatteryState) (b robot.Battery, ok bool) {
	pct := float64(m.Percentage)
	if !finite(pct) {
		c, capa := float64(m.Charge), float64(m.Capacity)
		if !finite(c, capa) || capa <= 0 {
			return robot.Battery{}, false
		}
		pct = c / capa
	}
	pct = math.Max(0, math.Min(1, pct))
	v := float64(m.Voltage)
	if !finite(v) || v < 0 {
		v = 0
	}
	return robot.Battery{
		Known:    true,
		Percent:  math.Round(pct*1000) / 10,
		Voltage:  v,
		Charging: m.PowerSupplyStatus == sensor_msgs.BatteryState_POWER_SUPPLY_STATUS_CHARGING,
	}, true
}

// Labeler names a detection class id.
type Labeler func(id int64) string

// LabelsFrom returns a Labeler over a class list: id i is labels[i], and
// an id outside the list is "class_<id>".
func LabelsFrom(labels []string) Labeler {
	return func(id int64) string {
		if id >= 0 && id < int64(len(labels)) && labels[id] != "" {
			return labels[id]
		}
		return "class_" + strconv.FormatInt(id, 10)
	}
}

// DetectionsFromMsg converts vision_msgs/Detection2DArray (the ROS1
// noetic definition: integer class ids, scores, a pose per hypothesis, a
// centre-size box). Each detection keeps its best-scoring hypothesis; the
// hypothesis pose's z (metres along the optical axis, in the camera's
// optical frame) becomes the depth. Detections with no hypothesis, a
// non-finite or negative box are skipped; more than MaxDetections is an
// error. stamp is used when the message has none.
func DetectionsFromMsg(m *vision_msgs.Detection2DArray, label Labeler, stamp time.Time) ([]robot.Detection, error) {
	if len(m.Detections) > MaxDetections {
		return nil, badf("detections has %d entries (at most %d)", len(m.Detections), MaxDetections)
	}
	if !m.Header.Stamp.IsZero() && m.Header.Stamp.Unix() > 0 {
		stamp = m.Header.Stamp
	}
	out := make([]robot.Detection, 0, len(m.Detections))
	for _, d := range m.Detections {
		if len(d.Results) == 0 || len(d.Results) > MaxHypotheses {
			continue
		}
		best := -1
		for i, h := range d.Results {
			if !finite(h.Score) {
				continue
			}
			if best < 0 || h.Score > d.Results[best].Score {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		b := d.Bbox
		if !finite(b.Center.X, b.Center.Y, b.SizeX, b.SizeY) || b.SizeX < 0 || b.SizeY < 0 {
			continue
		}
		h := d.Results[best]
		depth := h.Pose.Pose.Position.Z
		if !finite(depth) || depth < 0 {
			depth = 0
		}
		st := stamp
		if !d.Header.Stamp.IsZero() && d.Header.Stamp.Unix() > 0 {
			st = d.Header.Stamp
		}
		out = append(out, robot.Detection{
			Label:      label(h.Id),
			BBox:       [4]float64{b.Center.X - b.SizeX/2, b.Center.Y - b.SizeY/2, b.Center.X + b.SizeX/2, b.Center.Y + b.SizeY/2},
			Confidence: math.Max(0, math.Min(1, h.Score)),
			Depth:      depth,
			Stamp:      st,
		})
	}
	return out, nil
}

// DetectionsToMsg is the inverse of DetectionsFromMsg, for the simulator
// node: classOf maps a label to its class id.
func DetectionsToMsg(ds []robot.Detection, classOf func(string) int64, frame string, stamp time.Time) *vision_msgs.Detection2DArray {
	m := &vision_msgs.Detection2DArray{Header: std_msgs.Header{Stamp: stamp, FrameId: frame}}
	for _, d := range ds {
		det := vision_msgs.Detection2D{
			Header: std_msgs.Header{Stamp: d.Stamp, FrameId: frame},
			Bbox: vision_msgs.BoundingBox2D{
				Center: geometry_msgs.Pose2D{X: (d.BBox[0] + d.BBox[2]) / 2, Y: (d.BBox[1] + d.BBox[3]) / 2},
				SizeX:  d.BBox[2] - d.BBox[0], SizeY: d.BBox[3] - d.BBox[1],
			},
		}
		h := vision_msgs.ObjectHypothesisWithPose{Id: classOf(d.Label), Score: d.Confidence}
		h.Pose.Pose.Position.Z = d.Depth
		h.Pose.Pose.Orientation.W = 1
		det.Results = []vision_msgs.ObjectHypothesisWithPose{h}
		m.Detections = append(m.Detections, det)
	}
	return m
}

// BaseGoalToMsg builds the move_base goal for g in frame. move_base has no
// speed limits per goal, so MaxLinear and MaxAngular cannot travel (the
// robot's own configured limits apply, and the supervisor still checks the
// measured speeds); IgnoreTheta becomes "face the direction of travel",
// which needs the least turning.
func BaseGoalToMsg(g robot.BaseGoal, from robot.Pose2D, frame string, stamp time.Time) *rosmsg.MoveBaseActionGoal {
	yaw := g.Target.Theta
	if g.IgnoreTheta {
		dx, dy := g.Target.X-from.X, g.Target.Y-from.Y
		yaw = from.Theta
		if math.Hypot(dx, dy) > 1e-3 {
			yaw = math.Atan2(dy, dx)
		}
	}
	m := &rosmsg.MoveBaseActionGoal{}
	m.Goal.TargetPose = geometry_msgs.PoseStamped{
		Header: std_msgs.Header{Stamp: stamp, FrameId: frame},
		Pose: geometry_msgs.Pose{
			Position:    geometry_msgs.Point{X: g.Target.X, Y: g.Target.Y},
			Orientation: QuaternionFromYaw(yaw),
		},
	}
	return m
}

// BaseGoalFromMsg is the inverse of BaseGoalToMsg, for the simulator node.
func BaseGoalFromMsg(m *rosmsg.MoveBaseGoal) (robot.Pose2D, error) {
	p := m.TargetPose.Pose.Position
	if !finite(p.X, p.Y) {
		return robot.Pose2D{}, badf("target position is not finite")
	}
	yaw, err := Yaw(m.TargetPose.Pose.Orientation)
	if err != nil {
		return robot.Pose2D{}, fmt.Errorf("target pose: %w", err)
	}
	return robot.Pose2D{X: p.X, Y: p.Y, Theta: robot.NormalizeAngle(yaw)}, nil
}

// TrajectoryDuration is how long the arm needs from cur to target when
// every joint moves no faster than scale times its limit: the slowest
// joint sets the time.
func TrajectoryDuration(joints []hwconfig.JointConf, cur, target []float64, scale float64) time.Duration {
	if scale <= 0 || scale > 1 || !finite(scale) {
		scale = 1
	}
	t := 0.0
	for i, j := range joints {
		if i >= len(cur) || i >= len(target) || j.MaxVelocity <= 0 {
			continue
		}
		t = math.Max(t, math.Abs(target[i]-cur[i])/(j.MaxVelocity*scale))
	}
	return time.Duration(t * float64(time.Second))
}

// ArmGoalToMsg builds a one-point FollowJointTrajectory goal: the joints
// in hw-config order reach g.Positions at rest after the time the
// velocity-scaled limits need from cur.
func ArmGoalToMsg(g robot.ArmGoal, joints []hwconfig.JointConf, cur []float64) *rosmsg.FollowJointTrajectoryActionGoal {
	names := make([]string, len(joints))
	for i, j := range joints {
		names[i] = j.Name
	}
	m := &rosmsg.FollowJointTrajectoryActionGoal{}
	m.Goal.Trajectory = trajectory_msgs.JointTrajectory{
		JointNames: names,
		Points: []trajectory_msgs.JointTrajectoryPoint{{
			Positions:     append([]float64(nil), g.Positions...),
			Velocities:    make([]float64, len(g.Positions)),
			TimeFromStart: TrajectoryDuration(joints, cur, g.Positions, g.VelocityScale),
		}},
	}
	return m
}

// HoldGoalToMsg builds the arm hold a stop may send after cancelling the
// trajectory: one point at hold, at rest, due no sooner than the joints
// need at their velocity limits from cur (where the arm is now, as well as
// it is known), and never sooner than minDur (one control period; a
// non-positive minDur counts as hwconfig.DefaultControlPeriod). A
// FollowJointTrajectory controller executes a point due at once
// (time_from_start 0) by jumping to it as fast as the hardware goes, so a
// hold is never due at once, however close it is.
func HoldGoalToMsg(joints []hwconfig.JointConf, hold, cur []float64, minDur time.Duration) *rosmsg.FollowJointTrajectoryActionGoal {
	if minDur <= 0 {
		minDur = hwconfig.DefaultControlPeriod
	}
	m := ArmGoalToMsg(robot.ArmGoal{Positions: hold, VelocityScale: 1}, joints, cur)
	need := 0.0
	for i, j := range joints {
		if i >= len(cur) || i >= len(hold) || j.MaxVelocity <= 0 || !finite(cur[i], hold[i]) {
			continue
		}
		need = math.Max(need, math.Abs(hold[i]-cur[i])/j.MaxVelocity)
	}
	// Rounded up: the time the limits need, not a nanosecond less (and
	// no overflow into a negative duration for an absurd estimate).
	d := time.Duration(math.MaxInt64)
	if ns := math.Ceil(need * float64(time.Second)); ns < float64(math.MaxInt64) {
		d = time.Duration(ns)
	}
	m.Goal.Trajectory.Points[0].TimeFromStart = max(d, minDur)
	return m
}

// ArmGoalFromMsg is the inverse of ArmGoalToMsg, for the simulator node:
// the final point's positions are reordered into hw-config order and the
// velocity scale is recovered from the point's time. Unknown or missing
// joints, an empty trajectory and non-finite positions are errors.
func ArmGoalFromMsg(m *rosmsg.FollowJointTrajectoryGoal, joints []hwconfig.JointConf, cur []float64) (robot.ArmGoal, error) {
	tr := m.Trajectory
	if len(tr.Points) == 0 {
		return robot.ArmGoal{}, badf("trajectory has no points")
	}
	if len(tr.JointNames) > MaxJointNames {
		return robot.ArmGoal{}, badf("trajectory names %d joints", len(tr.JointNames))
	}
	last := tr.Points[len(tr.Points)-1]
	if len(last.Positions) != len(tr.JointNames) {
		return robot.ArmGoal{}, badf("trajectory point has %d positions for %d joints", len(last.Positions), len(tr.JointNames))
	}
	idx := make(map[string]int, len(tr.JointNames))
	for i, n := range tr.JointNames {
		idx[n] = i
	}
	pos := make([]float64, len(joints))
	for i, j := range joints {
		k, ok := idx[j.Name]
		if !ok {
			return robot.ArmGoal{}, badf("trajectory does not name joint %q", j.Name)
		}
		if !finite(last.Positions[k]) {
			return robot.ArmGoal{}, badf("joint %q target is not finite", j.Name)
		}
		pos[i] = last.Positions[k]
	}
	if len(idx) != len(joints) {
		return robot.ArmGoal{}, badf("trajectory names %d joints, the arm has %d", len(idx), len(joints))
	}
	scale := 1.0
	if t := last.TimeFromStart.Seconds(); t > 0 {
		need := TrajectoryDuration(joints, cur, pos, 1).Seconds()
		scale = math.Max(0.01, math.Min(1, need/t))
	}
	return robot.ArmGoal{Positions: pos, VelocityScale: scale}, nil
}
