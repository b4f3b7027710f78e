package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	"github.com/robot-bridge/robot-bridge/grpcapi"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// mountGRPC serves the gRPC side of the bridge on the API's own listener,
// beside the HTTP JSON API and MCP, so there is one port and one set of
// tokens for all of them:
//
//   - robotbridge.v1.ToolService (gRPC, gRPC-Web and Connect) for agents,
//     on the tool API's one call path;
//   - robotbridge.v1.OperatorService for the operator credential only,
//     running the code of the HTTP operator routes;
//   - grpc.health.v1.Health, whose answer is the bridge's readiness;
//   - gRPC server reflection (v1 and v1alpha), so grpcurl and buf curl
//     work without the .proto files.
//
// Everything is mounted through the tool API's mux for its trace ids and
// request logs, but as public routes: the two robot-bridge services
// authenticate each RPC themselves, so a missing token is UNAUTHENTICATED
// in the caller's protocol rather than an HTTP 401 a gRPC client can only
// guess at; health and reflection need no token, like GET /healthz.
func (b *Bridge) mountGRPC() {
	tools, err := grpcapi.New(grpcapi.Conf{
		Tools: b.api, Auth: b.tokens, Tasks: fleetTasks{b}, Events: b.bus, Logger: b.conf.Logger,
	})
	if err != nil {
		// Every required field is set here: a failure is a wiring bug,
		// like a conflicting mux pattern.
		panic(fmt.Sprintf("bridge: gRPC tool service: %v", err))
	}
	operator, err := grpcapi.NewOperator(grpcapi.OperatorConf{
		Approvals: b.approvals, Latches: grpcLatches{b}, Tasks: fleetTasks{b}, Events: b.bus,
		Snapshot: b.consoleSnapshot, Transform: consoleEventData,
		Auth: b.tokens, Logger: b.conf.Logger, Now: b.clock.Now,
	})
	if err != nil {
		panic(fmt.Sprintf("bridge: gRPC operator service: %v", err))
	}
	health, err := grpcapi.NewHealth(grpcapi.HealthConf{Checks: map[string]func(context.Context) error{
		// The server as a whole and the agent's tools are ready when
		// GET /readyz is: the robot link up with state, the store
		// writable.
		"":                                   b.readyDurable,
		robotbridgev1connect.ToolServiceName: b.readyDurable,
		// The operator's methods need no robot link (an e-stop latches
		// while the link is down), only a store that records decisions.
		robotbridgev1connect.OperatorServiceName: b.operatorReady,
	}})
	if err != nil {
		panic(fmt.Sprintf("bridge: gRPC health: %v", err))
	}
	reflector := grpcreflect.NewStaticReflector(
		robotbridgev1connect.ToolServiceName,
		robotbridgev1connect.OperatorServiceName,
		grpchealth.HealthV1ServiceName,
		grpcreflect.ReflectV1ServiceName,
	)
	for _, mount := range []func() (string, http.Handler){
		tools.Handler, operator.Handler, health.Handler,
		func() (string, http.Handler) {
			path, h := grpcreflect.NewHandlerV1(reflector)
			return path, grpcapi.EndOnShutdown(h)
		},
		func() (string, http.Handler) {
			path, h := grpcreflect.NewHandlerV1Alpha(reflector)
			return path, grpcapi.EndOnShutdown(h)
		},
	} {
		path, h := mount()
		b.api.Mount(path, h, toolapi.RolePublic)
	}
}

// operatorReady is the OperatorService's health: its decisions are
// recorded before they take effect, so it serves while the store takes
// writes.
func (b *Bridge) operatorReady(ctx context.Context) error {
	if err := b.dur.st.Healthy(ctx); err != nil {
		return errors.New("store not writable")
	}
	return nil
}

// grpcLatches is the OperatorService's e-stop and fault latch: the same
// code as POST /v1/estop, /v1/estop/reset and /v1/faults/clear. grpcapi
// has checked the robot id already: a robot this bridge serves, or "*".
type grpcLatches struct{ b *Bridge }

var _ grpcapi.Latches = grpcLatches{}

// PressEStop implements grpcapi.Latches.
func (l grpcLatches) PressEStop(ctx context.Context, id, by, reason string) []grpcapi.LatchResult {
	ss, te := l.b.targets(id, true)
	if te != nil {
		// An e-stop nobody can place stops every robot.
		ss = l.b.robots
	}
	return l.results(l.b.pressEStop(ctx, ss, by, reason))
}

// ResetEStop implements grpcapi.Latches.
func (l grpcLatches) ResetEStop(ctx context.Context, id, by string) ([]grpcapi.LatchResult, []grpcapi.LatchRefusal) {
	return l.change(ctx, id, by, l.b.resetEStop)
}

// ClearFault implements grpcapi.Latches.
func (l grpcLatches) ClearFault(ctx context.Context, id, by string) ([]grpcapi.LatchResult, []grpcapi.LatchRefusal) {
	return l.change(ctx, id, by, l.b.clearFault)
}

func (l grpcLatches) change(ctx context.Context, id, by string,
	fn func(context.Context, []*robotStack, string) ([]latchChange, []latchRefusal),
) ([]grpcapi.LatchResult, []grpcapi.LatchRefusal) {
	ss, te := l.b.targets(id, false)
	if te != nil {
		return nil, []grpcapi.LatchRefusal{{RobotID: id, Err: te}}
	}
	cs, refused := fn(ctx, ss, by)
	out := make([]grpcapi.LatchRefusal, len(refused))
	for i, r := range refused {
		out[i] = grpcapi.LatchRefusal{RobotID: r.robot, Err: toolerr.As(r.err)}
	}
	return l.results(cs), out
}

func (grpcLatches) results(cs []latchChange) []grpcapi.LatchResult {
	out := make([]grpcapi.LatchResult, len(cs))
	for i, c := range cs {
		r := grpcapi.LatchResult{Status: c.st, Text: c.text, StopWarning: c.stopWarning}
		if c.notRecorded != nil {
			// Only a real error: a nil *toolerr.Error would be a non-nil error.
			r.NotRecorded = c.notRecorded
		}
		out[i] = r
	}
	return out
}

// serverProtocols are the protocols the API's http.Server speaks: HTTP/1.1
// for curl, browsers and Connect clients, and unencrypted HTTP/2 (h2c,
// prior knowledge) so that plain gRPC clients work on the loopback or
// behind a TLS-terminating proxy without the bridge holding certificates.
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}
