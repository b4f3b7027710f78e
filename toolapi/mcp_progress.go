package toolapi

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
)

// MCP progress: a tools/call that carries a progress token and waits for
// its task (a moving action with wait_ms, or get_task with wait_ms) gets
// notifications/progress while it waits, and the last one is sent before
// its result. The wait happens deep in the call path (Server.follow,
// Server.getTask) where only the context and the task id are known, so
// the call's context carries a progressWatch and the Tasks the server
// uses is wrapped in progressTasks, whose Wait follows the task on the
// event bus while the runner's Wait blocks.
//
// Each notification says where the task is in words (the message) and
// its progress as a percentage of the whole task (progress, total 100),
// the task's own fraction rounded down. The protocol requires progress to
// increase with every notification, so a change that does not raise the
// percentage (an approval, a status without new progress) sends none; the
// call's result says how the task ended.

// progressTasks is Tasks with progress notifications on Wait.
type progressTasks struct {
	Tasks
	bus *events.Bus // nil: only the first and last notifications
}

var _ Tasks = progressTasks{}

// Wait implements Tasks. Only the first Wait of a call reports progress.
func (t progressTasks) Wait(ctx context.Context, id string, max time.Duration) (actions.TaskView, error) {
	w, _ := ctx.Value(progressKey{}).(*progressWatch)
	if w == nil || !w.claimed.CompareAndSwap(false, true) {
		return t.Tasks.Wait(ctx, id, max)
	}
	stop := w.follow(ctx, t.Tasks, t.bus, id)
	v, err := t.Tasks.Wait(ctx, id, max)
	stop(v, err)
	return v, err
}

type progressKey struct{}

// withProgress returns ctx carrying w, for the Wait of the call it
// belongs to.
func withProgress(ctx context.Context, w *progressWatch) context.Context {
	return context.WithValue(ctx, progressKey{}, w)
}

// progressWatch sends one MCP call's progress notifications.
type progressWatch struct {
	session *mcp.ServerSession
	token   any
	log     *slog.Logger
	claimed atomic.Bool
	// sent and last are used by one goroutine at a time: follow's, then,
	// after it has ended, the caller of stop.
	sent bool
	last float64
}

// follow starts following task id: it subscribes to the task's events
// before it reads the task, so no change between the two is lost, and
// sends a notification for the task as it is now and for every change
// that raises its percentage. The returned stop ends that and sends the
// final state the wait returned, so the last notification leaves before
// the result.
func (w *progressWatch) follow(ctx context.Context, tasks Tasks, bus *events.Bus, id string) (stop func(actions.TaskView, error)) {
	var ch <-chan events.Event
	unsubscribe := func() {}
	if bus != nil {
		ch, unsubscribe = bus.Subscribe(func(e events.Event) bool {
			v, ok := e.Data.(actions.TaskView)
			return ok && e.Type == events.TypeTask && v.ID == id
		})
	}
	// The task as it is when the wait begins, before any change that
	// reaches the channel.
	if v, err := tasks.Get(id); err == nil {
		w.send(ctx, v)
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unsubscribe()
		for {
			select {
			case <-quit:
				// What the task published before the wait returned is
				// in the channel: send it, in order, before the end.
				for {
					select {
					case e, ok := <-ch:
						if !ok {
							return
						}
						w.send(ctx, e.Data.(actions.TaskView))
					default:
						return
					}
				}
			case <-ctx.Done():
				return
			case e, ok := <-ch:
				if !ok {
					// Dropped by the bus: the final state still goes.
					return
				}
				w.send(ctx, e.Data.(actions.TaskView))
			}
		}
	}()
	return func(v actions.TaskView, err error) {
		close(quit)
		<-done
		if err == nil {
			w.send(ctx, v)
		}
	}
}

// send notifies v when it raises the percentage (or is the first).
func (w *progressWatch) send(ctx context.Context, v actions.TaskView) {
	pct := math.Floor(math.Max(0, math.Min(1, v.Progress.Fraction)) * 100)
	if w.sent && pct <= w.last {
		return
	}
	w.sent, w.last = true, pct
	err := w.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: w.token, Progress: pct, Total: 100, Message: taskEventText(v),
	})
	if err != nil {
		w.log.Debug("mcp progress notification not sent", "task_id", v.ID, "err", err)
	}
}
