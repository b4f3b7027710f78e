package grpcapi

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/robot-bridge/robot-bridge/actions"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Tasks pauses, resumes and aborts running tasks as the HTTP operator
// routes POST /v1/tasks/{id}/pause|resume|abort do. *actions.Runner
// implements it.
type Tasks interface {
	Pause(ctx context.Context, id, by, reason string) (actions.TaskView, error)
	Resume(ctx context.Context, id, by string) (actions.TaskView, error)
	Abort(ctx context.Context, id, by, reason string) (actions.TaskView, error)
}

var _ Tasks = (*actions.Runner)(nil)

// maxPauseReason bounds a pause or abort reason, in characters, as the
// HTTP routes do.
const maxPauseReason = 1000

// checkReason validates a pause or abort reason.
func checkReason(reason string, required bool) error {
	n := utf8.RuneCountInString(reason)
	switch {
	case !utf8.ValidString(reason):
		return refusal(connect.CodeInvalidArgument, toolerr.InvalidParams, "reason is not valid UTF-8")
	case n > maxPauseReason:
		return refusal(connect.CodeInvalidArgument, toolerr.InvalidParams, fmt.Sprintf("reason is %d characters long; allowed: 1 to %d", n, maxPauseReason))
	case n == 0 && required:
		return refusal(connect.CodeInvalidArgument, toolerr.InvalidParams, fmt.Sprintf("reason is missing; say why the task is paused (1 to %d characters)", maxPauseReason))
	}
	return nil
}

// taskAnswer is the answer of PauseTask, ResumeTask and AbortTask: the
// task, or the refusal with the task as it now is as a second detail.
func (s *OperatorService) taskAnswer(v actions.TaskView, err error) (*robotbridgev1.Task, error) {
	var pt *robotbridgev1.Task
	if v.ID != "" {
		var cerr error
		if pt, cerr = TaskToProto(v); cerr != nil {
			return nil, refusal(connect.CodeInternal, toolerr.Internal, "the task could not be encoded")
		}
	}
	if err != nil {
		te := toolerr.As(err)
		var more []proto.Message
		if pt != nil {
			more = append(more, pt)
		}
		return nil, refusalOf(codeOf(te.Type), te, more...)
	}
	return pt, nil
}

func (s *OperatorService) tasks() (Tasks, error) {
	if s.conf.Tasks == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("this bridge does not pause, resume or abort tasks over gRPC"))
	}
	return s.conf.Tasks, nil
}

// taskAction runs one of Pause, Resume and Abort as the calling operator:
// reason (trimmed) is checked first when the action takes one (need says
// whether it must be given), then do runs, and its task or refusal is
// answered by taskAnswer.
func (s *OperatorService) taskAction(ctx context.Context, reason string, takesReason, need bool,
	do func(tk Tasks, by, reason string) (actions.TaskView, error),
) (*robotbridgev1.Task, string, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, "", err
	}
	tk, err := s.tasks()
	if err != nil {
		return nil, "", err
	}
	reason = strings.TrimSpace(reason)
	if takesReason {
		if err := checkReason(reason, need); err != nil {
			return nil, "", err
		}
	}
	v, err := do(tk, p.Name, reason)
	pt, err := s.taskAnswer(v, err)
	if err != nil {
		return nil, "", err
	}
	return pt, v.Text, nil
}

// PauseTask implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) PauseTask(ctx context.Context, req *connect.Request[robotbridgev1.PauseTaskRequest]) (*connect.Response[robotbridgev1.PauseTaskResponse], error) {
	pt, text, err := s.taskAction(ctx, req.Msg.GetReason(), true, true, func(tk Tasks, by, reason string) (actions.TaskView, error) {
		return tk.Pause(ctx, req.Msg.GetTaskId(), by, reason)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&robotbridgev1.PauseTaskResponse{Task: pt, Text: text}), nil
}

// ResumeTask implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) ResumeTask(ctx context.Context, req *connect.Request[robotbridgev1.ResumeTaskRequest]) (*connect.Response[robotbridgev1.ResumeTaskResponse], error) {
	pt, text, err := s.taskAction(ctx, "", false, false, func(tk Tasks, by, _ string) (actions.TaskView, error) {
		return tk.Resume(ctx, req.Msg.GetTaskId(), by)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&robotbridgev1.ResumeTaskResponse{Task: pt, Text: text}), nil
}

// AbortTask implements robotbridgev1connect.OperatorServiceHandler.
func (s *OperatorService) AbortTask(ctx context.Context, req *connect.Request[robotbridgev1.AbortTaskRequest]) (*connect.Response[robotbridgev1.AbortTaskResponse], error) {
	pt, text, err := s.taskAction(ctx, req.Msg.GetReason(), true, false, func(tk Tasks, by, reason string) (actions.TaskView, error) {
		return tk.Abort(ctx, req.Msg.GetTaskId(), by, reason)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&robotbridgev1.AbortTaskResponse{Task: pt, Text: text}), nil
}
