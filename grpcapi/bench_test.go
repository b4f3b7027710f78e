package grpcapi

import (
	"math"
	"testing"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// benchEnvelope is get_robot_state's envelope for a six-joint arm, the
// most frequent call an agent makes.
func benchEnvelope(x float64) toolapi.Envelope {
	joints := make([]robot.Joint, 6)
	for i := range joints {
		joints[i] = robot.Joint{Name: "joint", Position: 0.1 * float64(i)}
	}
	return toolapi.Envelope{
		OK: true, Tool: "get_robot_state", Text: "idle", Robot: "stopped at (1.00, 2.00)",
		Data: robot.State{Stamp: time.Unix(1_700_000_000, 0).UTC(), Base: robot.Pose2D{X: x, Y: 2}, Joints: joints},
	}
}

// BenchmarkEnvelopeToProto measures the conversion on the fast path
// (encoding/json) and on the reflective path a NaN forces; compare the two
// within one run.
func BenchmarkEnvelopeToProto(b *testing.B) {
	for _, bc := range []struct {
		name string
		env  toolapi.Envelope
	}{
		{"finite", benchEnvelope(1)},
		{"with_NaN", benchEnvelope(math.NaN())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EnvelopeToProto(bc.env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
