package safety

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// trafficRobot is a harness robot named id in room, standing at (x, y),
// whose base motions need no approval.
func trafficHarness(t *testing.T, traffic *Traffic, id, room string, x, y float64) *harness {
	t.Helper()
	h := newHarnessIn(t, func(c *hwconfig.Config) {
		c.Robot.ID, c.World.Room = id, room
		c.Actions[hwconfig.ToolMoveBaseTo] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
	}, nil, traffic)
	h.st.Base = robot.Pose2D{X: x, Y: y}
	h.publish()
	return h
}

// drive runs a base motion of task id to (x, y) on h.
func drive(h *harness, ctx context.Context, task string, x, y float64) <-chan Outcome {
	return h.execute(ctx, Motion{
		Auth:     Authorization{TaskID: task, Tool: hwconfig.ToolMoveBaseTo, Args: map[string]any{"x": x, "y": y}},
		Steps:    []Step{goalStep(x, y, 0)},
		Deadline: time.Minute,
	})
}

func TestTraffic_ARobotsCorridorIsAnObstacleToTheOthersOfItsRoom(t *testing.T) {
	traffic := NewTraffic()
	a := trafficHarness(t, traffic, "a", "lab", 0, 0)
	b := trafficHarness(t, traffic, "b", "lab", 2, 0)
	c := trafficHarness(t, traffic, "c", "hall", 0, 1)

	// Given robot a driving from (0, 0) to (0, 2) — robot c stands on that
	// path, but in another room
	actx, stopA := context.WithCancel(context.Background())
	aDone := drive(a, actx, "ta", 0, 2)
	waitFor(t, func() bool { return len(a.drv.sentCommands()) == 1 }, "a's goal was not sent")

	// When robot b asks for a path across a's corridor
	out := outcomeWithin(t, b, drive(b, context.Background(), "tb", -1, 1.5), 30*time.Second)

	// Then it is refused ROBOT_BUSY naming a, and nothing reached b
	require.Equal(t, OutcomeRejected, out.Kind, "%v", out.Err)
	var te *toolerr.Error
	require.ErrorAs(t, out.Err, &te)
	require.Equal(t, toolerr.RobotBusy, te.Type)
	require.Equal(t, "a", te.Details["blocked_by"])
	require.ErrorIs(t, out.Err, ErrTrafficBlocked)
	require.Contains(t, te.Message, "robot a is driving from (0.00, 0.00) to (0.00, 2.00)")
	require.Empty(t, b.drv.sentCommands())

	// And a path clear of a's corridor goes
	bctx, stopB := context.WithCancel(context.Background())
	bDone := drive(b, bctx, "tb2", 2, -2)
	waitFor(t, func() bool { return len(b.drv.sentCommands()) == 1 }, "b's clear path was refused")
	stopB()
	outcomeWithin(t, b, bDone, 30*time.Second)

	// When a's motion ends, its corridor is free; where a stands still
	// counts: a path right over it is refused, one past it goes
	stopA()
	outcomeWithin(t, a, aDone, 30*time.Second)
	b.st.Base = robot.Pose2D{X: 2, Y: 0}
	b.publish()
	out = outcomeWithin(t, b, drive(b, context.Background(), "tb3", -2, 0), 30*time.Second)
	require.Equal(t, OutcomeRejected, out.Kind)
	require.ErrorIs(t, out.Err, ErrTrafficBlocked)
	require.Contains(t, out.Err.Error(), "robot a stands at (0.00, 0.00)")
	sent := len(b.drv.sentCommands())
	bctx, stopB = context.WithCancel(context.Background())
	bDone = drive(b, bctx, "tb4", -1, 1.5)
	waitFor(t, func() bool { return len(b.drv.sentCommands()) == sent+1 }, "b's path past a still standing robot was refused")
	stopB()
	outcomeWithin(t, b, bDone, 30*time.Second)

	// And robot c, in another room, never saw a or b
	cctx, stopC := context.WithCancel(context.Background())
	cDone := drive(c, cctx, "tc", 0, -1)
	waitFor(t, func() bool { return len(c.drv.sentCommands()) == 1 }, "c was blocked by robots of another room")
	stopC()
	outcomeWithin(t, c, cDone, 30*time.Second)
}

func TestTraffic_ADryRunReservesNothing(t *testing.T) {
	traffic := NewTraffic()
	a := trafficHarness(t, traffic, "a", "lab", 0, 0)
	b := trafficHarness(t, traffic, "b", "lab", 2, 0)
	goal := robot.Command{Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 0, Y: 2}, MaxLinear: 0.5, MaxAngular: 1}}
	require.NoError(t, a.sup.Admit(Authorization{TaskID: "ta", Tool: hwconfig.ToolMoveBaseTo}, goal))
	ctx, cancel := context.WithCancel(context.Background())
	done := drive(b, ctx, "tb", -1, 1.5)
	waitFor(t, func() bool { return len(b.drv.sentCommands()) == 1 }, "a's dry run held a corridor")
	cancel()
	outcomeWithin(t, b, done, 30*time.Second)
}
