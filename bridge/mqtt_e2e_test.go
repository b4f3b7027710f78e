package bridge

import "testing"

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
