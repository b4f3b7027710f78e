package hwconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/robot-bridge/robot-bridge/geom"
)

// The helpers below are what other packages use instead of poking at maps
// and optional sections, so that "which tools does this robot have" and
// "what are the joint values of pose X" have one answer. They assume a
// config that passed Validate, but never panic on one that did not.

// HasArm reports whether the robot has an arm.
func (c *Config) HasArm() bool { return c.Arm != nil }

// HasGripper reports whether the robot has a gripper. Validate only accepts
// a gripper on a robot with an arm.
func (c *Config) HasGripper() bool { return c.Gripper != nil }

// HasCamera reports whether the robot has a camera.
func (c *Config) HasCamera() bool { return c.Camera != nil }

// JointNames returns the arm's joint names in arm.joints order (the order
// of every joint vector in the bridge), or nil without an arm.
func (c *Config) JointNames() []string {
	if c.Arm == nil {
		return nil
	}
	out := make([]string, len(c.Arm.Joints))
	for i, j := range c.Arm.Joints {
		out[i] = j.Name
	}
	return out
}

// PoseJoints returns the named arm pose as joint positions ordered like
// arm.joints. It fails with ErrNoArm on a robot without an arm and with
// ErrUnknownPose (naming the known poses, for an agent-facing message) when
// the pose does not exist.
func (c *Config) PoseJoints(name string) ([]float64, error) {
	if c.Arm == nil {
		return nil, ErrNoArm
	}
	pose, ok := c.Poses[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known poses: %s)", ErrUnknownPose, name, strings.Join(c.PoseNames(), ", "))
	}
	out := make([]float64, len(c.Arm.Joints))
	for i, j := range c.Arm.Joints {
		v, ok := pose[j.Name]
		if !ok {
			return nil, fmt.Errorf("%w: pose %q does not set joint %q", ErrInvalid, name, j.Name)
		}
		out[i] = v
	}
	return out, nil
}

// PoseNames returns the named arm poses, sorted.
func (c *Config) PoseNames() []string { return sortedKeys(c.Poses) }

// LocationNames returns the named base locations, sorted.
func (c *Config) LocationNames() []string { return sortedKeys(c.Locations) }

// ActionPolicy returns the policy of an action tool. ok is false when the
// config has no entry for it (an unknown tool, or one this robot's
// capabilities do not allow).
func (c *Config) ActionPolicy(tool string) (ActionConf, bool) {
	a, ok := c.Actions[tool]
	return a, ok
}

// ToolNames returns the action tools this robot's capabilities allow, in
// ActionTools order: every robot has a base, so move_base_to,
// return_to_safe_pose, stop and cancel_task are always there; move_arm_to
// needs an arm; grasp and release need an arm and a gripper.
func (c *Config) ToolNames() []string {
	out := make([]string, 0, len(ActionTools))
	for _, t := range ActionTools {
		if c.toolAllowed(t) {
			out = append(out, t)
		}
	}
	return out
}

// toolAllowed reports whether the robot's hardware supports an action tool.
func (c *Config) toolAllowed(tool string) bool {
	switch tool {
	case ToolMoveBaseTo, ToolReturnToSafePose, ToolStop, ToolCancelTask:
		return true
	case ToolMoveArmTo:
		return c.HasArm()
	case ToolGrasp, ToolRelease:
		return c.HasArm() && c.HasGripper()
	}
	return false
}

// Workspace returns base.workspace as a polygon: the region the base's
// centre must stay inside.
func (c *Config) Workspace() geom.Polygon { return toPolygon(c.Base.Workspace) }

// WorldBounds returns world.bounds as a polygon: the room's outline.
func (c *Config) WorldBounds() geom.Polygon { return toPolygon(c.World.Bounds) }

// KeepOuts returns the regions the base's centre must never enter, in
// config order.
func (c *Config) KeepOuts() []RegionConf {
	var out []RegionConf
	for _, r := range c.World.Regions {
		if r.KeepOut {
			out = append(out, r)
		}
	}
	return out
}

// Poly returns the region's outline as a polygon.
func (r RegionConf) Poly() geom.Polygon { return toPolygon(r.Polygon) }

// Poly returns the surface's outline as a polygon.
func (s SurfaceConf) Poly() geom.Polygon { return toPolygon(s.Polygon) }

// toPolygon converts config points to a geom.Polygon.
func toPolygon(pts []Point2) geom.Polygon {
	out := make(geom.Polygon, len(pts))
	for i, p := range pts {
		out[i] = geom.Point{X: p[0], Y: p[1]}
	}
	return out
}

// Clone returns a deep copy of the config, so a caller (a test, the sim
// running beside the bridge) can change it without touching the original.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	out := *c
	if r := c.Transport.ROS; r != nil {
		v := *r
		out.Transport.ROS = &v
	}
	if m := c.Transport.MQTT; m != nil {
		v := *m
		out.Transport.MQTT = &v
	}
	out.Base.Workspace = slices.Clone(c.Base.Workspace)
	if a := c.Arm; a != nil {
		v := *a
		v.LinkLengths = slices.Clone(a.LinkLengths)
		v.Joints = slices.Clone(a.Joints)
		out.Arm = &v
	}
	if g := c.Gripper; g != nil {
		v := *g
		out.Gripper = &v
	}
	out.Locations = maps.Clone(c.Locations)
	if c.Poses != nil {
		out.Poses = make(map[string]ArmPose, len(c.Poses))
		for k, p := range c.Poses {
			out.Poses[k] = maps.Clone(p)
		}
	}
	if cam := c.Camera; cam != nil {
		v := *cam
		out.Camera = &v
	}
	out.World.Bounds = slices.Clone(c.World.Bounds)
	if c.World.Surfaces != nil {
		out.World.Surfaces = make([]SurfaceConf, len(c.World.Surfaces))
		for i, s := range c.World.Surfaces {
			s.Polygon = slices.Clone(s.Polygon)
			out.World.Surfaces[i] = s
		}
	}
	if c.World.Regions != nil {
		out.World.Regions = make([]RegionConf, len(c.World.Regions))
		for i, r := range c.World.Regions {
			r.Polygon = slices.Clone(r.Polygon)
			out.World.Regions[i] = r
		}
	}
	out.Actions = maps.Clone(c.Actions)
	if f := c.Fleet; f != nil {
		v := *f
		v.IDs = slices.Clone(f.IDs)
		v.Robots = maps.Clone(f.Robots)
		out.Fleet = &v
	}
	out.robots = slices.Clone(c.robots)
	if s := c.Sim; s != nil {
		v := *s
		v.Objects = slices.Clone(s.Objects)
		out.Sim = &v
	}
	return &out
}

// InputTopic returns an optional input topic's name as configured, and
// false when the robot has no such input (the name is unset or "none").
func InputTopic(name string) (string, bool) {
	if name == "" || name == TopicNone {
		return "", false
	}
	return name, true
}

// HardwareEStop says where the robot reports its own (hardware) e-stop,
// in words for an operator or an agent ("the robot's estop topic
// (std_msgs/Bool)", "the simulator's e-stop"), and false when it reports
// none: a ROS robot without transport.ros.estop_topic. Without one the
// bridge's software e-stop is the only e-stop the bridge knows of, and
// get_safety_status must say so rather than claim a hardware one. Only
// the simulator and a ROS robot with an e-stop topic report one.
func (c *Config) HardwareEStop() (string, bool) {
	switch c.Transport.Kind {
	case TransportSim:
		return "the simulator's e-stop", true
	case TransportROS:
		if r := c.Transport.ROS; r != nil {
			if t, ok := InputTopic(r.EStopTopic); ok {
				return "the robot's ROS topic " + t + " (std_msgs/Bool)", true
			}
		}
	}
	// No other transport reads a robot-side e-stop.
	return "", false
}

// GoalTolerance returns the tolerances the bridge's own check of a base
// goal uses: the location's goal_tolerance (metres) and yaw_tolerance_deg
// (degrees) when it sets them, else base.goal_tolerance and
// base.yaw_tolerance_deg, else the documented defaults. An empty or
// unknown location name gives the base's values (a goal given by
// coordinates).
func (c *Config) GoalTolerance(location string) (metres, yawDeg float64) {
	metres, yawDeg = c.Base.GoalTolerance, c.Base.YawToleranceDeg
	if l, ok := c.Locations[location]; ok {
		if l.GoalTolerance > 0 {
			metres = l.GoalTolerance
		}
		if l.YawToleranceDeg > 0 {
			yawDeg = l.YawToleranceDeg
		}
	}
	if !(metres > 0) {
		metres = DefaultGoalTolerance
	}
	if !(yawDeg > 0) {
		yawDeg = DefaultYawToleranceDeg
	}
	return metres, yawDeg
}
