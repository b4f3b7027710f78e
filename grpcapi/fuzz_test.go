package grpcapi

import (
	"encoding/json"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
)

// FuzzCallToolRequest feeds arbitrary bytes to the path a CallTool
// request's arguments take from the wire to the tool API: whatever
// decodes must become arguments that encoding/json can write (the tool
// API hashes and validates them as JSON) and whose echo in an envelope
// both codecs can marshal. Corpus: testdata/fuzz/FuzzCallToolRequest.
func FuzzCallToolRequest(f *testing.F) {
	seeds := []*robotbridgev1.CallToolRequest{
		{Tool: "move_base_to", Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{
			"x": structpb.NewNumberValue(1.5), "y": structpb.NewNumberValue(-2),
		}}, SessionId: "s", IdempotencyKey: "k", WaitMs: 100},
		{Tool: "move_base_to", Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{
			"x": structpb.NewNumberValue(math.NaN()), "y": structpb.NewNumberValue(math.Inf(-1)),
		}}},
		{Tool: "move_arm_to", Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{
			"joints": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(math.Inf(1)), structpb.NewNullValue()}}),
			"nested": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"k": {}}}),
		}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req robotbridgev1.CallToolRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		args := argumentsOf(req.GetArguments())
		if _, err := json.Marshal(args); err != nil {
			t.Fatalf("arguments the tool API cannot encode: %v", err)
		}
		v, err := valueOf(args)
		if err != nil {
			t.Fatalf("arguments cannot be echoed: %v", err)
		}
		if _, err := protojson.Marshal(v); err != nil {
			t.Fatalf("echo breaks the Connect JSON codec: %v", err)
		}
		_ = checkIDs("session_id", req.GetSessionId(), "idempotency_key", req.GetIdempotencyKey())
	})
}
