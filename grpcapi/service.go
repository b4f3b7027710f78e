package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Tools is the tool API as this front end needs it: the one call path and
// the registry it lists. *toolapi.Server implements it.
type Tools interface {
	Call(ctx context.Context, p toolapi.Principal, req toolapi.CallRequest) toolapi.Envelope
	Registry() *toolapi.Registry
}

// TaskReader reads one task for WatchTask. toolapi.Tasks (the action
// runner, and the bridge's durable view of it) implements it.
type TaskReader interface {
	// Get returns a snapshot of the task; a *toolerr.Error of type
	// NOT_FOUND for an unknown id.
	Get(id string) (actions.TaskView, error)
}

// Subscriber is the event bus as the streams need it. *events.Bus
// implements it: events.TypeTask carries an actions.TaskView after every
// task change.
type Subscriber interface {
	Subscribe(filter func(events.Event) bool) (<-chan events.Event, func())
}

// Authenticator maps a request's headers (gRPC metadata) to the caller.
// toolapi.Tokens implements it, so this front end accepts exactly the
// bearer tokens the HTTP API and MCP accept.
type Authenticator interface {
	Authenticate(h http.Header) (toolapi.Principal, error)
}

var (
	_ Tools                                   = (*toolapi.Server)(nil)
	_ Authenticator                           = toolapi.Tokens{}
	_ TaskReader                              = toolapi.Tasks(nil)
	_ Subscriber                              = (*events.Bus)(nil)
	_ robotbridgev1connect.ToolServiceHandler = (*Service)(nil)
)

// ErrConf is the root of every configuration error of New.
var ErrConf = errors.New("grpcapi: invalid conf")

// toolRole is what every RPC of ToolService needs: the agent's role (the
// operator's includes it), as the HTTP tool routes do.
const toolRole = toolapi.RoleAgent

// maxIDLen bounds session ids and idempotency keys, as the HTTP API does.
const maxIDLen = 256

// Conf configures a Service.
type Conf struct {
	// Tools is the tool API every RPC goes through (required).
	Tools Tools
	// Auth authenticates the bearer token in the authorization header
	// (required); pass the bridge's toolapi.Tokens.
	Auth Authenticator
	// Tasks reads the tasks WatchTask follows (required): the same task
	// source the tool API's get_task reads.
	Tasks TaskReader
	// Events is the bus whose task events WatchTask streams (required).
	Events Subscriber
	// MaxStreams bounds the WatchTask streams open at once (optional). It
	// defaults to 64. Every open stream is a subscriber that each event
	// published on the bus is offered to, so a caller opening streams
	// without end cannot slow the publishers; one over the bound is
	// answered RESOURCE_EXHAUSTED.
	MaxStreams int
	// ProgressInterval is how often WatchTask sends a progress update
	// within one status (optional). It defaults to 100 ms, ten a second,
	// the rate of the bridge's robot state events; the runner reports
	// progress at its control rate. Transitions are always sent at once.
	ProgressInterval time.Duration
	// Logger receives structured logs (optional). It defaults to
	// slog.Default(). Tokens and arguments are never logged.
	Logger *slog.Logger
	// MaxWait caps GetTask's wait_ms (optional). It defaults to 60s,
	// get_task's schema maximum, so a longer wait is shortened as over
	// HTTP instead of failing validation.
	MaxWait time.Duration
	// MaxRequestBytes bounds one request message (optional). It defaults
	// to 1 MiB, the HTTP API's body limit; a larger one is answered
	// RESOURCE_EXHAUSTED.
	MaxRequestBytes int
}

func (c *Conf) fill() error {
	switch {
	case c.Tools == nil:
		return fmt.Errorf("%w: Tools is required", ErrConf)
	case c.Auth == nil:
		return fmt.Errorf("%w: Auth is required", ErrConf)
	case c.Tasks == nil:
		return fmt.Errorf("%w: Tasks is required", ErrConf)
	case c.Events == nil:
		return fmt.Errorf("%w: Events is required", ErrConf)
	case c.MaxStreams < 0:
		return fmt.Errorf("%w: MaxStreams must not be negative", ErrConf)
	case c.ProgressInterval < 0:
		return fmt.Errorf("%w: ProgressInterval must not be negative", ErrConf)
	case c.MaxWait < 0:
		return fmt.Errorf("%w: MaxWait must not be negative", ErrConf)
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("%w: MaxRequestBytes must not be negative", ErrConf)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxWait == 0 {
		c.MaxWait = 60 * time.Second
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 1 << 20
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = defaultMaxStreams
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = 100 * time.Millisecond
	}
	return nil
}

// defaultMaxStreams is the default bound of a service's open streams.
const defaultMaxStreams = 64

// Service implements robotbridge.v1.ToolService on top of the tool API.
// It holds no state of its own: everything that matters (idempotency,
// loop guard, tasks) lives behind Tools.
type Service struct {
	conf    Conf
	log     *slog.Logger
	streams streamSlots
	down    *shutdowns
}

// New returns a Service; it fails if conf lacks Tools or Auth. Errors wrap
// ErrConf and name the field.
func New(conf Conf) (*Service, error) {
	if err := conf.fill(); err != nil {
		return nil, err
	}
	return &Service{
		conf: conf, log: conf.Logger.With("component", "grpcapi"),
		streams: newStreamSlots(conf.MaxStreams), down: newShutdowns(),
	}, nil
}

// Handler returns the path prefix to mount ("/robotbridge.v1.ToolService/")
// and its handler, which speaks gRPC, gRPC-Web and Connect. Plain gRPC
// clients need HTTP/2: serve it over TLS or enable unencrypted HTTP/2 on
// the http.Server (Protocols.SetUnencryptedHTTP2). The handler does its
// own authentication, answering UNAUTHENTICATED or PERMISSION_DENIED in
// the caller's protocol, so mount it without the HTTP middleware's role
// check (toolapi.RolePublic); behind it, it uses the principal the
// middleware found. A WatchTask stream ends with UNAVAILABLE when the
// *http.Server serving it shuts down.
func (s *Service) Handler() (string, http.Handler) {
	path, h := robotbridgev1connect.NewToolServiceHandler(s,
		connect.WithInterceptors(authInterceptor{auth: s.conf.Auth, role: toolRole, log: s.log}),
		connect.WithReadMaxBytes(s.conf.MaxRequestBytes),
		connect.WithRecover(recovered(s.log)),
	)
	return path, s.down.wrap(h, func(p string) bool { return p == robotbridgev1connect.ToolServiceWatchTaskProcedure })
}

// recovered turns a panic in a handler into INTERNAL without its text, so
// the client never sees internals and the connection survives.
func recovered(log *slog.Logger) func(context.Context, connect.Spec, http.Header, any) error {
	return func(_ context.Context, spec connect.Spec, _ http.Header, v any) error {
		log.Error("rpc panic", "procedure", spec.Procedure, "panic", fmt.Sprint(v))
		return connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

// ListTools implements robotbridgev1connect.ToolServiceHandler.
func (s *Service) ListTools(context.Context, *connect.Request[robotbridgev1.ListToolsRequest]) (*connect.Response[robotbridgev1.ListToolsResponse], error) {
	tools := s.conf.Tools.Registry().Tools()
	out := &robotbridgev1.ListToolsResponse{Tools: make([]*robotbridgev1.Tool, len(tools))}
	for i, t := range tools {
		pt, err := ToolToProto(t.Info())
		if err != nil {
			s.log.Error("tool cannot be listed", "tool", t.Name, "err", err)
			return nil, connect.NewError(connect.CodeInternal, errors.New("the tool list could not be encoded"))
		}
		out.Tools[i] = pt
	}
	return connect.NewResponse(out), nil
}

// CallTool implements robotbridgev1connect.ToolServiceHandler.
func (s *Service) CallTool(ctx context.Context, req *connect.Request[robotbridgev1.CallToolRequest]) (*connect.Response[robotbridgev1.CallToolResponse], error) {
	m := req.Msg
	if err := checkIDs("session_id", m.GetSessionId(), "idempotency_key", m.GetIdempotencyKey()); err != nil {
		return nil, err
	}
	env, err := s.call(ctx, toolapi.CallRequest{
		Tool: m.GetTool(), Arguments: argumentsOf(m.GetArguments()), SessionID: m.GetSessionId(),
		IdempotencyKey: m.GetIdempotencyKey(), Wait: time.Duration(m.GetWaitMs()) * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&robotbridgev1.CallToolResponse{Envelope: env}), nil
}

// GetTask implements robotbridgev1connect.ToolServiceHandler. It is the
// get_task tool, like GET /v1/tasks/{id}: a wait longer than MaxWait is
// shortened to it.
func (s *Service) GetTask(ctx context.Context, req *connect.Request[robotbridgev1.GetTaskRequest]) (*connect.Response[robotbridgev1.GetTaskResponse], error) {
	m := req.Msg
	if err := checkIDs("session_id", m.GetSessionId()); err != nil {
		return nil, err
	}
	args := map[string]any{"task_id": m.GetTaskId()}
	if ms := int64(m.GetWaitMs()); ms > 0 {
		args["wait_ms"] = float64(min(ms, s.conf.MaxWait.Milliseconds()))
	}
	env, err := s.call(ctx, toolapi.CallRequest{Tool: toolapi.ToolGetTask, Arguments: args, SessionID: m.GetSessionId()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&robotbridgev1.GetTaskResponse{Envelope: env}), nil
}

// CancelTask implements robotbridgev1connect.ToolServiceHandler. It is the
// cancel_task tool, like POST /v1/tasks/{id}/cancel.
func (s *Service) CancelTask(ctx context.Context, req *connect.Request[robotbridgev1.CancelTaskRequest]) (*connect.Response[robotbridgev1.CancelTaskResponse], error) {
	m := req.Msg
	if err := checkIDs("session_id", m.GetSessionId()); err != nil {
		return nil, err
	}
	env, err := s.call(ctx, toolapi.CallRequest{
		Tool:      toolapi.ToolCancelTask,
		Arguments: map[string]any{"task_id": m.GetTaskId()}, SessionID: m.GetSessionId(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&robotbridgev1.CancelTaskResponse{Envelope: env}), nil
}

// call runs req through the tool API as the authenticated caller and
// converts the envelope. An envelope that cannot be encoded becomes an
// INTERNAL envelope that still says where the robot is and which task the
// call made, so the agent can follow it with GetTask.
func (s *Service) call(ctx context.Context, req toolapi.CallRequest) (*robotbridgev1.Envelope, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	env := s.conf.Tools.Call(ctx, p, req)
	pe, err := EnvelopeToProto(env)
	if err != nil {
		s.log.Error("envelope cannot be encoded", "tool", env.Tool, "trace_id", toolapi.TraceIDFromContext(ctx), "err", err)
		pe, _ = EnvelopeToProto(toolapi.Envelope{
			Tool: env.Tool, Robot: env.Robot, Task: env.Task,
			Error: toolapi.ErrorBodyOf(toolerr.New(toolerr.Internal, "the result could not be encoded")),
		})
	}
	return pe, nil
}

// checkIDs rejects an over-long session id or idempotency key (pairs of
// field name and value) as INVALID_ARGUMENT: like the HTTP API's 400, it
// is a malformed request, not a tool failure.
func checkIDs(fieldValue ...string) error {
	for i := 0; i+1 < len(fieldValue); i += 2 {
		if len(fieldValue[i+1]) > maxIDLen {
			return connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("%s is %d bytes long; allowed: at most %d", fieldValue[i], len(fieldValue[i+1]), maxIDLen))
		}
	}
	return nil
}
