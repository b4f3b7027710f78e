package mqtt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
)

// schemas compiles the committed JSON Schemas.
func schemas(t testing.TB) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := map[string]*jsonschema.Schema{}
	for _, name := range []string{"state", "command", "ack", "event"} {
		raw, err := mqtt.Schemas.ReadFile("schema/" + name + ".schema.json")
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		require.NoError(t, err)
		url := "mem://" + name + ".schema.json"
		require.NoError(t, c.AddResource(url, doc))
		s, err := c.Compile(url)
		require.NoError(t, err, name)
		out[name] = s
	}
	return out
}

func validate(t testing.TB, s *jsonschema.Schema, raw []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	return s.Validate(v)
}

// simState is a real state of the bundled simulator with every part set:
// arm, gripper, battery, faults and detections.
func simState(t testing.TB) robot.State {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "mqtt-sim.yaml"))
	require.NoError(t, err)
	s, err := sim.New(cfg)
	require.NoError(t, err)
	s.Step(time.Second)
	st := s.State()
	st.Faults = []string{"bumper"}
	if len(st.Detections) == 0 {
		st.Detections = []robot.Detection{{Label: "cup", BBox: [4]float64{1, 2, 30, 40}, Confidence: 0.9, Depth: 1.5, Stamp: st.Stamp}}
	}
	return st
}

func TestSchema_EveryPayloadTheTransportWritesIsValid(t *testing.T) {
	sc := schemas(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := simState(t)
	base, err := mqtt.CommandFrom(robot.Command{ID: "t1-1", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 1, Y: 2, Theta: 0.5}, MaxLinear: 0.8, MaxAngular: 1.5}}, now, now.Add(time.Second))
	require.NoError(t, err)
	arm, err := mqtt.CommandFrom(robot.Command{ID: "t1-2", Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: []float64{0, 0.5, 1, 0}, VelocityScale: 0.5}}, now, now.Add(time.Second))
	require.NoError(t, err)
	grip, err := mqtt.CommandFrom(robot.Command{ID: "t1-3", Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{Close: true, Force: 20, ObjectID: "cup_1"}}, now, now.Add(time.Second))
	require.NoError(t, err)
	fenced, err := mqtt.CommandFrom(robot.Command{ID: "t1-4", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 1}, MaxLinear: 0.8, MaxAngular: 1.5}, Epoch: mqtt.MaxEpoch, Bridge: "bridge-a.1_x"}, now, now.Add(time.Second))
	require.NoError(t, err)
	tests := []struct {
		name, schema string
		v            any
	}{
		{"simulator state", "state", mqtt.StateFrom(st, "boot-1", 7, now)},
		{"base-only state without battery", "state", mqtt.StateFrom(robot.State{Base: robot.Pose2D{X: 1}}, "b", 1, now)},
		{"move_base command", "command", base},
		{"move_arm command", "command", arm},
		{"gripper command", "command", grip},
		{"stop command", "command", mqtt.Command{V: 1, ID: "stop-1", Action: mqtt.ActionStop, Issued: now}},
		{"refresh command", "command", mqtt.Command{V: 1, ID: "refresh-1", Action: mqtt.ActionRefresh, Issued: now}},
		{"cluster move_base command", "command", fenced},
		{"cluster stop command", "command", mqtt.Command{V: 1, ID: "stop-2", Action: mqtt.ActionStop, Issued: now, Epoch: 7, Bridge: "b"}},
		{"cluster refresh command", "command", mqtt.Command{V: 1, ID: "refresh-2", Action: mqtt.ActionRefresh, Issued: now, Epoch: 7, Bridge: "b"}},
		{"accepted ack", "ack", mqtt.Ack{V: 1, ID: "t1-1", Status: mqtt.AckAccepted, Stamp: now}},
		{"failed ack", "ack", mqtt.Ack{V: 1, ID: "t1-1", Status: mqtt.AckFailed, Reason: "deadline passed", Stamp: now, Duplicate: true}},
		{"event", "event", mqtt.Event{V: 1, Kind: "watchdog", Detail: "no refresh", Stamp: now}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.v)
			require.NoError(t, err)
			require.NoError(t, validate(t, sc[tc.schema], raw), "%s", raw)
		})
	}
}

func TestSchema_AndDecoderAgreeOnBadPayloads(t *testing.T) {
	sc := schemas(t)
	tests := []struct {
		name, schema, raw string
		reason            mqtt.Reason
	}{
		{"state of another version", "state", `{"v":2,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`, mqtt.ReasonVersion},
		{"state without a version", "state", `{"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`, mqtt.ReasonVersion},
		{"state with an unknown field", "state", `{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false,"speed":9}`, mqtt.ReasonMalformed},
		{"state with seq 0", "state", `{"v":1,"session":"s","seq":0,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`, mqtt.ReasonInvalid},
		{"state with an empty session", "state", `{"v":1,"session":"","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`, mqtt.ReasonInvalid},
		{"state with a battery over 100%", "state", `{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false,"battery":{"percent":140,"voltage":24,"charging":false}}`, mqtt.ReasonInvalid},
		{"state with a string for a number", "state", `{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":"1","y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`, mqtt.ReasonMalformed},
		{"command without a deadline", "command", `{"v":1,"id":"a","action":"move_base","issued":"2030-01-01T00:00:00Z","base":{"target":{"x":1,"y":0,"theta":0},"max_linear":1,"max_angular":1}}`, mqtt.ReasonInvalid},
		{"command whose goal does not match its action", "command", `{"v":1,"id":"a","action":"move_arm","issued":"2030-01-01T00:00:00Z","deadline":"2030-01-01T00:00:01Z","base":{"target":{"x":1,"y":0,"theta":0},"max_linear":1,"max_angular":1}}`, mqtt.ReasonInvalid},
		{"stop carrying a goal", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","gripper":{"close":true}}`, mqtt.ReasonInvalid},
		{"command of an unknown action", "command", `{"v":1,"id":"a","action":"dance","issued":"2030-01-01T00:00:00Z"}`, mqtt.ReasonInvalid},
		{"command with a negative epoch", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":-1}`, mqtt.ReasonMalformed},
		{"command with a fractional epoch", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":1.5}`, mqtt.ReasonMalformed},
		{"command with an epoch over 2^53-1", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":9007199254740992}`, mqtt.ReasonInvalid},
		{"command with a string epoch", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":"3"}`, mqtt.ReasonMalformed},
		{"command with an empty bridge", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","bridge":""}`, mqtt.ReasonInvalid},
		{"command with an upper-case bridge", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","bridge":"A"}`, mqtt.ReasonInvalid},
		{"command with a bridge that is a topic", "command", `{"v":1,"id":"a","action":"refresh","issued":"2030-01-01T00:00:00Z","bridge":"a/b"}`, mqtt.ReasonInvalid},
		{"command with a bridge of 33 characters", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","bridge":"abcdefghijabcdefghijabcdefghijabc"}`, mqtt.ReasonInvalid},
		{"command with a bridge starting with a dash", "command", `{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","bridge":"-a"}`, mqtt.ReasonInvalid},
		{"failed ack without a reason", "ack", `{"v":1,"id":"a","status":"failed","stamp":"2030-01-01T00:00:00Z"}`, mqtt.ReasonInvalid},
		{"ack of an unknown status", "ack", `{"v":1,"id":"a","status":"maybe","stamp":"2030-01-01T00:00:00Z"}`, mqtt.ReasonInvalid},
		{"ack without an id", "ack", `{"v":1,"id":"","status":"accepted","stamp":"2030-01-01T00:00:00Z"}`, mqtt.ReasonInvalid},
	}
	decode := map[string]func([]byte) error{
		"state":   func(b []byte) error { _, err := mqtt.DecodeState(b); return err },
		"command": func(b []byte) error { _, err := mqtt.DecodeCommand(b); return err },
		"ack":     func(b []byte) error { _, err := mqtt.DecodeAck(b); return err },
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a payload that breaks the contract, Then the schema
			// rejects it and the decoder drops it for the named reason.
			require.Error(t, validate(t, sc[tc.schema], []byte(tc.raw)), "the schema accepts it")
			err := decode[tc.schema]([]byte(tc.raw))
			var pe *mqtt.PayloadError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.reason, pe.Reason, "%v", err)
		})
	}
}

func TestDecode_DropsWhatIsNotOneJSONObjectOfTheRightSize(t *testing.T) {
	big := `{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false,"faults":["` + strings.Repeat("x", mqtt.MaxPayload) + `"]}`
	tests := []struct {
		name   string
		raw    string
		reason mqtt.Reason
	}{
		{"oversized, before parsing", big, mqtt.ReasonOversized},
		{"empty", ``, mqtt.ReasonMalformed},
		{"not JSON", `online`, mqtt.ReasonMalformed},
		{"an array", `[1,2]`, mqtt.ReasonMalformed},
		{"two objects", `{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false} {}`, mqtt.ReasonMalformed},
		{"a number too large for a float", `{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":1e999,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`, mqtt.ReasonMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mqtt.DecodeState([]byte(tc.raw))
			var pe *mqtt.PayloadError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.reason, pe.Reason, "%v", err)
		})
	}
}

func TestDecode_StateRoundTripsTheSimulatorsState(t *testing.T) {
	st := simState(t)
	now := st.Stamp
	raw, err := json.Marshal(mqtt.StateFrom(st, "boot-1", 3, now))
	require.NoError(t, err)
	p, err := mqtt.DecodeState(raw)
	require.NoError(t, err)
	got := p.RobotState()
	require.Equal(t, st.Base, got.Base)
	require.Equal(t, st.Joints, got.Joints)
	require.Equal(t, st.Gripper, got.Gripper)
	require.True(t, got.Battery.Known)
	require.InDelta(t, st.Battery.Percent, got.Battery.Percent, 1e-9)
	require.Equal(t, st.Faults, got.Faults)
	require.Len(t, got.Detections, len(st.Detections))
	require.Equal(t, uint64(3), p.Seq)
	require.Equal(t, "boot-1", p.Session)
}

// FuzzDecode throws arbitrary bytes at every decoder: none may panic, an
// accepted payload must be valid against its schema, and every rejection
// is a *PayloadError with one of the documented reasons.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"session":"s","seq":1,"stamp":"2030-01-01T00:00:00Z","base":{"x":0,"y":0,"theta":0},"velocity":{"v":0,"w":0},"estop":false}`,
		`{"v":1,"id":"a","action":"move_base","issued":"2030-01-01T00:00:00Z","deadline":"2030-01-01T00:00:01Z","base":{"target":{"x":1,"y":0,"theta":0},"max_linear":1,"max_angular":1}}`,
		`{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z"}`,
		`{"v":1,"id":"a","action":"move_arm","issued":"2030-01-01T00:00:00Z","deadline":"2030-01-01T00:00:01Z","arm":{"positions":[0,1],"velocity_scale":0.5},"epoch":3,"bridge":"b-2"}`,
		`{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":9007199254740991,"bridge":"a"}`,
		`{"v":1,"id":"a","action":"refresh","issued":"2030-01-01T00:00:00Z","epoch":0,"bridge":""}`,
		`{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":9007199254740992}`,
		`{"v":1,"id":"a","action":"stop","issued":"2030-01-01T00:00:00Z","epoch":1e3,"bridge":"Z"}`,
		`{"v":1,"id":"a","status":"failed","reason":"no","stamp":"2030-01-01T00:00:00Z"}`,
		`{"v":1,"kind":"watchdog","stamp":"2030-01-01T00:00:00Z"}`,
		`{"v":2}`, `[]`, `null`, `{"v":1,"joints":[{"name":"","position":1}]}`,
	} {
		f.Add([]byte(seed))
	}
	sc := schemas(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		check := func(kind string, err error) {
			if err == nil {
				// An accepted payload follows its schema (the decoder is
				// at least as strict; time formats aside, which Go's
				// parser and RFC 3339 agree on for what json.Marshal
				// writes).
				var v any
				if json.Unmarshal(raw, &v) == nil {
					if verr := sc[kind].Validate(v); verr != nil && !strings.Contains(verr.Error(), "date-time") {
						t.Fatalf("%s accepted by the decoder, refused by the schema: %v\n%s", kind, verr, raw)
					}
				}
				return
			}
			var pe *mqtt.PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("%s: not a PayloadError: %v", kind, err)
			}
			known := false
			for _, r := range mqtt.Reasons {
				known = known || r == pe.Reason
			}
			if !known {
				t.Fatalf("%s: unknown reason %q", kind, pe.Reason)
			}
		}
		_, err := mqtt.DecodeState(raw)
		check("state", err)
		_, err = mqtt.DecodeCommand(raw)
		check("command", err)
		_, err = mqtt.DecodeAck(raw)
		check("ack", err)
		_, err = mqtt.DecodeEvent(raw)
		check("event", err)
	})
}

func TestCommand_EpochAndBridgeRoundTripAndAreAbsentWithoutACluster(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cmd := robot.Command{ID: "c-1", Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{Close: true}}
	// A bridge on its own: the payload's bytes are those of before clusters.
	p, err := mqtt.CommandFrom(cmd, now, now.Add(time.Second))
	require.NoError(t, err)
	raw, err := mqtt.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"id":"c-1","action":"gripper","issued":"2030-01-01T00:00:00Z","deadline":"2030-01-01T00:00:01Z","gripper":{"close":true}}`, string(raw))
	require.NotContains(t, string(raw), "epoch")
	require.NotContains(t, string(raw), "bridge")
	stop, err := mqtt.Marshal(mqtt.Command{V: 1, ID: "stop-1", Action: mqtt.ActionStop, Issued: now})
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"id":"stop-1","action":"stop","issued":"2030-01-01T00:00:00Z"}`, string(stop))
	require.NotContains(t, string(stop), "epoch")

	// In a cluster: both fields travel and reach the robot's command.
	cmd.Epoch, cmd.Bridge = 42, "bridge-b"
	p, err = mqtt.CommandFrom(cmd, now, now.Add(time.Second))
	require.NoError(t, err)
	raw, err = mqtt.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"epoch":42,"bridge":"bridge-b"`)
	got, err := mqtt.DecodeCommand(raw)
	require.NoError(t, err)
	rc, err := got.RobotCommand()
	require.NoError(t, err)
	require.Equal(t, uint64(42), rc.Epoch)
	require.Equal(t, "bridge-b", rc.Bridge)
}

func TestValidBridgeID(t *testing.T) {
	for _, ok := range []string{"a", "0", "bridge-a", "b.1_x-2", "abcdefghijabcdefghijabcdefghijab"} {
		require.True(t, mqtt.ValidBridgeID(ok), ok)
	}
	for _, bad := range []string{"", "A", "-a", ".a", "_a", "a/b", "a+", "a#", "a b", "é", "abcdefghijabcdefghijabcdefghijabc"} {
		require.False(t, mqtt.ValidBridgeID(bad), bad)
	}
}
