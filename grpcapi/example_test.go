package grpcapi_test

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	"github.com/robot-bridge/robot-bridge/grpcapi"
)

// A Go agent calling the bridge over gRPC without TLS (h2c). Drop
// connect.WithGRPC() and use http.DefaultClient to speak the Connect
// protocol over HTTP/1.1 instead.
func Example_client() {
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	client := robotbridgev1connect.NewToolServiceClient(&http.Client{Transport: h2c}, "http://127.0.0.1:8080", connect.WithGRPC())

	args, _ := structpb.NewStruct(map[string]any{"x": 1.0, "y": 0.5})
	req := connect.NewRequest(&robotbridgev1.CallToolRequest{Tool: "move_base_to", Arguments: args, IdempotencyKey: "move-1"})
	req.Header().Set("Authorization", "Bearer "+"<agent token from var/tokens.json>")
	resp, err := client.CallTool(context.Background(), req)
	if err != nil {
		// Transport-level only: connect.CodeOf(err) is Unauthenticated
		// without a valid token.
		fmt.Println(connect.CodeOf(err), err)
		return
	}
	env := grpcapi.EnvelopeFromProto(resp.Msg.GetEnvelope()) // the HTTP API's toolapi.Envelope
	if !env.OK {
		fmt.Println(env.Error.Type, env.Error.Message, "—", env.Robot)
		return
	}
	fmt.Println("task", env.Task.ID, env.Task.Status)
}
