package actions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// TransitionRecord is one task transition, for the store and the audit.
type TransitionRecord struct {
	TaskID    string
	Tool      string
	Arguments map[string]any
	From      fsm.State
	To        fsm.State
	Event     fsm.Event
	At        time.Time
	// By names who caused it (an operator, the agent principal,
	// "supervisor").
	By     string
	Reason string
	// GrantID and ApprovalID are set once known.
	GrantID    string
	ApprovalID string
}

// Recorder persists transitions. RecordTransition is called synchronously
// before the motion command a transition implies is sent; when it fails
// the command is not sent. A stop is the exception: it is sent first and
// recorded right after.
type Recorder interface {
	RecordTransition(ctx context.Context, r TransitionRecord) error
}

// Observer is told of every task change (for SSE and metrics). It is
// called synchronously without runner locks held and must return quickly.
type Observer interface {
	TaskChanged(TaskView)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(TaskView)

// TaskChanged implements Observer.
func (f ObserverFunc) TaskChanged(v TaskView) { f(v) }

// RunnerConf configures a Runner.
type RunnerConf struct {
	// Config is the robot's hw-config. Required.
	Config *hwconfig.Config
	// Supervisor is the safety supervisor every motion goes through.
	// Required, and started by the caller.
	Supervisor *safety.Supervisor
	// Approver asks operators (optional). Without it only tools the config
	// marks "approval: never" can run; others fail with PERMISSION_DENIED.
	Approver Approver
	// Objects resolves object ids for grasp (optional). Without it grasp
	// fails with NOT_FOUND suggesting describe_scene.
	Objects Objects
	// Clock (optional) defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) defaults to slog.Default().
	Logger *slog.Logger
	// Recorder (optional) persists transitions.
	Recorder Recorder
	// Observer (optional) is told of every task change.
	Observer Observer
	// NewID (optional) makes task ids. It defaults to "task-" + 12 random
	// hex digits.
	NewID func() string
	// ArmVelocityScale (optional) is the fraction of the joint velocity
	// limits used for agent-requested arm motion, in (0, 1]. It defaults
	// to 0.5.
	ArmVelocityScale float64
	// MaxTasks (optional) bounds how many finished tasks are kept for Get
	// and List. It defaults to 1000.
	MaxTasks int
}

// Runner carries action tool calls through their lifecycle.
type Runner struct {
	cfg      *hwconfig.Config
	sup      *safety.Supervisor
	approver Approver
	clock    clockwork.Clock
	log      *slog.Logger
	rec      Recorder
	obs      Observer
	newID    func() string
	pl       *planner
	maxTasks int
	unobs    func()

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	tasks  map[string]*task // guarded by mu
	order  []string         // guarded by mu; creation order
	live   *task            // guarded by mu; the one live task
	closed bool             // guarded by mu
}

// task is one tool call. Fields marked "guarded by r.mu" are read and
// written under the runner's mutex; tmu serialises the task's transitions
// so the record written matches the transition made.
type task struct {
	id        string
	req       Request
	args      map[string]any
	plan      *plan
	m         *fsm.Machine
	tmu       sync.Mutex
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	createdAt time.Time

	// guarded by r.mu:
	progress   Progress
	text       string
	result     map[string]any
	err        *toolerr.Error
	approvalID string
	grantID    string
	updatedAt  time.Time
	changed    chan struct{}
	stepStart  []float64
	cancelBy   string
}

// NewRunner validates conf and returns a runner.
func NewRunner(conf RunnerConf) (*Runner, error) {
	if conf.Config == nil {
		return nil, errors.New("actions: RunnerConf.Config is required")
	}
	if conf.Supervisor == nil {
		return nil, errors.New("actions: RunnerConf.Supervisor is required")
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.NewID == nil {
		conf.NewID = randomID
	}
	if conf.ArmVelocityScale == 0 {
		conf.ArmVelocityScale = 0.5
	}
	if conf.ArmVelocityScale < 0 || conf.ArmVelocityScale > 1 {
		return nil, fmt.Errorf("actions: RunnerConf.ArmVelocityScale %g must be in (0, 1]", conf.ArmVelocityScale)
	}
	if conf.MaxTasks <= 0 {
		conf.MaxTasks = 1000
	}
	r := &Runner{
		cfg: conf.Config, sup: conf.Supervisor, approver: conf.Approver, clock: conf.Clock,
		log: conf.Logger.With("component", "actions"), rec: conf.Recorder, obs: conf.Observer, newID: conf.NewID,
		pl:       &planner{cfg: conf.Config, sup: conf.Supervisor, objects: conf.Objects, armScale: conf.ArmVelocityScale},
		maxTasks: conf.MaxTasks, tasks: map[string]*task{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.unobs = r.sup.AddObserver(safety.ObserverFunc(r.onSafetyEvent))
	return r, nil
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "task-" + hex.EncodeToString(b[:])
}

// --- views ---

func (r *Runner) viewLocked(t *task) TaskView {
	v := TaskView{
		ID: t.id, Tool: t.req.Tool, Arguments: cloneArgs(t.args), Status: t.m.State(), Progress: t.progress,
		Text: t.text, ApprovalID: t.approvalID, SessionID: t.req.SessionID, Principal: t.req.Principal,
		CreatedAt: t.createdAt, UpdatedAt: t.updatedAt,
	}
	if t.result != nil {
		v.Result = cloneArgs(t.result)
	}
	if t.err != nil {
		e := *t.err
		v.Error = &e
	}
	return v
}

// Get returns a task's view; NOT_FOUND for an unknown id.
func (r *Runner) Get(id string) (TaskView, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[id]
	if !ok {
		return TaskView{}, notFoundTask(id)
	}
	return r.viewLocked(t), nil
}

func notFoundTask(id string) *toolerr.Error {
	e := toolerr.New(toolerr.NotFound, "there is no task %q", id).With("task_id", id)
	e.Suggestion = "check the task id returned by the action call; tasks from before a restart may be gone"
	return e
}

// Active returns the live task, if any.
func (r *Runner) Active() (TaskView, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		return TaskView{}, false
	}
	return r.viewLocked(r.live), true
}

// List returns every kept task, oldest first.
func (r *Runner) List() []TaskView {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]TaskView, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.viewLocked(r.tasks[id]))
	}
	return out
}

// Wait returns when the task is terminal, max has elapsed or ctx ends,
// with the task's view at that moment.
func (r *Runner) Wait(ctx context.Context, id string, max time.Duration) (TaskView, error) {
	r.mu.Lock()
	t, ok := r.tasks[id]
	r.mu.Unlock()
	if !ok {
		return TaskView{}, notFoundTask(id)
	}
	if max > 0 {
		tm := r.clock.NewTimer(max)
		defer tm.Stop()
		select {
		case <-t.done:
		case <-tm.Chan():
		case <-ctx.Done():
		}
	} else {
		select {
		case <-t.done:
		default:
		}
	}
	return r.Get(id)
}

// --- transitions ---

type trOpts struct {
	by, reason string
	// mustRecord makes a recorder failure abort the transition (the
	// transition implies a motion command that must not be sent
	// unrecorded).
	mustRecord bool
	// recordAfter records after the transition (stop: sent first).
	mutate func(t *task)
}

// fire records and applies ev to t. Unless mustRecord, a recorder failure
// is logged and the transition still happens.
func (r *Runner) fire(t *task, ev fsm.Event, o trOpts) error {
	t.tmu.Lock()
	from := t.m.State()
	to, ok := fsm.Next(from, ev)
	if !ok {
		t.tmu.Unlock()
		return &fsm.TransitionError{From: from, Event: ev}
	}
	now := r.clock.Now()
	r.mu.Lock()
	rec := TransitionRecord{
		TaskID: t.id, Tool: t.req.Tool, Arguments: cloneArgs(t.args), From: from, To: to, Event: ev,
		At: now, By: o.by, Reason: o.reason, GrantID: t.grantID, ApprovalID: t.approvalID,
	}
	r.mu.Unlock()
	if r.rec != nil {
		if err := r.rec.RecordTransition(context.WithoutCancel(t.ctx), rec); err != nil {
			if o.mustRecord {
				t.tmu.Unlock()
				r.log.Error("transition not recorded; its command will not be sent", "task", t.id, "event", ev, "err", err)
				return fmt.Errorf("record %s→%s: %w", from, to, err)
			}
			r.log.Error("transition not recorded", "task", t.id, "event", ev, "err", err)
		}
	}
	// The state and the fields mutate sets change together under r.mu, so
	// no view shows a terminal status without its error.
	r.mu.Lock()
	if _, _, err := t.m.Fire(ev); err != nil {
		r.mu.Unlock()
		t.tmu.Unlock()
		return err
	}
	t.updatedAt = now
	if o.mutate != nil {
		o.mutate(t)
	}
	if to.Terminal() {
		close(t.done)
		if r.live == t {
			r.live = nil
		}
		t.cancel()
	}
	close(t.changed)
	t.changed = make(chan struct{})
	v := r.viewLocked(t)
	r.mu.Unlock()
	t.tmu.Unlock()
	r.log.Info("task transition", "task", t.id, "tool", t.req.Tool, "from", from, "to", to, "event", ev, "by", o.by)
	r.notify(v)
	return nil
}

func (r *Runner) notify(v TaskView) {
	if r.obs != nil {
		r.obs.TaskChanged(v)
	}
}

func (r *Runner) setProgress(t *task, p Progress) {
	r.mu.Lock()
	changed := t.progress.Text != p.Text || t.progress.Fraction != p.Fraction
	t.progress = p
	var v TaskView
	if changed {
		t.updatedAt = r.clock.Now()
		v = r.viewLocked(t)
	}
	r.mu.Unlock()
	if changed {
		r.notify(v)
	}
}

// --- submit ---

// Submit validates and plans a tool call, checks its limits, and creates
// a task that waits for approval or starts at once. It returns as soon as
// the task exists. Errors are *toolerr.Error; no task exists after one.
// The stop and cancel_task tools run synchronously: stop returns a
// succeeded view with no id whose Result lists the cancelled tasks;
// cancel_task returns the cancelled task's view.
func (r *Runner) Submit(ctx context.Context, req Request) (TaskView, error) {
	switch req.Tool {
	case ToolStop:
		return r.submitStop(ctx, req)
	case ToolReturnToSafePose:
		if !r.cfg.HasArm() {
			// A base-only robot's safe pose is "base stopped": stopping
			// needs no approval and cannot be made less safe.
			if err := checkKeys(ToolReturnToSafePose, req.Arguments); err != nil {
				return TaskView{}, err
			}
			v, err := r.submitStop(ctx, Request{
				Tool: ToolStop, Arguments: map[string]any{},
				SessionID: req.SessionID, Principal: req.Principal, TraceID: req.TraceID,
			})
			v.Tool, v.Arguments = ToolReturnToSafePose, cloneArgs(req.Arguments)
			v.Text = "this robot has no arm, so its safe pose is the base stopped: " + v.Text
			return v, err
		}
	case ToolCancelTask:
		id, ok, err := text(req.Arguments, "task_id")
		if err != nil {
			return TaskView{}, err
		}
		if !ok {
			return TaskView{}, invalid("task_id", nil, "a task id", "cancel_task needs task_id")
		}
		if err := checkKeys(ToolCancelTask, req.Arguments, "task_id"); err != nil {
			return TaskView{}, err
		}
		by := req.Principal
		if by == "" {
			by = "agent"
		}
		return r.Cancel(ctx, id, by)
	}
	if r.isClosed() {
		return TaskView{}, toolerr.New(toolerr.Unavailable, "the bridge is shutting down")
	}
	policy, ok := r.cfg.ActionPolicy(req.Tool)
	if !ok {
		e := toolerr.New(toolerr.UnknownTool, "%q is not an action tool this robot offers (available: %s)", req.Tool, fmtList(r.cfg.ToolNames())).
			With("closest", r.cfg.ToolNames())
		return TaskView{}, e
	}
	if err := r.refuseLatched(); err != nil {
		return TaskView{}, err
	}
	if err := r.refuseBusy(); err != nil {
		return TaskView{}, err
	}
	args := cloneArgs(req.Arguments)
	p, err := r.pl.plan(ctx, req.Tool, args)
	if err != nil {
		return TaskView{}, toolerr.As(err)
	}
	// Limits before any operator is asked.
	if err := r.sup.CheckLimits(p.commands()...); err != nil {
		te := toolerr.As(err)
		if te.Type == toolerr.SafetyViolation {
			te.Message = req.Tool + " refused before asking an operator: " + te.Message + "; nothing moved"
		}
		return TaskView{}, te
	}
	needApproval := policy.Approval != hwconfig.ApprovalNever
	if needApproval && r.approver == nil {
		e := toolerr.New(toolerr.PermissionDenied, "%s needs an operator's approval, but no approval service is configured; nothing moved", req.Tool)
		e.Suggestion = "tell the user that this bridge has no operator console for approvals; only tools configured with approval: never can run"
		return TaskView{}, e
	}
	now := r.clock.Now()
	tctx, tcancel := context.WithCancel(r.ctx)
	t := &task{
		id: r.newID(), req: req, args: args, plan: p, m: fsm.New(fsm.Requested), ctx: tctx, cancel: tcancel,
		done: make(chan struct{}), createdAt: now, updatedAt: now, changed: make(chan struct{}),
		stepStart: make([]float64, len(p.steps)),
	}
	for i := range t.stepStart {
		t.stepStart[i] = -1
	}
	t.text = "requested: " + p.preview
	// Register atomically with the busy check.
	r.mu.Lock()
	if r.live != nil {
		other := r.live
		r.mu.Unlock()
		tcancel()
		return TaskView{}, busyError(other.id, other.req.Tool, other.m.State())
	}
	if _, dup := r.tasks[t.id]; dup {
		r.mu.Unlock()
		tcancel()
		return TaskView{}, toolerr.New(toolerr.Internal, "task id %q already exists", t.id)
	}
	r.tasks[t.id] = t
	r.order = append(r.order, t.id)
	r.live = t
	r.pruneLocked()
	r.mu.Unlock()
	by := req.Principal
	if by == "" {
		by = "agent"
	}
	if r.rec != nil {
		if err := r.rec.RecordTransition(ctx, TransitionRecord{
			TaskID: t.id, Tool: req.Tool, Arguments: cloneArgs(args), To: fsm.Requested,
			At: now, By: by, Reason: p.preview,
		}); err != nil {
			r.log.Error("task creation not recorded", "task", t.id, "err", err)
		}
	}
	if !needApproval {
		_ = r.fire(t, fsm.EvPreauthorized, trOpts{by: "config", reason: "approval: never for " + req.Tool, mutate: func(t *task) {
			t.text = "authorized by the config; starting: " + p.preview
		}})
		r.wg.Add(1)
		go r.run(t, nil)
		return r.Get(t.id)
	}
	st, _, _ := r.sup.Latest()
	ar := ApprovalRequest{
		TaskID: t.id, Tool: req.Tool, Arguments: cloneArgs(args), ArgsHash: safety.ArgsHash(req.Tool, args),
		RobotID: r.cfg.Robot.ID, Preview: p.preview, Target: p.target, RobotState: st.Summary(), RequestedBy: by, SessionID: req.SessionID,
	}
	approvalID, decision, err := r.approver.Request(ctx, ar)
	if err != nil {
		te := toolerr.New(toolerr.Unavailable, "the approval request for %s could not be filed: %v; nothing moved", req.Tool, err).Wrap(err)
		te.RetryAfter = time.Second
		_ = r.fire(t, fsm.EvReject, trOpts{by: "approval", reason: err.Error(), mutate: func(t *task) {
			t.err, t.text = te, te.Message
		}})
		return TaskView{}, te
	}
	if err := r.fire(t, fsm.EvNeedApproval, trOpts{by: by, reason: "approval requested", mutate: func(t *task) {
		t.approvalID = approvalID
		t.text = "waiting for an operator to approve: " + p.preview
	}}); err != nil {
		// Cancelled or e-stopped in the meantime.
		r.approver.Withdraw(approvalID, "task ended before approval was requested")
		return r.Get(t.id)
	}
	r.wg.Add(1)
	go r.run(t, decision)
	return r.Get(t.id)
}

func (r *Runner) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func busyError(id, tool string, st fsm.State) *toolerr.Error {
	return toolerr.New(toolerr.RobotBusy, "task %s (%s) is %s; one motion task runs at a time", id, tool, st).
		With("task_id", id).With("tool", tool).With("status", string(st))
}

func (r *Runner) refuseBusy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live != nil {
		return busyError(r.live.id, r.live.req.Tool, r.live.m.State())
	}
	return nil
}

func (r *Runner) refuseLatched() error {
	s := r.sup.Status()
	if s.EStop.Active {
		return toolerr.New(toolerr.EStopActive, "the e-stop is latched (pressed by %s: %s); nothing can move until an operator resets it", s.EStop.By, orNone(s.EStop.Reason)).
			Wrap(safety.ErrEStopActive)
	}
	if s.Fault.Latched {
		e := toolerr.New(toolerr.SafetyViolation, "a fault is latched (%s); nothing moves until an operator clears it", s.Fault.Reason).
			Wrap(safety.ErrFaultLatched).With("fault", s.Fault.Reason)
		e.Suggestion = "tell the user that an operator must inspect the robot and clear the fault; do not retry"
		return e
	}
	// A motion requested while the robot cannot be reached fails fast: no
	// operator is asked to approve something that cannot be supervised.
	if !s.LinkUp || !s.HaveState {
		why := "the robot link is down"
		if s.LinkUp {
			why = "no state has arrived from the robot yet"
		}
		e := toolerr.New(toolerr.Unavailable, "%s; no motion can be requested until the bridge hears from the robot again", why).
			With("link_up", s.LinkUp)
		e.RetryAfter = linkRetryAfter
		return e
	}
	return nil
}

// linkRetryAfter is the retry hint given while the robot link is down.
const linkRetryAfter = 2 * time.Second

// operatorName names who decided, without doubling the word when the
// credential itself is called "operator".
func operatorName(by string) string {
	switch by {
	case "":
		return "an operator"
	case "operator":
		return "the operator"
	}
	return "operator " + by
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func (r *Runner) pruneLocked() {
	for len(r.order) > r.maxTasks {
		dropped := false
		for i, id := range r.order {
			if r.tasks[id].m.State().Terminal() {
				delete(r.tasks, id)
				r.order = append(r.order[:i], r.order[i+1:]...)
				dropped = true
				break
			}
		}
		if !dropped {
			return
		}
	}
}

// --- running ---

// run waits for the operator's decision (when decision is non-nil), then
// executes the task under the supervisor and ends it.
func (r *Runner) run(t *task, decision <-chan Decision) {
	defer r.wg.Done()
	if decision != nil {
		if !r.awaitDecision(t, decision) {
			return
		}
	}
	r.execute(t)
}

func (r *Runner) awaitDecision(t *task, decision <-chan Decision) bool {
	// The approval service expires requests itself; this bound only keeps
	// a task from waiting forever on a service that never answers.
	ttl := r.cfg.Safety.ApprovalTTL.D()
	if ttl <= 0 {
		ttl = time.Minute
	}
	tm := r.clock.NewTimer(ttl + 5*time.Second)
	defer tm.Stop()
	var d Decision
	var ok bool
	select {
	case d, ok = <-decision:
		if !ok {
			d = Decision{Cancelled: true, Reason: "the approval service closed the request"}
		}
	case <-tm.Chan():
		d = Decision{Expired: true, Reason: "no decision arrived from the approval service"}
		r.approver.Withdraw(r.approvalID(t), "expired in the action runner")
	case <-t.ctx.Done():
		// Cancelled, e-stopped or closing: whoever ended it made the transition.
		return false
	}
	st, _, _ := r.sup.Latest()
	switch {
	case d.Approved:
		err := r.fire(t, fsm.EvApprove, trOpts{by: d.By, reason: d.Reason, mutate: func(t *task) {
			t.grantID = d.GrantID
			t.text = "approved by " + orSomeone(d.By) + "; starting: " + t.plan.preview
		}})
		return err == nil
	case d.Expired:
		te := toolerr.New(toolerr.ApprovalExpired, "no operator decided on %s in time; nothing moved; %s; no task running", t.req.Tool, st.Summary())
		_ = r.fire(t, fsm.EvExpire, trOpts{by: "approval", reason: d.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	case d.Cancelled:
		// Withdrawn: the canceller fires the transition; make sure it ends.
		te := toolerr.New(toolerr.ActionFailed, "the approval request was withdrawn (%s); nothing moved", orNone(d.Reason))
		_ = r.fire(t, fsm.EvCancel, trOpts{by: orSomeone(d.By), reason: d.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	default:
		te := toolerr.New(toolerr.ApprovalDenied, "%s denied %s: %q; nothing moved; %s; no task running", operatorName(d.By), t.req.Tool, d.Reason, st.Summary()).
			With("reason", d.Reason).With("denied_by", d.By)
		_ = r.fire(t, fsm.EvDeny, trOpts{by: d.By, reason: d.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	}
	return false
}

func orSomeone(s string) string {
	if s == "" {
		return "an operator"
	}
	return s
}

func (r *Runner) approvalID(t *task) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return t.approvalID
}

func (r *Runner) execute(t *task) {
	r.mu.Lock()
	grant := t.grantID
	r.mu.Unlock()
	p := t.plan
	m := safety.Motion{
		Auth:     safety.Authorization{TaskID: t.id, Tool: t.req.Tool, Args: t.args, GrantID: grant},
		Steps:    p.steps,
		Deadline: p.deadline,
		Hooks: safety.Hooks{
			BeforeStart: func() error {
				return r.fire(t, fsm.EvStart, trOpts{by: "supervisor", mustRecord: true, mutate: func(t *task) {
					t.text = p.describe(0)
					t.progress = Progress{Fraction: 0, Text: p.describe(0)}
				}})
			},
			Progress: func(step int, st robot.State) { r.setProgress(t, r.progressOf(t, step, st)) },
			Stopped: func(tr safety.Trip) {
				switch tr.Kind {
				case safety.TripShutdown:
					return
				case safety.TripCancelled:
					by := tr.By
					if by == "" {
						by = r.cancelledBy(t)
					}
					_ = r.fire(t, fsm.EvCancel, trOpts{by: by, reason: tr.Detail, mutate: func(t *task) {
						t.text = "stopping: " + tr.Detail
					}})
				default:
					_ = r.fire(t, fsm.EvAbort, trOpts{by: "supervisor", reason: string(tr.Kind) + ": " + tr.Detail, mutate: func(t *task) {
						t.text = "stopping: " + tr.Detail
					}})
				}
			},
			BeforeRecovery: func() error {
				name, _ := r.sup.SafePose()
				return r.fire(t, fsm.EvRecover, trOpts{
					by: "supervisor", reason: "pre-authorized return to " + name, mustRecord: true,
					mutate: func(t *task) { t.text = "stopped; returning the arm to " + name },
				})
			},
		},
	}
	out := r.sup.Execute(t.ctx, m)
	r.finish(t, out)
}

func (r *Runner) cancelledBy(t *task) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.cancelBy != "" {
		return t.cancelBy
	}
	return "agent"
}

// finish maps the supervisor's outcome onto the task's final transitions.
func (r *Runner) finish(t *task, out safety.Outcome) {
	p := t.plan
	st := out.State
	where := r.whereNow(p, st)
	switch out.Kind {
	case safety.OutcomeSucceeded:
		res := p.result(st)
		_ = r.fire(t, fsm.EvSucceed, trOpts{by: "supervisor", mutate: func(t *task) {
			t.result = res
			t.progress = Progress{Fraction: 1, Text: "done"}
			t.text = "done: " + p.goal + "; " + where
		}})
	case safety.OutcomeRejected:
		te := toolerr.As(out.Err)
		e := *te
		e.Message = te.Message + "; " + where
		ev := fsm.EvReject
		if e.Type == toolerr.EStopActive {
			ev = fsm.EvEStop
		}
		if t.m.State() == fsm.Executing {
			// Admitted and recorded but refused right after: cannot happen
			// with the gate's lock, but never leave a task hanging.
			ev = fsm.EvAbort
		}
		_ = r.fire(t, ev, trOpts{by: "supervisor", reason: te.Message, mutate: func(t *task) { t.err, t.text = &e, e.Message }})
		if ev == fsm.EvAbort {
			_ = r.fire(t, fsm.EvLatchFault, trOpts{by: "supervisor", reason: te.Message})
		}
	case safety.OutcomeCancelled:
		by := r.cancelledBy(t)
		if out.Trip != nil && out.Trip.By != "" {
			by = out.Trip.By
		}
		e := toolerr.New(toolerr.ActionFailed, "cancelled by %s after %s; %s", by, progressWords(r.view(t)), where)
		e.Suggestion = "the task was cancelled on request; ask the user before trying it again"
		_ = r.fire(t, fsm.EvStopConfirmed, trOpts{by: by, reason: "robot confirmed stopped", mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeRecovered:
		if t.m.State() == fsm.Stopping {
			_ = r.fire(t, fsm.EvRecover, trOpts{by: "supervisor", reason: out.Recovery.Text})
		}
		e := r.failureError(t, out, where)
		_ = r.fire(t, fsm.EvRecovered, trOpts{by: "supervisor", reason: out.Recovery.Text, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeFault:
		if t.m.State() == fsm.Executing {
			_ = r.fire(t, fsm.EvAbort, trOpts{by: "supervisor", reason: out.FaultReason})
		}
		e := r.failureError(t, out, where)
		_ = r.fire(t, fsm.EvLatchFault, trOpts{by: "supervisor", reason: out.FaultReason, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeEStopped:
		s := r.sup.Status()
		e := toolerr.New(toolerr.EStopActive, "the e-stop was pressed by %s (%s) during %s; the robot stopped; no recovery motion while it is latched; %s",
			s.EStop.By, orNone(s.EStop.Reason), t.req.Tool, where).Wrap(safety.ErrEStopActive)
		_ = r.fire(t, fsm.EvEStop, trOpts{by: s.EStop.By, reason: s.EStop.Reason, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeInterrupted:
		e := toolerr.New(toolerr.Unavailable, "the bridge shut down during %s; the robot was commanded to stop; %s", t.req.Tool, where)
		_ = r.fire(t, fsm.EvInterrupt, trOpts{by: "supervisor", reason: "shutdown", mutate: func(t *task) { t.err, t.text = e, e.Message }})
	}
	// A task must never stay live after its goroutine ends.
	if !t.m.State().Terminal() {
		r.log.Error("task left live after execution; interrupting", "task", t.id, "state", t.m.State())
		_ = r.fire(t, fsm.EvInterrupt, trOpts{by: "supervisor", reason: "runner invariant"})
	}
}

func (r *Runner) view(t *task) TaskView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.viewLocked(t)
}

func progressWords(v TaskView) string {
	if v.Progress.Fraction <= 0 {
		return "it had barely started"
	}
	return fmt.Sprintf("%.0f%% of it", v.Progress.Fraction*100)
}

// failureError builds the error of a task that a monitor stopped.
func (r *Runner) failureError(t *task, out safety.Outcome, where string) *toolerr.Error {
	typ := toolerr.ActionFailed
	var retry time.Duration
	what := "failed"
	if out.Trip != nil {
		switch out.Trip.Kind {
		case safety.TripDeadline:
			typ, what = toolerr.Timeout, "timed out"
		case safety.TripSilence, safety.TripLinkDown:
			typ, what = toolerr.Unavailable, "lost the robot link"
			retry = 2 * time.Second
		}
	}
	detail := "a monitor tripped"
	if out.Trip != nil {
		detail = out.Trip.Detail
	}
	var rec string
	switch out.Kind {
	case safety.OutcomeRecovered:
		rec = "robot stopped; " + out.Recovery.Text
	case safety.OutcomeFault:
		rec = "robot stopped"
		if out.Recovery.Text != "" {
			rec += "; " + out.Recovery.Text
		}
		rec += "; a fault is latched and nothing moves until an operator clears it"
	}
	e := toolerr.New(typ, "%s %s (%s); %s; %s", t.req.Tool, what, detail, rec, where)
	e.RetryAfter = retry
	if out.Trip != nil {
		e.With("monitor", string(out.Trip.Kind))
		e.Err = out.Trip.Err
	}
	e.With("recovery", out.Recovery.Text)
	if out.Kind == safety.OutcomeFault {
		e.With("fault_latched", true)
		e.Suggestion = "tell the user: the robot is stopped with a latched fault and an operator must inspect it and clear the fault before anything can move; do not retry"
	}
	return e
}

// whereNow says where the robot is, relative to the task's goal.
func (r *Runner) whereNow(p *plan, st robot.State) string {
	var parts []string
	if p.target != nil {
		d := distance(st.Base, *p.target)
		if d <= r.cfg.Base.GoalTolerance+0.01 {
			parts = append(parts, fmt.Sprintf("base stopped at %s", p.goal))
		} else {
			parts = append(parts, fmt.Sprintf("base stopped %.2f m short of %s, at (%.2f, %.2f) facing %.0f°", d, p.goal, st.Base.X, st.Base.Y, robot.Degrees(st.Base.Theta)))
		}
	} else {
		parts = append(parts, fmt.Sprintf("base stopped at (%.2f, %.2f) facing %.0f°", st.Base.X, st.Base.Y, robot.Degrees(st.Base.Theta)))
	}
	if r.cfg.Arm != nil && len(st.Joints) > 0 {
		if name := r.poseName(st); name != "" {
			parts = append(parts, "arm in "+name)
		} else {
			parts = append(parts, "arm between named poses")
		}
	}
	if st.Gripper != nil {
		switch {
		case st.Gripper.Holding != "":
			parts = append(parts, "holding "+st.Gripper.Holding)
		case st.Gripper.Closed:
			parts = append(parts, "gripper closed and empty")
		default:
			parts = append(parts, "gripper open")
		}
	}
	parts = append(parts, "no task running")
	return joinWords(parts)
}

func joinWords(parts []string) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "; "
		}
		s += p
	}
	return s
}

func distance(a, b robot.Pose2D) float64 {
	dx, dy := a.X-b.X, a.Y-b.Y
	return sqrt(dx*dx + dy*dy)
}

func (r *Runner) poseName(st robot.State) string {
	for _, n := range r.cfg.PoseNames() {
		q, err := r.cfg.PoseJoints(n)
		if err != nil {
			continue
		}
		match := true
		for i, v := range q {
			if i >= len(st.Joints) || abs(st.Joints[i].Position-v) > 0.05 {
				match = false
				break
			}
		}
		if match {
			return n
		}
	}
	return ""
}

// progressOf turns a state into progress: completed steps weighted by
// their expected durations plus the running step's fraction.
func (r *Runner) progressOf(t *task, step int, st robot.State) Progress {
	p := t.plan
	if step >= len(p.steps) {
		return Progress{Fraction: 1, Text: "done"}
	}
	rem := 0.0
	if f := p.steps[step].Remaining; f != nil {
		rem = f(st)
	}
	r.mu.Lock()
	if t.stepStart[step] < 0 || rem > t.stepStart[step] {
		t.stepStart[step] = rem
	}
	start := t.stepStart[step]
	r.mu.Unlock()
	frac := 0.0
	if start > 0 {
		frac = clamp01(1 - rem/start)
	}
	var doneDur, total float64
	for i, d := range p.stepDur {
		total += d.Seconds()
		if i < step {
			doneDur += d.Seconds()
		}
	}
	overall := frac
	if total > 0 {
		overall = (doneDur + frac*p.stepDur[step].Seconds()) / total
	}
	overall = clamp01(overall)
	txt := p.describe(step)
	if p.target != nil {
		togo := distance(st.Base, *p.target)
		txt += fmt.Sprintf(": %.2f m to go", togo)
	} else {
		txt += fmt.Sprintf(": %.0f%% done", overall*100)
	}
	return Progress{Fraction: overall, Text: txt}
}

// --- cancel, stop, e-stop ---

// Cancel cancels a task. Awaiting approval (or approved, not started):
// the request is withdrawn and no motion is ever sent. Executing: the
// robot is stopped and Cancel returns once it is confirmed stopped (or
// ctx ends). A task already stopping, recovering or ended is returned as
// it is.
func (r *Runner) Cancel(ctx context.Context, id, by string) (TaskView, error) {
	if by == "" {
		by = "agent"
	}
	r.mu.Lock()
	t, ok := r.tasks[id]
	if ok && t.cancelBy == "" {
		t.cancelBy = by
	}
	r.mu.Unlock()
	if !ok {
		return TaskView{}, notFoundTask(id)
	}
	switch t.m.State() {
	case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
		r.cancelBeforeMotion(t, by, "cancelled by "+by)
		if t.m.State() == fsm.Executing || t.m.State() == fsm.Stopping {
			// Raced with the start: the motion is being stopped.
			t.cancel()
			return r.waitTerminal(ctx, t)
		}
		return r.Get(id)
	case fsm.Executing:
		t.cancel()
		return r.waitTerminal(ctx, t)
	}
	return r.Get(id)
}

func (r *Runner) waitTerminal(ctx context.Context, t *task) (TaskView, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	return r.Get(t.id)
}

// cancelBeforeMotion ends a task that has sent nothing.
func (r *Runner) cancelBeforeMotion(t *task, by, reason string) {
	st, _, _ := r.sup.Latest()
	e := toolerr.New(toolerr.ActionFailed, "%s before it started; nothing moved; %s", reason, r.whereNow(t.plan, st))
	e.Suggestion = "the task was cancelled on request; ask the user before trying it again"
	err := r.fire(t, fsm.EvCancel, trOpts{by: by, reason: reason, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	if err == nil {
		if aid := r.approvalID(t); aid != "" && r.approver != nil {
			r.approver.Withdraw(aid, reason)
		}
	}
}

// Stop is the stop tool: the stop command goes out at once, needs no
// approval, and the live task (if any) is cancelled.
func (r *Runner) Stop(ctx context.Context, by, reason string) (StopReport, error) {
	if by == "" {
		by = "agent"
	}
	if reason == "" {
		reason = "stop requested"
	}
	err := r.sup.Stop(ctx, by, reason)
	st, _, _ := r.sup.Latest()
	rep := StopReport{State: st}
	r.mu.Lock()
	t := r.live
	if t != nil && t.cancelBy == "" {
		t.cancelBy = by
	}
	r.mu.Unlock()
	if t != nil {
		switch t.m.State() {
		case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
			r.cancelBeforeMotion(t, by, "stopped by "+by)
		default:
			t.cancel()
		}
		rep.Cancelled = append(rep.Cancelled, t.id)
	}
	rep.Text = "stop sent; " + st.Summary()
	if t != nil {
		rep.Text = fmt.Sprintf("stop sent; task %s (%s) cancelled; %s", t.id, t.req.Tool, st.Summary())
	} else {
		rep.Text += "; no task was running"
	}
	if err != nil {
		return rep, err
	}
	return rep, nil
}

func (r *Runner) submitStop(ctx context.Context, req Request) (TaskView, error) {
	reason, _, _ := text(req.Arguments, "reason")
	rep, err := r.Stop(ctx, req.Principal, reason)
	now := r.clock.Now()
	v := TaskView{
		Tool: ToolStop, Arguments: cloneArgs(req.Arguments), Status: fsm.Succeeded, Text: rep.Text,
		Progress: Progress{Fraction: 1, Text: "stop sent"}, Result: map[string]any{"cancelled": rep.Cancelled, "robot": rep.State.Summary()},
		SessionID: req.SessionID, Principal: req.Principal, CreatedAt: now, UpdatedAt: now,
	}
	return v, err
}

// onSafetyEvent ends tasks that have not started moving when the e-stop
// latches (a moving task ends through its supervised motion).
func (r *Runner) onSafetyEvent(e safety.Event) {
	if e.Kind != safety.EventEStopPressed {
		return
	}
	r.mu.Lock()
	t := r.live
	r.mu.Unlock()
	if t == nil {
		return
	}
	switch t.m.State() {
	case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
		st, _, _ := r.sup.Latest()
		te := toolerr.New(toolerr.EStopActive, "the e-stop was pressed by %s (%s) before %s started; nothing moved; %s",
			e.By, orNone(e.Reason), t.req.Tool, r.whereNow(t.plan, st)).Wrap(safety.ErrEStopActive)
		if err := r.fire(t, fsm.EvEStop, trOpts{by: e.By, reason: e.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }}); err == nil {
			if aid := r.approvalID(t); aid != "" && r.approver != nil {
				r.approver.Withdraw(aid, "e-stop pressed")
			}
		}
	}
}

// Close cancels every live task (withdrawing approvals, stopping motion)
// and waits, bounded by ctx, for their goroutines.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	t := r.live
	r.mu.Unlock()
	if t != nil {
		switch t.m.State() {
		case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
			r.cancelBeforeMotion(t, "bridge", "the bridge is shutting down")
		}
	}
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("actions: close: %w", ctx.Err())
	}
	r.unobs()
	return err
}
