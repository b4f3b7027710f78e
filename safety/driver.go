package safety

import (
	"context"

	"github.com/robot-bridge/robot-bridge/robot"
)

// Driver is what the supervisor needs from a transport (in-process
// simulator, ROS1, MQTT). Only the supervisor holds a Driver: every motion
// command reaches it through the authorization gate, which is why the
// interface lives here and not with the transports.
//
// Implementations must make Stop safe to call at any time, from any
// goroutine, any number of times, and must never block it behind a motion
// command in flight.
type Driver interface {
	// Send delivers one motion goal to the robot. It returns once the robot
	// (or transport) has accepted the goal, or an error. A returned error
	// does not prove that nothing moved.
	Send(ctx context.Context, cmd robot.Command) error
	// Refresh tells the robot's command watchdog that the bridge is still
	// supervising the current motion. Robots stop on their own when
	// refreshes stop arriving.
	Refresh(ctx context.Context) error
	// Stop cancels every goal and brings the base and arm to rest, holding
	// the gripper as it is.
	Stop(ctx context.Context) error
	// Latest returns the newest state received, false if none yet.
	Latest() (robot.State, bool)
	// Subscribe streams states as they arrive (latest-value semantics);
	// the returned function ends the subscription.
	Subscribe() (<-chan robot.State, func())
	// LinkUp reports whether the transport currently reaches the robot.
	LinkUp() bool
}
