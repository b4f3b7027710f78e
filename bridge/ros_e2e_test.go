package bridge

import (
	"testing"
)

// The shared scenarios of the tool API, approvals and safety, run over ROS:
// bridge → rosmaster → simulator node.

func TestROS_ErrorTypes(t *testing.T) { scenarioErrorTypes(t, startROSHarness) }

func TestROS_IdempotencyKeyMovesOnce(t *testing.T) {
	scenarioIdempotencyKeyMovesOnce(t, startROSHarness)
}

func TestROS_ToolCallsRepairsModelOutput(t *testing.T) { scenarioToolCalls(t, startROSHarness) }

// TestROS_PickAndPlace grasps by the perceived id over ROS, where the
// gripper only reports stalling on something (GripperCommand) and the
// bridge knows which object it aimed at.
func TestROS_PickAndPlace(t *testing.T) { scenarioPickAndPlace(t, startROSHarness) }

// TestROS_ApprovalLifecycle runs the approval scenario (pending, expiry
// with no motion, grants in and out of bounds, revocation) over ROS.
func TestROS_ApprovalLifecycle(t *testing.T) { scenarioApprovalLifecycle(t, startROSHarness) }
