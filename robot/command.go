package robot

import "fmt"

// CommandKind is the kind of motion a Command asks for.
type CommandKind int

// Command kinds. Stop is not a Command: every driver has a dedicated Stop
// method, because stopping must never go through the authorization gate.
const (
	CmdMoveBase CommandKind = iota + 1
	CmdMoveArm
	CmdGripper
)

// String implements fmt.Stringer.
func (k CommandKind) String() string {
	switch k {
	case CmdMoveBase:
		return "move_base"
	case CmdMoveArm:
		return "move_arm"
	case CmdGripper:
		return "gripper"
	}
	return fmt.Sprintf("CommandKind(%d)", int(k))
}

// BaseGoal asks the base to drive to a pose in the room frame.
type BaseGoal struct {
	Target Pose2D `json:"target"`
	// IgnoreTheta makes the final heading free.
	IgnoreTheta bool `json:"ignore_theta,omitempty"`
	// MaxLinear and MaxAngular cap the speeds for this motion (m/s, rad/s);
	// they are never above the configured limits.
	MaxLinear  float64 `json:"max_linear"`
	MaxAngular float64 `json:"max_angular"`
}

// ArmGoal asks the arm to move its joints to positions (radians, hw-config
// joint order), each joint no faster than its configured limit times
// VelocityScale.
type ArmGoal struct {
	Positions     []float64 `json:"positions"`
	VelocityScale float64   `json:"velocity_scale"`
}

// GripperGoal asks the gripper to open or close.
type GripperGoal struct {
	Close bool `json:"close"`
	// Force is the grip force limit in newtons when closing.
	Force float64 `json:"force,omitempty"`
	// ObjectID names the object a grasp expects between the fingers. A
	// transport whose robot can only tell "something is held" (a ROS
	// GripperCommand that stalled short of closed) reports Holding as this
	// id; one that knows what it holds (the simulator) ignores it.
	ObjectID string `json:"object_id,omitempty"`
}

// Command is one motion command for a transport. Exactly one of Base, Arm,
// Gripper is set, matching Kind.
type Command struct {
	// ID is unique per command; transports that can deliver twice (MQTT
	// QoS 1) use it to drop duplicates.
	ID      string       `json:"id"`
	Kind    CommandKind  `json:"kind"`
	Base    *BaseGoal    `json:"base,omitempty"`
	Arm     *ArmGoal     `json:"arm,omitempty"`
	Gripper *GripperGoal `json:"gripper,omitempty"`
	// Epoch is the lease epoch of the bridge that sends the command, in a
	// cluster of bridges (0, and omitted, for a bridge on its own). A robot
	// keeps the newest epoch it has seen and refuses a motion command with
	// an older one, so a bridge whose lease was taken over can never move
	// the robot again.
	Epoch uint64 `json:"epoch,omitempty"`
	// Bridge is the id of the bridge that sends the command, in a cluster
	// ("" and omitted otherwise); for logs and refusals.
	Bridge string `json:"bridge,omitempty"`
}

// Validate checks that the command is well-formed (not that it is safe).
func (c Command) Validate() error {
	n := 0
	if c.Base != nil {
		n++
	}
	if c.Arm != nil {
		n++
	}
	if c.Gripper != nil {
		n++
	}
	if n != 1 {
		return fmt.Errorf("command %q must carry exactly one goal, has %d", c.ID, n)
	}
	switch c.Kind {
	case CmdMoveBase:
		if c.Base == nil {
			return fmt.Errorf("command %q: kind move_base without a base goal", c.ID)
		}
	case CmdMoveArm:
		if c.Arm == nil {
			return fmt.Errorf("command %q: kind move_arm without an arm goal", c.ID)
		}
	case CmdGripper:
		if c.Gripper == nil {
			return fmt.Errorf("command %q: kind gripper without a gripper goal", c.ID)
		}
	default:
		return fmt.Errorf("command %q: unknown kind %d", c.ID, int(c.Kind))
	}
	return nil
}
