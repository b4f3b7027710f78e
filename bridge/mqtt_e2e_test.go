package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// The shared scenarios of the tool API, approvals and safety, run over
// MQTT: bridge → Debian's broker → simulated robot, and a few over the
// bridge's embedded broker.

func TestMQTT_ErrorTypes(t *testing.T) { scenarioErrorTypes(t, startMQTTHarness) }

func TestMQTT_IdempotencyKeyMovesOnce(t *testing.T) {
	scenarioIdempotencyKeyMovesOnce(t, startMQTTHarness)
}

func TestMQTT_ToolCallsRepairsModelOutput(t *testing.T) { scenarioToolCalls(t, startMQTTHarness) }

func TestMQTT_PickAndPlace(t *testing.T) { scenarioPickAndPlace(t, startMQTTHarness) }

func TestMQTT_ApprovalLifecycle(t *testing.T) { scenarioApprovalLifecycle(t, startMQTTHarness) }

func TestMQTT_RevokedGrantStopsItsMotion(t *testing.T) {
	scenarioRevokedGrantStopsItsMotion(t, startMQTTHarness)
}

func TestMQTT_EStopWithdrawsThePendingApproval(t *testing.T) {
	scenarioEStopWithdrawsThePendingApproval(t, startMQTTHarness)
}

func TestMQTTEmbedded_IdempotencyKeyMovesOnce(t *testing.T) {
	scenarioIdempotencyKeyMovesOnce(t, startMQTTEmbeddedHarness)
}

func TestMQTTEmbedded_PickAndPlace(t *testing.T) { scenarioPickAndPlace(t, startMQTTEmbeddedHarness) }

// TestMQTTEmbedded_ShutdownStopsTheRobotBeforeTheBrokerGoes: the bridge's
// last act on the way down is the robot's stop, and with the embedded
// broker that stop leaves before the broker closes. (Closing the broker
// first is not reliably caught here: the broker may then deliver the
// bridge's last will, on which the robot stops too.)
func TestMQTTEmbedded_ShutdownStopsTheRobotBeforeTheBrokerGoes(t *testing.T) {
	h := startMQTT(t, true, nil)
	before := h.node.Sim().Counters().Stops

	// When the bridge stops
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.b.Stop(ctx))

	// Then the robot was stopped more than once on the way down (the
	// supervisor's stop on close, then the driver's close: its offline
	// status, on which the robot stops, and its final stop), a stop the
	// last thing in its log, and the broker is gone (the robot lost its
	// connection)
	rostest.Eventually(t, 5*time.Second, func() bool { return h.node.Sim().Counters().Stops-before >= 2 },
		"the robot was stopped %d times on the way down", h.node.Sim().Counters().Stops-before)
	log := h.node.Sim().CommandLog()
	require.Equal(t, "stop", log[len(log)-1].Op)
	rostest.Eventually(t, 10*time.Second, func() bool { return !h.node.Online() }, "the embedded broker still serves the robot")
}
