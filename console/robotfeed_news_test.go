package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

// TestConsole_StateNewsIsNotHeldBackByTheCap: the feed published a state
// whose condition stayed the same at most every tenth of a second, so a
// robot that engaged its own e-stop, reported a fault or closed its
// gripper on an object reached the agent's event stream and MCP
// subscribers up to 100 ms late (the agent-event goal is 2 ms).
func TestConsole_StateNewsIsNotHeldBackByTheCap(t *testing.T) {
	f := startFeed(t)
	// Given a robot at rest whose state was just published
	f.src.arrive(restingState())
	require.Equal(t, robot.ConditionStopped, f.next().Condition)

	// When, within the same tenth of a second, its gripper closes on a
	// cup, it reports a fault, and its e-stop engages
	holding := restingState()
	holding.Gripper = &robot.Gripper{Closed: true, Holding: "red_cup"}
	f.src.arrive(holding)
	// Then each is published at once
	require.Equal(t, "red_cup", f.next().State.Gripper.Holding)
	faulted := holding
	faulted.Faults = []string{"motor_stall"}
	f.src.arrive(faulted)
	require.Equal(t, []string{"motor_stall"}, f.next().State.Faults)
	estop := faulted
	estop.EStop = true
	f.src.arrive(estop)
	require.True(t, f.next().State.EStop)

	// And the same state again within the tenth is still capped: the
	// next event is a later change, not a repeat
	f.src.arrive(estop)
	moved := estop
	moved.EStop = false
	f.src.arrive(moved)
	require.False(t, f.next().State.EStop)
}
