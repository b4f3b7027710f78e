package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// streamSlots bounds the streams open at once.
type streamSlots chan struct{}

func newStreamSlots(n int) streamSlots { return make(streamSlots, n) }

// acquire takes a slot, or answers RESOURCE_EXHAUSTED naming what to do
// instead; release gives it back.
func (s streamSlots) acquire(what, instead string) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	default:
		return nil, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%d %s streams are open already, the most this bridge serves at once; close one, or %s", cap(s), what, instead))
	}
}

// WatchTask implements robotbridgev1connect.ToolServiceHandler: the task
// as it is, then each change published on the bus, until the task ends.
//
// The subscription is made before the task is read, so no change between
// the two is lost. An event the snapshot already reflects (published
// before it, delivered after) is skipped: a change is sent only when it is
// not older than the last one sent (its updated_at) and differs from it,
// so the stream never steps back. A subscription the bus drops for
// falling behind is renewed and the task read again, so what the stream
// sends is always true at the moment it is sent, even if it skipped some
// intermediate progress. Progress within one status is sent at most once
// per Conf.ProgressInterval (the newest update winning), so a long motion
// does not flood the stream at the control rate; every transition, and
// the final task, is sent at once.
func (s *Service) WatchTask(ctx context.Context, req *connect.Request[robotbridgev1.WatchTaskRequest], stream *connect.ServerStream[robotbridgev1.WatchTaskResponse]) error {
	id := req.Msg.GetTaskId()
	if id == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("task_id: required: the id from an envelope's task"))
	}
	if err := checkIDs("task_id", id); err != nil {
		return err
	}
	p, err := principal(ctx)
	if err != nil {
		return err
	}
	release, err := s.streams.acquire("WatchTask", "poll GetTask with wait_ms")
	if err != nil {
		return err
	}
	defer release()

	filter := func(e events.Event) bool {
		v, ok := e.Data.(actions.TaskView)
		return ok && e.Type == events.TypeTask && v.ID == id
	}
	ch, stop := s.conf.Events.Subscribe(filter)
	defer func() { stop() }()
	v, err := s.conf.Tasks.Get(id)
	if err != nil {
		return s.taskError(ctx, id, err)
	}
	if !mayWatch(p, v) {
		return connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("task %s was requested by another credential; only that credential or the operator may watch it", id))
	}
	// last is the newest state accepted; sent the status and time of the
	// newest sent. A change of status (a transition) is sent at once; a
	// progress update within the same status at most once per
	// ProgressInterval, the newest winning (held until then).
	last := v
	if err := s.sendTask(ctx, stream, v); err != nil || v.Terminal() {
		return err
	}
	sent, sentAt := v.Status, time.Now()
	var (
		held   bool
		timer  *time.Timer
		timerC <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	flush := func() error {
		held, timerC = false, nil
		sent, sentAt = last.Status, time.Now()
		return s.sendTask(ctx, stream, last)
	}
	for {
		select {
		case <-ctx.Done():
			return streamEnded(ctx)
		case <-timerC:
			if held {
				if err := flush(); err != nil {
					return err
				}
			}
			timerC = nil
			continue
		case e, ok := <-ch:
			if !ok {
				// Dropped for falling behind: subscribe again, then read
				// the task as it is now.
				ch, stop = s.conf.Events.Subscribe(filter)
				if v, err = s.conf.Tasks.Get(id); err != nil {
					return s.taskError(ctx, id, err)
				}
			} else {
				v = e.Data.(actions.TaskView)
			}
		}
		if !changedSince(last, v) {
			continue
		}
		last = v
		if since := time.Since(sentAt); v.Status == sent && !v.Terminal() && since < s.conf.ProgressInterval {
			held = true
			if timerC == nil {
				timer = time.NewTimer(s.conf.ProgressInterval - since)
				timerC = timer.C
			}
			continue
		}
		if err := flush(); err != nil || v.Terminal() {
			return err
		}
	}
}

// mayWatch reports whether p may follow task v: the credential that made
// it, or the operator.
func mayWatch(p toolapi.Principal, v actions.TaskView) bool {
	return p.Role.Allows(toolapi.RoleOperator) || (p.Name != "" && v.Principal == p.Name)
}

// changedSince reports whether v is a later state of the task than last:
// not older, and not the same.
func changedSince(last, v actions.TaskView) bool {
	if v.UpdatedAt.Before(last.UpdatedAt) {
		return false
	}
	same := v.Status == last.Status && v.Progress == last.Progress && v.Text == last.Text &&
		v.UpdatedAt.Equal(last.UpdatedAt) && (v.Error == nil) == (last.Error == nil)
	return !same
}

func (s *Service) sendTask(ctx context.Context, stream *connect.ServerStream[robotbridgev1.WatchTaskResponse], v actions.TaskView) error {
	t, err := TaskToProto(v)
	if err != nil {
		s.log.Error("task cannot be encoded", "task_id", v.ID, "trace_id", toolapi.TraceIDFromContext(ctx), "err", err)
		return connect.NewError(connect.CodeInternal, fmt.Errorf("task %s could not be encoded; follow it with GetTask", v.ID))
	}
	return stream.Send(&robotbridgev1.WatchTaskResponse{Task: t})
}

// taskError answers a failed read of the task: NOT_FOUND for an unknown
// id, otherwise the code of the error's type.
func (s *Service) taskError(ctx context.Context, id string, err error) error {
	var te *toolerr.Error
	if !errors.As(err, &te) {
		s.log.Error("task read failed", "task_id", id, "trace_id", toolapi.TraceIDFromContext(ctx), "err", err)
		return connect.NewError(connect.CodeInternal, fmt.Errorf("task %s could not be read", id))
	}
	if te.Type == toolerr.NotFound {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("no task %q on this bridge", id))
	}
	return connect.NewError(codeOf(te.Type), errors.New(te.Message))
}

// codeOf is the RPC code closest to an error type, for RPC errors that
// carry one (the OperatorService's refusals, a task that cannot be read).
func codeOf(t toolerr.Type) connect.Code {
	switch t {
	case toolerr.InvalidParams:
		return connect.CodeInvalidArgument
	case toolerr.NotFound, toolerr.UnknownTool:
		return connect.CodeNotFound
	case toolerr.PermissionDenied:
		return connect.CodePermissionDenied
	case toolerr.Conflict, toolerr.EStopActive, toolerr.RobotBusy, toolerr.ApprovalPending:
		return connect.CodeFailedPrecondition
	case toolerr.Unavailable:
		return connect.CodeUnavailable
	case toolerr.RateLimited:
		return connect.CodeResourceExhausted
	case toolerr.Timeout:
		return connect.CodeDeadlineExceeded
	}
	return connect.CodeInternal
}

// TaskToProto converts a task as the runner reports it. It fails only when
// its arguments or result hold something no JSON encoder could write.
func TaskToProto(v actions.TaskView) (*robotbridgev1.Task, error) {
	args, err := structOf(v.Arguments)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	if args == nil {
		args, _ = structOf(map[string]any{})
	}
	result, err := structOf(v.Result)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	out := &robotbridgev1.Task{
		Id: v.ID, Tool: v.Tool, Arguments: args, Status: string(v.Status),
		Progress: &robotbridgev1.Progress{Fraction: v.Progress.Fraction, Text: v.Progress.Text},
		Text:     v.Text, Result: result, ApprovalId: v.ApprovalID, SessionId: v.SessionID, RequestedBy: v.Principal,
		CreatedAt: timestamp(v.CreatedAt), UpdatedAt: timestamp(v.UpdatedAt),
	}
	if v.Error != nil {
		body := toolapi.ErrorBodyOf(v.Error)
		details, err := structOf(body.Details)
		if err != nil {
			return nil, fmt.Errorf("error details: %w", err)
		}
		out.Error = errorToProto(body)
		out.Error.Details = details
	}
	return out, nil
}
