package grpcapi

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// jsonOf is what the HTTP API writes for v, decoded back.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// requireMarshals checks both codecs a connect handler may use.
func requireMarshals(t *testing.T, m proto.Message) {
	t.Helper()
	_, err := proto.Marshal(m)
	require.NoError(t, err, "binary (gRPC) codec")
	_, err = protojson.Marshal(m)
	require.NoError(t, err, "JSON (Connect) codec")
}

type inner struct {
	Deep float64 `json:"deep"`
}

type withTags struct {
	inner                // embedded: its fields are inlined
	Named      float64   `json:"named"`
	Omitted    string    `json:"omitted,omitempty"`
	Zero       time.Time `json:"zero,omitzero"`
	Skipped    int       `json:"-"`
	Untagged   int
	Bytes      []byte       `json:"bytes"`
	IntKeys    map[int]bool `json:"int_keys"`
	NilSlice   []int        `json:"nil_slice"`
	NilPointer *inner       `json:"nil_pointer"`
	Any        any          `json:"any"`
	private    float64
}

type hugeNumber struct{}

func (hugeNumber) MarshalJSON() ([]byte, error) { return []byte(`1e999`), nil }

type cyclic struct {
	Next *cyclic `json:"next"`
}

func TestValueOf(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   any
		// want is the value as JSON would decode it, with non-finite
		// numbers as their strings.
		want any
	}{
		{"nil is null", nil, nil},
		{"finite map as JSON has it", map[string]any{"a": 1.5, "b": []any{"x", true, nil}}, map[string]any{"a": 1.5, "b": []any{"x", true, nil}}},
		{"NaN in a map becomes a string", map[string]any{"x": nan}, map[string]any{"x": "NaN"}},
		{"infinities in a list become strings", []float64{inf, -inf, 2}, []any{"Infinity", "-Infinity", 2.0}},
		{"NaN in a struct field", robot.Pose2D{X: nan, Y: 1, Theta: inf}, map[string]any{"x": "NaN", "y": 1.0, "theta": "Infinity"}},
		{
			"NaN deep inside the robot state",
			robot.State{Stamp: at, Base: robot.Pose2D{X: nan}},
			func() any {
				m := jsonOf(t, robot.State{Stamp: at}).(map[string]any)
				m["base"].(map[string]any)["x"] = "NaN"
				return m
			}(),
		},
		{"json tags, embedding, omitempty, omitzero and -", withTags{
			inner: inner{Deep: nan}, Named: 1, Skipped: 9, Untagged: 3, Bytes: []byte("hi"),
			IntKeys: map[int]bool{7: true}, Any: float32(-inf), private: 1,
		}, map[string]any{
			"deep": "NaN", "named": 1.0, "Untagged": 3.0, "bytes": "aGk=", "int_keys": map[string]any{"7": true},
			"nil_slice": nil, "nil_pointer": nil, "any": "-Infinity",
		}},
		{"a number too large for a double is Infinity", map[string]any{"big": hugeNumber{}}, map[string]any{"big": "Infinity"}},
		{"time keeps its JSON form beside a NaN", map[string]any{"at": at, "v": nan}, map[string]any{"at": "2026-03-01T12:00:00Z", "v": "NaN"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a value as a tool might return it
			// When it is converted for the wire
			v, err := valueOf(tc.in)
			// Then it holds the JSON form, non-finite numbers spelled out,
			// and both codecs accept it
			require.NoError(t, err)
			require.Equal(t, tc.want, v.AsInterface())
			requireMarshals(t, v)
		})
	}
}

func TestValueOf_Unencodable(t *testing.T) {
	loop := &cyclic{}
	loop.Next = loop
	nanLoop := map[string]any{"nan": math.NaN()}
	nanLoop["self"] = nanLoop
	tests := []struct {
		name string
		in   any
	}{
		{"a channel", map[string]any{"c": make(chan int)}},
		{"a pointer cycle", loop},
		{"a map cycle beside a NaN (the reflective path)", nanLoop},
		{"a function beside a NaN", map[string]any{"nan": math.NaN(), "f": func() {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a value no JSON encoder can write
			// When it is converted
			_, err := valueOf(tc.in)
			// Then it is an error, not a panic or a hang
			require.ErrorIs(t, err, errUnencodable)
		})
	}
}

// TestTreeOf_MatchesEncodingJSON keeps the slow path honest: for finite
// values it must produce exactly what encoding/json (the HTTP API) does.
func TestTreeOf_MatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   any
	}{
		{"robot state", robot.State{
			Stamp: at, Base: robot.Pose2D{X: 1, Y: 2, Theta: 0.5},
			Joints: []robot.Joint{{Name: "shoulder", Position: 0.1}}, Faults: []string{"stall"},
		}},
		{"task data", toolapi.TaskData{
			ID: "t-1", Tool: "move_base_to", Arguments: map[string]any{"x": 1.0},
			Status: fsm.Executing, Progress: actions.Progress{Fraction: 0.5, Text: "halfway"},
		}},
		{"task view", actions.TaskView{ID: "t-2", Status: fsm.Succeeded, CreatedAt: at, UpdatedAt: at, Result: map[string]any{"ok": true}}},
		{"tags and embedding", withTags{inner: inner{Deep: 2}, Named: 1, Bytes: []byte{0, 1}, IntKeys: map[int]bool{-1: false}}},
		{"envelope", toolapi.Envelope{OK: false, Tool: "x", Robot: "idle", Error: &toolapi.ErrorBody{Type: "NOT_FOUND", Details: map[string]any{"k": []any{1.0}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a finite value
			// When the reflective walk encodes it
			tree, err := treeOf(reflect.ValueOf(tc.in), 0)
			require.NoError(t, err)
			v, err := fromTree(tree, 0)
			require.NoError(t, err)
			// Then it is what encoding/json writes
			require.Equal(t, jsonOf(t, tc.in), v.AsInterface())
		})
	}
}

func TestArgumentsOf(t *testing.T) {
	tests := []struct {
		name string
		in   *structpb.Struct
		want map[string]any
	}{
		{"absent arguments are an empty object", nil, map[string]any{}},
		{"plain values pass unchanged", mustStruct(t, map[string]any{"x": 1.5, "frame": "map"}), map[string]any{"x": 1.5, "frame": "map"}},
		{"NaN becomes its string so validation names the field", &structpb.Struct{Fields: map[string]*structpb.Value{
			"x": structpb.NewNumberValue(math.NaN()),
		}}, map[string]any{"x": "NaN"}},
		{"infinities nested in lists and objects", &structpb.Struct{Fields: map[string]*structpb.Value{
			"joints": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(math.Inf(1))}}),
			"pose":   structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"y": structpb.NewNumberValue(math.Inf(-1))}}),
		}}, map[string]any{"joints": []any{"Infinity"}, "pose": map[string]any{"y": "-Infinity"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given arguments as a client sent them
			// When they are turned into toolapi's map
			got := argumentsOf(tc.in)
			// Then they are JSON-clean
			require.Equal(t, tc.want, got)
			_, err := json.Marshal(got)
			require.NoError(t, err)
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}
