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
	TaskID string
	// RobotID is the robot the task is for (hw-config robot.id).
	RobotID   string
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
	// Approval is the approval's record decided with this transition and
	// left to the runner (HeldRecord.Value: an approval.Approval), written
	// in the same commit; nil for most transitions. A recorder that does
	// not know its type must fail, not drop it.
	Approval any
}

// Recorder persists transitions. RecordTransition is called synchronously
// before the motion command a transition implies is sent; when it fails
// the command is not sent. A stop is the exception: it is sent first and
// recorded right after.
//
// A transition that implies no command and is followed at once by one
// that does — a call authorized when it is made: created, then approved
// by the config or by a scoped grant — is held and recorded together
// with the next transition, before that one takes effect (see fire). A
// Recorder that is also a BatchRecorder writes such records in one
// commit; any other gets them one by one, in order.
type Recorder interface {
	RecordTransition(ctx context.Context, r TransitionRecord) error
}

// BatchRecorder is a Recorder that commits several transitions at once:
// RecordTransitions returns nil only when every record, in order, is
// durable, and an error when none is.
type BatchRecorder interface {
	Recorder
	RecordTransitions(ctx context.Context, rs []TransitionRecord) error
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
// so the record written matches the transition made; pmu serialises the
// task's views from the moment one is taken to its delivery to the
// observer, so observers see a task's views in the order they were taken
// (a progress view taken while stopping can never land after the
// recovered one). Lock order: tmu, then pmu, then the runner's mu.
type task struct {
	id        string
	req       Request
	args      map[string]any
	plan      *plan
	m         *fsm.Machine
	tmu       sync.Mutex
	pmu       sync.Mutex
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
	paused     *PauseView
	pauseStep  int
	startState robot.State
	// moved is set once a state during the motion showed the robot
	// moving (or away from startState): a cancel after that is never
	// "cancelled before it moved", however short the distance.
	moved bool

	// guarded by tmu: transitions made but not yet recorded (trOpts.hold).
	// pending are their records, written with the next transition's;
	// held their views, delivered to the observer once the records are
	// written, so an observer (and the store's task view) never learns of
	// a transition before its record. settled, made with the first held
	// record, is closed when pending is empty again; settleErr is then
	// the error of the write that gave them up (nil: recorded).
	pending   []TransitionRecord
	held      []TaskView
	settled   chan struct{}
	settleErr error
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
	r.pl.now = r.clock.Now
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.unobs = r.sup.AddObserver(safety.ObserverFunc(r.onSafetyEvent))
	return r, nil
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "task-" + hex.EncodeToString(b[:])
}

// robotID is the robot the runner's tasks are for ("" for a runner a
// unit test built without a config).
func (r *Runner) robotID() string {
	if r.cfg == nil {
		return ""
	}
	return r.cfg.Robot.ID
}

func (r *Runner) viewLocked(t *task) TaskView {
	v := TaskView{
		ID: t.id, RobotID: r.robotID(), Tool: t.req.Tool, Arguments: cloneArgs(t.args), Status: t.m.State(), Progress: t.progress,
		Text: toolerr.Sentence(t.text), ApprovalID: t.approvalID, SessionID: t.req.SessionID, Principal: t.req.Principal,
		CreatedAt: t.createdAt, UpdatedAt: t.updatedAt,
	}
	if v.Status.Terminal() {
		// A finished task's last progress phrase ("driving to dock, 7.30 m
		// to go") is no longer true; its text says how it ended.
		v.Progress.Text = ""
	}
	if t.result != nil {
		v.Result = cloneArgs(t.result)
	}
	if t.paused != nil {
		p := *t.paused
		v.Paused = &p
	}
	if t.err != nil {
		e := *t.err
		e.Message = toolerr.Sentence(e.Message)
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
	e := toolerr.New(toolerr.NotFound, "There is no task %q.", id).With("task_id", id)
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
// with the task's view at that moment. It also returns as soon as an
// operator pauses the task, so the agent learns of the pause at once; a
// wait that begins on a paused task waits until the pause ends (resumed
// or ended), so a waiting agent never spins on a held task.
func (r *Runner) Wait(ctx context.Context, id string, max time.Duration) (TaskView, error) {
	r.mu.Lock()
	t, ok := r.tasks[id]
	var ch chan struct{}
	var start fsm.State
	if ok {
		ch, start = t.changed, t.m.State()
	}
	r.mu.Unlock()
	if !ok {
		return TaskView{}, notFoundTask(id)
	}
	if max > 0 {
		tm := r.clock.NewTimer(max)
		defer tm.Stop()
	wait:
		for {
			select {
			case <-t.done:
				break wait
			case <-tm.Chan():
				break wait
			case <-ctx.Done():
				break wait
			case <-ch:
				r.mu.Lock()
				ch = t.changed
				st := t.m.State()
				r.mu.Unlock()
				if (st == fsm.Paused) != (start == fsm.Paused) {
					break wait
				}
			}
		}
	} else {
		select {
		case <-t.done:
		default:
		}
	}
	return r.Get(id)
}
