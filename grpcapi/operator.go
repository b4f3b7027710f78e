package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/events"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Approvals is the approval service as the operator's RPCs use it: the
// same methods the HTTP operator routes call, so validation, the latch
// checks and the audit record are the same. *approval.Service implements
// it. Robots is also the list of robot ids the e-stop, reset and fault
// RPCs check a robot_id against: the approval service decides for every
// robot of the bridge, so it is the one place that already knows them.
type Approvals interface {
	Robots() []string
	ListRobot(status, robotID string) []approval.Approval
	Approve(ctx context.Context, id, by string, opts approval.ApproveOptions) (approval.Approval, error)
	Deny(ctx context.Context, id, by, reason string) (approval.Approval, error)
	GrantsRobot(robotID string) []approval.Grant
	Grant(id string) (approval.Grant, error)
	CreateGrantFor(ctx context.Context, robotID, by string, scope approval.Scope, ttl time.Duration) (approval.Grant, error)
	RevokeWith(ctx context.Context, grantID, by string, opts approval.RevokeOptions) (approval.Grant, error)
}

var _ Approvals = (*approval.Service)(nil)

// AllRobots is the robot_id that names every robot of the bridge in the
// e-stop, reset and fault RPCs, as in the HTTP routes.
const AllRobots = "*"

// LatchResult is one robot's safety state after an operator changed a
// latch.
type LatchResult struct {
	// Status is the robot's supervisor's status after the change; its
	// RobotID names the robot.
	Status safety.Status
	// Text says it in one sentence.
	Text string
	// StopWarning is set when the e-stop's stop command could not be
	// delivered (the latch is set all the same).
	StopWarning string
	// NotRecorded is set when the change is in force in the supervisor but
	// its record could not be written, so a restart would not know it: a
	// *toolerr.Error of type UNAVAILABLE that says what holds and what to
	// do, the same one the HTTP routes answer with 503.
	NotRecorded error
}

// LatchRefusal is one robot's refused reset or clear: nothing changed on
// that robot.
type LatchRefusal struct {
	RobotID string
	// Err says why, a *toolerr.Error (the robot's own e-stop is still
	// engaged, say).
	Err error
}

// Latches changes the safety latches the way the HTTP routes
// POST /v1/estop, /v1/estop/reset and /v1/faults/clear do; the bridge
// implements it with the same code those routes run.
//
// robotID is always one of Approvals.Robots() or AllRobots: the service
// has resolved and checked it (an empty one, an unknown one) before it
// calls. Each method answers one LatchResult per robot it changed and one
// LatchRefusal per robot that refused, in config order, so that a change
// of every robot says what happened to each.
type Latches interface {
	// PressEStop latches the e-stop of robot robotID, or of every robot
	// at once for AllRobots, and commands each a stop. It cannot be
	// refused.
	PressEStop(ctx context.Context, robotID, by, reason string) []LatchResult
	// ResetEStop clears the e-stop latch of robot robotID, or of every
	// robot for AllRobots; a robot that refuses changes nothing.
	ResetEStop(ctx context.Context, robotID, by string) ([]LatchResult, []LatchRefusal)
	// ClearFault clears the fault latch of robot robotID, or of every
	// robot for AllRobots; a robot that refuses changes nothing.
	ClearFault(ctx context.Context, robotID, by string) ([]LatchResult, []LatchRefusal)
}

// OperatorConf configures an OperatorService.
type OperatorConf struct {
	// Approvals decides requests and manages grants, and names the robots
	// (required); pass the bridge's *approval.Service.
	Approvals Approvals
	// Latches presses and resets the e-stop and clears faults (required).
	Latches Latches
	// Tasks pauses, resumes and aborts running tasks (optional). Without
	// it PauseTask, ResumeTask and AbortTask answer UNIMPLEMENTED.
	Tasks Tasks
	// Events is the operator event bus WatchEvents streams (required).
	Events Subscriber
	// Snapshot is the hello event's data (required): the same snapshot
	// the console's event stream starts with.
	Snapshot func(ctx context.Context) (any, error)
	// Transform turns a bus event into the data clients see (optional),
	// as the console's event stream does. It defaults to the event's own
	// data.
	Transform func(events.Event) any
	// Auth authenticates the bearer token (required); only the operator
	// role passes.
	Auth Authenticator
	// Logger receives structured logs (optional). It defaults to
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of the hello event's time (optional). It defaults
	// to time.Now.
	Now func() time.Time
	// MaxStreams bounds the WatchEvents streams open at once (optional).
	// It defaults to 64.
	MaxStreams int
	// MaxRequestBytes bounds one request message (optional). It defaults
	// to approval.DefaultMaxBodyBytes, the HTTP operator routes' limit.
	MaxRequestBytes int
}

func (c *OperatorConf) fill() error {
	for _, req := range []struct {
		name  string
		isNil bool
	}{
		{"Approvals", c.Approvals == nil},
		{"Latches", c.Latches == nil},
		{"Events", c.Events == nil},
		{"Snapshot", c.Snapshot == nil},
		{"Auth", c.Auth == nil},
	} {
		if req.isNil {
			return fmt.Errorf("%w: %s is required", ErrConf, req.name)
		}
	}
	switch {
	case c.MaxStreams < 0:
		return fmt.Errorf("%w: MaxStreams must not be negative", ErrConf)
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("%w: MaxRequestBytes must not be negative", ErrConf)
	}
	if c.Transform == nil {
		c.Transform = func(e events.Event) any { return e.Data }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = defaultMaxStreams
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = approval.DefaultMaxBodyBytes
	}
	return nil
}

// OperatorService implements robotbridge.v1.OperatorService: the HTTP
// operator routes over gRPC and Connect, for the operator credential only.
// It holds no state of its own beyond its open streams.
type OperatorService struct {
	conf    OperatorConf
	log     *slog.Logger
	streams streamSlots
	down    *shutdowns
}

var _ robotbridgev1connect.OperatorServiceHandler = (*OperatorService)(nil)

// NewOperator returns an OperatorService; errors wrap ErrConf and name the
// field.
func NewOperator(conf OperatorConf) (*OperatorService, error) {
	if err := conf.fill(); err != nil {
		return nil, err
	}
	return &OperatorService{
		conf: conf, log: conf.Logger.With("component", "grpcapi.operator"),
		streams: newStreamSlots(conf.MaxStreams), down: newShutdowns(),
	}, nil
}

// operatorRole is what every RPC of OperatorService needs.
const operatorRole = toolapi.RoleOperator

// Handler returns the path prefix to mount
// ("/robotbridge.v1.OperatorService/") and its handler. Like
// Service.Handler it authenticates each RPC itself (mount it as
// toolapi.RolePublic): a missing token is UNAUTHENTICATED, any credential
// but the operator's PERMISSION_DENIED, on every method. A WatchEvents
// stream ends with UNAVAILABLE when the *http.Server serving it shuts
// down.
func (s *OperatorService) Handler() (string, http.Handler) {
	path, h := robotbridgev1connect.NewOperatorServiceHandler(s,
		connect.WithInterceptors(authInterceptor{auth: s.conf.Auth, role: operatorRole, log: s.log}),
		connect.WithReadMaxBytes(s.conf.MaxRequestBytes),
		connect.WithRecover(recovered(s.log)),
	)
	return path, s.down.wrap(h, func(p string) bool { return p == robotbridgev1connect.OperatorServiceWatchEventsProcedure })
}

// ListApprovals implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) ListApprovals(_ context.Context, req *connect.Request[robotbridgev1.ListApprovalsRequest]) (*connect.Response[robotbridgev1.ListApprovalsResponse], error) {
	status := req.Msg.GetStatus()
	if status != "" && !approval.Status(status).Valid() {
		return nil, refusal(connect.CodeInvalidArgument, toolerr.InvalidParams,
			fmt.Sprintf("status: unknown status %q (allowed: %s, or none for all)", status, joinStatuses()))
	}
	robotID := req.Msg.GetRobotId()
	if err := s.checkRobotFilter(robotID); err != nil {
		return nil, err
	}
	list := s.conf.Approvals.ListRobot(status, robotID)
	out := &robotbridgev1.ListApprovalsResponse{Approvals: make([]*robotbridgev1.Approval, 0, len(list))}
	for _, a := range list {
		pa, err := ApprovalToProto(a)
		if err != nil {
			s.log.Error("approval cannot be encoded", "approval_id", a.ID, "err", err)
			return nil, refusal(connect.CodeInternal, toolerr.Internal, "the approval list could not be encoded")
		}
		out.Approvals = append(out.Approvals, pa)
	}
	return connect.NewResponse(out), nil
}

func joinStatuses() string {
	names := make([]string, len(approval.Statuses))
	for i, st := range approval.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// Decide implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) Decide(ctx context.Context, req *connect.Request[robotbridgev1.DecideRequest]) (*connect.Response[robotbridgev1.DecideResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetApprovalId()
	var a approval.Approval
	switch d := req.Msg.GetDecision().(type) {
	case *robotbridgev1.DecideRequest_Approve:
		opts := approval.ApproveOptions{Reason: d.Approve.GetReason()}
		if g := d.Approve.GetGrant(); g != nil {
			spec, err := grantSpecOf(g.GetScope(), g.GetTtl(), "grant.", false)
			if err != nil {
				return nil, err
			}
			opts.Grant = &spec
		}
		a, err = s.conf.Approvals.Approve(ctx, id, p.Name, opts)
	case *robotbridgev1.DecideRequest_Deny:
		a, err = s.conf.Approvals.Deny(ctx, id, p.Name, d.Deny.GetReason())
	default:
		return nil, refusal(connect.CodeInvalidArgument, toolerr.InvalidParams,
			`decision: required: approve ({"approve": {}}, optionally with a reason and a grant) or deny ({"deny": {"reason": "…"}})`)
	}
	if err != nil {
		return nil, s.fail(ctx, req.Spec().Procedure, err)
	}
	out := &robotbridgev1.DecideResponse{}
	if out.Approval, err = ApprovalToProto(a); err != nil {
		return nil, s.encodeFailed(req.Spec().Procedure, err)
	}
	if a.ScopedGrantID != "" {
		if g, gerr := s.conf.Approvals.Grant(a.ScopedGrantID); gerr == nil {
			out.Grant = GrantToProto(g)
		}
	}
	return connect.NewResponse(out), nil
}

// ListGrants implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) ListGrants(_ context.Context, req *connect.Request[robotbridgev1.ListGrantsRequest]) (*connect.Response[robotbridgev1.ListGrantsResponse], error) {
	robotID := req.Msg.GetRobotId()
	if err := s.checkRobotFilter(robotID); err != nil {
		return nil, err
	}
	list := s.conf.Approvals.GrantsRobot(robotID)
	out := &robotbridgev1.ListGrantsResponse{Grants: make([]*robotbridgev1.Grant, len(list))}
	for i, g := range list {
		out.Grants[i] = GrantToProto(g)
	}
	return connect.NewResponse(out), nil
}

// CreateGrant implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) CreateGrant(ctx context.Context, req *connect.Request[robotbridgev1.CreateGrantRequest]) (*connect.Response[robotbridgev1.CreateGrantResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := grantSpecOf(req.Msg.GetScope(), req.Msg.GetTtl(), "", true)
	if err != nil {
		return nil, err
	}
	// The approval service checks robot_id (required with several robots)
	// exactly as POST /v1/grants has it checked.
	g, err := s.conf.Approvals.CreateGrantFor(ctx, req.Msg.GetRobotId(), p.Name, spec.Scope, spec.TTL)
	if err != nil {
		return nil, s.fail(ctx, req.Spec().Procedure, err)
	}
	return connect.NewResponse(&robotbridgev1.CreateGrantResponse{Grant: GrantToProto(g)}), nil
}

// RevokeGrant implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) RevokeGrant(ctx context.Context, req *connect.Request[robotbridgev1.RevokeGrantRequest]) (*connect.Response[robotbridgev1.RevokeGrantResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	g, err := s.conf.Approvals.RevokeWith(ctx, req.Msg.GetGrantId(), p.Name, approval.RevokeOptions{Reason: req.Msg.GetReason()})
	if err != nil {
		return nil, s.fail(ctx, req.Spec().Procedure, err)
	}
	return connect.NewResponse(&robotbridgev1.RevokeGrantResponse{Grant: GrantToProto(g)}), nil
}

// EStop implements robotbridgev1connect.OperatorServiceHandler. Without a
// robot_id it presses every robot's e-stop: an e-stop is never refused for
// a missing argument, and one naming a robot nobody can place stops every
// robot, as POST /v1/estop does.
func (s *OperatorService) EStop(ctx context.Context, req *connect.Request[robotbridgev1.EStopRequest]) (*connect.Response[robotbridgev1.EStopResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	reason := strings.TrimSpace(req.Msg.GetReason())
	if reason == "" {
		reason = "e-stop pressed"
	}
	target := strings.TrimSpace(req.Msg.GetRobotId())
	switch {
	case target == "":
		target = AllRobots
	case target != AllRobots && !slices.Contains(s.conf.Approvals.Robots(), target):
		reason += fmt.Sprintf(" (robot_id %q is not served here: every robot is stopped)", target)
		target = AllRobots
	}
	results := s.conf.Latches.PressEStop(ctx, target, p.Name, reason)
	if len(results) == 0 {
		return nil, s.noLatchAnswer(req.Spec().Procedure)
	}
	out := &robotbridgev1.EStopResponse{}
	if len(results) == 1 {
		r := results[0]
		out.Estop, out.Text, out.Warning, out.RobotId = estopToProto(r.Status.EStop), r.Text, r.StopWarning, s.fleetRobotID(r)
		if r.NotRecorded != nil {
			return nil, notRecorded(r.NotRecorded, out)
		}
		return connect.NewResponse(out), nil
	}
	m := manyLatches(results, nil, func(r LatchResult, l *robotbridgev1.RobotLatch) { l.Estop = estopToProto(r.Status.EStop) })
	out.Text, out.Warning, out.Robots = m.text, m.warning, m.robots
	if m.notRecorded != nil {
		return nil, notRecorded(m.notRecorded, out)
	}
	return connect.NewResponse(out), nil
}

// ResetEStop implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) ResetEStop(ctx context.Context, req *connect.Request[robotbridgev1.ResetEStopRequest]) (*connect.Response[robotbridgev1.ResetEStopResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	target, err := s.latchTarget(req.Msg.GetRobotId(), "e-stop reset")
	if err != nil {
		return nil, err
	}
	results, refused := s.conf.Latches.ResetEStop(ctx, target, p.Name)
	out := &robotbridgev1.ResetEStopResponse{}
	if err := s.latchAnswer(req.Spec().Procedure, "e-stop reset", results, refused,
		func(r LatchResult) {
			out.Estop, out.Text, out.RobotId = estopToProto(r.Status.EStop), r.Text, s.fleetRobotID(r)
		},
		func(r LatchResult, l *robotbridgev1.RobotLatch) { l.Estop = estopToProto(r.Status.EStop) },
		func(m latchSummary) { out.Text, out.Robots = m.text, m.robots },
		out,
	); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// ClearFault implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) ClearFault(ctx context.Context, req *connect.Request[robotbridgev1.ClearFaultRequest]) (*connect.Response[robotbridgev1.ClearFaultResponse], error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	target, err := s.latchTarget(req.Msg.GetRobotId(), "fault clear")
	if err != nil {
		return nil, err
	}
	results, refused := s.conf.Latches.ClearFault(ctx, target, p.Name)
	out := &robotbridgev1.ClearFaultResponse{}
	if err := s.latchAnswer(req.Spec().Procedure, "fault clear", results, refused,
		func(r LatchResult) {
			out.Fault, out.Text, out.RobotId = faultToProto(r.Status.Fault), r.Text, s.fleetRobotID(r)
		},
		func(r LatchResult, l *robotbridgev1.RobotLatch) { l.Fault = faultToProto(r.Status.Fault) },
		func(m latchSummary) { out.Text, out.Robots = m.text, m.robots },
		out,
	); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// eventTypes are the bus's event types a WatchEvents request may select.
var eventTypes = []events.Type{events.TypeState, events.TypeTask, events.TypeApproval, events.TypeSafety, events.TypeSystem}

// helloType is the first event of every WatchEvents stream.
const helloType = "hello"

// WatchEvents implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) WatchEvents(ctx context.Context, req *connect.Request[robotbridgev1.WatchEventsRequest], stream *connect.ServerStream[robotbridgev1.WatchEventsResponse]) error {
	want := map[events.Type]bool{}
	for i, t := range req.Msg.GetTypes() {
		if !slices.Contains(eventTypes, events.Type(t)) {
			return refusal(connect.CodeInvalidArgument, toolerr.InvalidParams,
				fmt.Sprintf("types[%d]: unknown event type %q (allowed: state, task, approval, safety, system, or none for all)", i, t))
		}
		want[events.Type(t)] = true
	}
	var filter func(events.Event) bool
	if len(want) > 0 {
		filter = func(e events.Event) bool { return want[e.Type] }
	}
	release, err := s.streams.acquire("WatchEvents", "read ListApprovals and ListGrants")
	if err != nil {
		return err
	}
	defer release()
	ch, stop := s.conf.Events.Subscribe(filter)
	defer stop()
	snap, err := s.conf.Snapshot(ctx)
	if err != nil {
		s.log.Warn("event stream: snapshot failed", "err", err)
		return refusal(connect.CodeUnavailable, toolerr.Unavailable, "the current state could not be read: "+err.Error())
	}
	if err := s.sendEvent(stream, 0, helloType, s.conf.Now(), snap); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return streamEnded(ctx)
		case e, ok := <-ch:
			if !ok {
				return connect.NewError(connect.CodeUnavailable,
					errors.New("this stream fell too far behind the bridge's events and was dropped; watch again for a fresh snapshot"))
			}
			if err := s.sendEvent(stream, e.Seq, string(e.Type), e.Time, s.conf.Transform(e)); err != nil {
				return err
			}
		}
	}
}

// sendEvent sends one event. An event whose data cannot be encoded is
// logged and skipped, as the console's stream skips it.
func (s *OperatorService) sendEvent(stream *connect.ServerStream[robotbridgev1.WatchEventsResponse], seq uint64, typ string, at time.Time, data any) error {
	v, err := valueOf(data)
	if err != nil {
		s.log.Error("event stream: encode event", "type", typ, "seq", seq, "err", err)
		return nil
	}
	return stream.Send(&robotbridgev1.WatchEventsResponse{Seq: seq, Type: typ, Time: timestamp(at), Data: v})
}

// grantSpecOf checks a grant's scope and TTL the way the HTTP routes'
// decoder does, before the approval service checks them against the
// robot: prefix is the field path ("grant." inside an approval).
func grantSpecOf(sc *robotbridgev1.Scope, ttl *durationpb.Duration, prefix string, scopeRequired bool) (approval.GrantSpec, error) {
	var spec approval.GrantSpec
	switch {
	case sc != nil:
		spec.Scope = ScopeFromProto(sc)
	case scopeRequired:
		return spec, refusal(connect.CodeInvalidArgument, toolerr.InvalidParams,
			prefix+`scope: required: {"tool": …} plus the tool's bounds (poses, region or rect, objects or labels)`)
	}
	if ttl == nil {
		return spec, refusal(connect.CodeInvalidArgument, toolerr.InvalidParams,
			prefix+`ttl: required: how long the grant lasts, like "600s" in JSON`)
	}
	if err := ttl.CheckValid(); err != nil {
		return spec, refusal(connect.CodeInvalidArgument, toolerr.InvalidParams, prefix+"ttl: not a valid duration: "+err.Error())
	}
	if spec.TTL = ttl.AsDuration(); spec.TTL <= 0 {
		return spec, refusal(connect.CodeInvalidArgument, toolerr.InvalidParams, fmt.Sprintf("%sttl: must be positive, got %s", prefix, spec.TTL))
	}
	return spec, nil
}

// refusal is an RPC error carrying the robotbridge.v1.Error detail with
// the type the HTTP operator routes answer, so a client can branch on the
// same closed set over every protocol.
func refusal(code connect.Code, t toolerr.Type, msg string) *connect.Error {
	return refusalOf(code, &toolerr.Error{Type: t, Message: msg})
}

// refusalOf is refusal for a whole *toolerr.Error (its suggestion kept),
// with more details after the error's own.
func refusalOf(code connect.Code, te *toolerr.Error, more ...proto.Message) *connect.Error {
	// A sentence, as the HTTP operator routes answer it.
	sentence := *te
	sentence.Message = toolerr.Sentence(te.Message)
	ce := connect.NewError(code, errors.New(sentence.Message))
	pe := errorToProto(toolapi.ErrorBodyOf(&sentence))
	for _, m := range append([]proto.Message{pe}, more...) {
		if d, err := connect.NewErrorDetail(m); err == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

// fail maps an approval service error as the HTTP operator routes do:
// the same types, the same messages, codes for the same conditions.
func (s *OperatorService) fail(ctx context.Context, procedure string, err error) error {
	var (
		ce  *connect.Error
		inv *approval.InvalidError
		nf  *approval.NotFoundError
		np  *approval.NotPendingError
		le  *approval.LatchedError
	)
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &inv):
		return refusal(connect.CodeInvalidArgument, toolerr.InvalidParams, inv.Error())
	case errors.As(err, &nf):
		return refusal(connect.CodeNotFound, toolerr.NotFound, nf.Error())
	case errors.As(err, &np):
		return refusal(connect.CodeFailedPrecondition, toolerr.Conflict, np.Error()+"; nothing changed")
	case errors.As(err, &le):
		return refusal(connect.CodeFailedPrecondition, toolerr.Conflict, le.Error())
	case errors.Is(err, approval.ErrClosed):
		return refusal(connect.CodeUnavailable, toolerr.Unavailable, "the approval service is shutting down")
	case ctx.Err() != nil:
		return ctx.Err()
	}
	s.log.Error("operator RPC failed", "procedure", procedure, "err", err)
	return refusal(connect.CodeInternal, toolerr.Internal, "the decision could not be recorded; nothing changed, try again")
}

func (s *OperatorService) encodeFailed(procedure string, err error) error {
	s.log.Error("operator RPC answer cannot be encoded", "procedure", procedure, "err", err)
	return refusal(connect.CodeInternal, toolerr.Internal, "the decision was recorded, but its answer could not be encoded; list the approvals to see it")
}

// latchRefused answers a refused reset or clear: nothing changed.
func latchRefused(err error) error {
	te := toolerr.As(err)
	return refusalOf(codeOf(te.Type), te)
}

// notRecorded answers a latch change that is in force in the supervisor
// but not on the disk, as the HTTP routes' 503 does: never OK, with the
// bridge's own UNAVAILABLE error (what holds, what to do) and the state as
// it now is as a second detail.
func notRecorded(err error, state proto.Message) error {
	return refusalOf(connect.CodeUnavailable, toolerr.As(err), state)
}
