package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Defaults of Conf and of the hw-config's approval settings.
const (
	DefaultApprovalTTL = 60 * time.Second
	DefaultMaxGrantTTL = 30 * time.Minute
	DefaultEventBuffer = 256
	DefaultMaxPending  = 64
	DefaultHistory     = 1000
	// MaxReasonLen bounds an operator's reason: it reaches the model
	// verbatim, so it must fit in a result envelope.
	MaxReasonLen = 2000
	// MaxNameLen bounds an operator name.
	MaxNameLen = 200
)

// SystemActor is the DecidedBy of decisions nobody made: expiries,
// withdrawals and shutdown.
const SystemActor = "system"

// Store persists requests, decisions and grants. The service calls it
// before a change takes effect: a request is filed, a decision delivered
// and a grant usable only after the store accepted the record, so a crash
// never loses one (DESIGN.md §4, invariant 8). When an approve, deny or
// grant cannot be saved, the operation fails and nothing changes. Expiries
// and withdrawals are declines; they take effect even when the save fails
// (the failure is logged), because a decline must never wait on a disk.
//
// Calls are serialised (never concurrent) and must not call back into the
// Service.
type Store interface {
	// SaveApproval records a request in its new status.
	SaveApproval(ctx context.Context, a Approval) error
	// SaveGrant records a grant when it is created and when it is revoked.
	SaveGrant(ctx context.Context, g Grant) error
}

type nopStore struct{}

func (nopStore) SaveApproval(context.Context, Approval) error { return nil }
func (nopStore) SaveGrant(context.Context, Grant) error       { return nil }

// Conf configures a Service.
type Conf struct {
	// Config is the robot's hw-config: its id, safety.approval_ttl,
	// safety.max_grant_ttl, the actions that need approval, the named
	// locations and poses scopes are checked against. Required.
	Config *hwconfig.Config
	// Clock (optional) drives expiry. It defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional). It defaults to slog.Default(); the service adds
	// component=approval.
	Logger *slog.Logger
	// NewID (optional) makes the unique part of ids; the service prefixes
	// "apr_" for requests and "grt_" for grants. It defaults to 16 random
	// hex digits.
	NewID func() string
	// Store (optional) persists every change before it takes effect. It
	// defaults to a no-op.
	Store Store
	// Objects (optional) resolves an object id's label for grasp scopes
	// bounded by labels. It defaults to the labels of the simulator's
	// objects in Config; an object neither knows is outside such a scope.
	Objects actions.Objects
	// OnceGrantTTL (optional) is how long after an approval the task may
	// start its motion on the approve-once grant. It defaults to the
	// approval TTL.
	OnceGrantTTL time.Duration
	// EventBuffer (optional) is each subscriber's channel buffer. It
	// defaults to 256.
	EventBuffer int
	// MaxPending (optional) caps the requests waiting for an operator at
	// once; more are refused with RATE_LIMITED. It defaults to 64.
	MaxPending int
	// History (optional) is how many decided requests and dead grants are
	// kept in memory (the Store keeps all of them). It defaults to 1000.
	History int
}

// Service is the operator approval service. It implements actions.Approver
// for the action runner and safety.Grants for the supervisor's
// authorization gate, and serves the operator's decisions.
//
// Locking: decideMu serialises every change — the Store call, the state
// update, the decision delivery and the event — so the store, the
// decision channels and the event stream all see one order. mu guards the
// maps; readers (Authorize, List, Get, Grants) take only mu and never wait
// on the store.
type Service struct {
	cfg         *hwconfig.Config
	robotID     string
	approvalTTL time.Duration
	maxGrantTTL time.Duration
	onceTTL     time.Duration
	clock       clockwork.Clock
	log         *slog.Logger
	newID       func() string
	store       Store
	objects     actions.Objects
	simLabels   map[string]string
	maxPending  int
	history     int
	events      *hub

	decideMu    sync.Mutex
	waiters     map[string]*waiter         // guarded by decideMu
	grantTimers map[string]clockwork.Timer // guarded by decideMu
	order       []string                   // approval ids, oldest first; guarded by decideMu
	grantOrder  []string                   // grant ids, oldest first; guarded by decideMu
	closed      bool                       // guarded by decideMu

	mu        sync.RWMutex
	approvals map[string]*Approval // guarded by mu; values are immutable, replaced on change
	grants    map[string]*grant    // guarded by mu, including the grants' mutable fields
}

var (
	_ actions.Approver = (*Service)(nil)
	_ safety.Grants    = (*Service)(nil)
)

// waiter is a pending request's decision channel and expiry timer.
type waiter struct {
	ch    chan actions.Decision
	timer clockwork.Timer
}

// grant is a grant's state. snap's fields other than Status and TaskID
// change only on revocation; the rest is the binding to tasks.
type grant struct {
	snap Grant
	// b is a scoped grant's compiled bounds (immutable).
	b *bounds
	// boundTask is the task an approve-once grant belongs to; started is
	// set once that task has passed the gate on it.
	boundTask string
	started   bool
	// tasks are the tasks that started on a scoped grant while it was
	// valid; they may finish their motion after it expires.
	tasks map[string]struct{}
}

func (g *grant) snapshot(now time.Time) Grant {
	s := g.snap
	s.TaskID = g.boundTask
	switch {
	case s.RevokedAt != nil:
		s.Status = GrantRevoked
	case g.b == nil && g.started:
		s.Status = GrantUsed
	case !now.Before(s.ExpiresAt):
		s.Status = GrantExpired
	default:
		s.Status = GrantActive
	}
	return s
}

// New validates conf, fills its defaults and returns a Service.
func New(conf Conf) (*Service, error) {
	if conf.Config == nil {
		return nil, errors.New("approval: Conf.Config is required")
	}
	if conf.Config.Robot.ID == "" {
		return nil, errors.New("approval: Conf.Config.Robot.ID is empty")
	}
	s := &Service{
		cfg:         conf.Config,
		robotID:     conf.Config.Robot.ID,
		approvalTTL: conf.Config.Safety.ApprovalTTL.D(),
		maxGrantTTL: conf.Config.Safety.MaxGrantTTL.D(),
		onceTTL:     conf.OnceGrantTTL,
		clock:       conf.Clock,
		log:         conf.Logger,
		newID:       conf.NewID,
		store:       conf.Store,
		objects:     conf.Objects,
		simLabels:   map[string]string{},
		maxPending:  conf.MaxPending,
		history:     conf.History,
		waiters:     map[string]*waiter{},
		grantTimers: map[string]clockwork.Timer{},
		approvals:   map[string]*Approval{},
		grants:      map[string]*grant{},
	}
	switch {
	case s.approvalTTL < 0:
		return nil, fmt.Errorf("approval: Config.Safety.ApprovalTTL is negative (%s)", s.approvalTTL)
	case s.approvalTTL == 0:
		s.approvalTTL = DefaultApprovalTTL
	}
	switch {
	case s.maxGrantTTL < 0:
		return nil, fmt.Errorf("approval: Config.Safety.MaxGrantTTL is negative (%s)", s.maxGrantTTL)
	case s.maxGrantTTL == 0:
		s.maxGrantTTL = DefaultMaxGrantTTL
	}
	switch {
	case s.onceTTL < 0:
		return nil, fmt.Errorf("approval: Conf.OnceGrantTTL is negative (%s)", s.onceTTL)
	case s.onceTTL == 0:
		s.onceTTL = s.approvalTTL
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "approval")
	if s.newID == nil {
		s.newID = randomID
	}
	if s.store == nil {
		s.store = nopStore{}
	}
	if conf.EventBuffer < 0 || conf.MaxPending < 0 || conf.History < 0 {
		return nil, errors.New("approval: Conf.EventBuffer, MaxPending and History must not be negative")
	}
	if conf.EventBuffer == 0 {
		conf.EventBuffer = DefaultEventBuffer
	}
	if s.maxPending == 0 {
		s.maxPending = DefaultMaxPending
	}
	if s.history == 0 {
		s.history = DefaultHistory
	}
	s.events = newHub(conf.EventBuffer)
	if conf.Config.Sim != nil {
		for _, o := range conf.Config.Sim.Objects {
			s.simLabels[o.ID] = o.Label
		}
	}
	return s, nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// uniqueID returns prefix+NewID() that no approval or grant has yet. An
// injected NewID that keeps repeating itself is a bug worth an error
// rather than an overwritten record.
func (s *Service) uniqueID(prefix string) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for range 8 {
		id := prefix + s.newID()
		_, a := s.approvals[id]
		_, g := s.grants[id]
		if !a && !g {
			return id, nil
		}
	}
	return "", fmt.Errorf("approval: NewID keeps returning ids already in use")
}

// Subscribe returns a channel of every change from now on, and a function
// that ends the subscription. Delivery never blocks the service: a
// subscriber that falls Conf.EventBuffer events behind has its channel
// closed, and should re-read List and Grants and subscribe again.
func (s *Service) Subscribe() (<-chan Event, func()) { return s.events.subscribe() }

func (s *Service) publish(ev Event) {
	if n := s.events.publish(ev); n > 0 {
		s.log.Warn("dropped slow event subscribers", "count", n, "event", ev.Type)
	}
}

// Request implements actions.Approver. It files a pending request, or — when
// an active scoped grant covers the call — records it as approved by that
// grant and delivers the approval at once. Errors are *toolerr.Error.
func (s *Service) Request(ctx context.Context, r actions.ApprovalRequest) (string, <-chan actions.Decision, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, toolerr.New(toolerr.Internal, "the approval request was abandoned: %v", err).Wrap(err)
	}
	if strings.TrimSpace(r.Tool) == "" {
		return "", nil, toolerr.New(toolerr.Internal, "approval request without a tool name").Wrap(ErrInvalid)
	}
	if r.RobotID == "" {
		r.RobotID = s.robotID
	}
	if r.RobotID != s.robotID {
		return "", nil, toolerr.New(toolerr.Internal, "approval request for robot %q sent to the approval service of robot %q", r.RobotID, s.robotID).Wrap(ErrInvalid)
	}
	args := cloneArgs(r.Arguments)
	hash := safety.ArgsHash(r.Tool, args)
	if r.ArgsHash != "" && r.ArgsHash != hash {
		return "", nil, toolerr.New(toolerr.Internal, "approval request's args hash does not match its arguments").Wrap(ErrInvalid)
	}
	preview := r.Preview
	if strings.TrimSpace(preview) == "" {
		preview = fmt.Sprintf("call %s", r.Tool)
	}
	var target *robot.Pose2D
	if r.Target != nil {
		t := *r.Target
		target = &t
	}

	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return "", nil, toolerr.New(toolerr.Unavailable, "the approval service is shutting down").Wrap(ErrClosed)
	}
	now := s.clock.Now()
	if n := s.pendingCount(now); n >= s.maxPending {
		e := toolerr.New(toolerr.RateLimited, "%d approval requests are already waiting for an operator", n)
		e.RetryAfter = s.approvalTTL
		return "", nil, e
	}
	id, err := s.uniqueID("apr_")
	if err != nil {
		return "", nil, toolerr.New(toolerr.Internal, "could not file the approval request").Wrap(err)
	}
	a := &Approval{
		ID: id, TaskID: r.TaskID, Tool: r.Tool, Arguments: args, ArgsHash: hash, RobotID: r.RobotID,
		Preview: preview, Target: target, RobotState: r.RobotState, Status: StatusPending,
		RequestedBy: r.RequestedBy, SessionID: r.SessionID, CreatedAt: now, ExpiresAt: now.Add(s.approvalTTL),
	}
	ch := make(chan actions.Decision, 1)

	if g := s.coveringGrant(r.Tool, args, now); g != nil {
		// Covered by a scoped grant: record it approved by that grant.
		a.Status = StatusApproved
		a.DecidedAt = &now
		a.DecidedBy = g.CreatedBy
		a.GrantID = g.ID
		a.Reason = fmt.Sprintf("covered by scoped grant %s (%s)", g.ID, g.Description)
		if err := s.store.SaveApproval(ctx, *a); err != nil {
			return "", nil, toolerr.New(toolerr.Internal, "could not record the approval request").Wrap(err)
		}
		s.insertApproval(a)
		ch <- actions.Decision{Approved: true, By: g.CreatedBy, GrantID: g.ID, Reason: a.Reason}
		close(ch)
		s.log.Info("approval covered by scoped grant", "approval_id", id, "task_id", r.TaskID, "tool", r.Tool, "grant_id", g.ID)
		created := *a
		created.Status, created.DecidedAt, created.DecidedBy, created.GrantID, created.Reason = StatusPending, nil, "", "", ""
		s.publish(Event{Type: EventApprovalCreated, Time: now, Approval: &created})
		s.publish(Event{Type: EventApprovalApproved, Time: now, Approval: a})
		return id, ch, nil
	}

	if err := s.store.SaveApproval(ctx, *a); err != nil {
		return "", nil, toolerr.New(toolerr.Internal, "could not record the approval request").Wrap(err)
	}
	s.insertApproval(a)
	s.waiters[id] = &waiter{ch: ch, timer: s.clock.AfterFunc(s.approvalTTL, func() { s.onApprovalTimer(id) })}
	s.log.Info("approval requested", "approval_id", id, "task_id", r.TaskID, "tool", r.Tool,
		"requested_by", r.RequestedBy, "expires_at", a.ExpiresAt)
	s.publish(Event{Type: EventApprovalCreated, Time: now, Approval: a})
	return id, ch, nil
}

// pendingCount counts requests still pending at now. Caller holds decideMu.
func (s *Service) pendingCount(now time.Time) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for id := range s.waiters {
		if a := s.approvals[id]; a != nil && now.Before(a.ExpiresAt) {
			n++
		}
	}
	return n
}

// coveringGrant returns the active scoped grant for tool whose bounds hold
// args (the one lasting longest, when several do), or nil. Caller holds
// decideMu; bounds are checked outside mu because a label lookup calls out.
func (s *Service) coveringGrant(tool string, args map[string]any, now time.Time) *Grant {
	type cand struct {
		b    *bounds
		snap Grant
	}
	var cands []cand
	s.mu.RLock()
	for _, g := range s.grants {
		if g.b != nil && g.snap.Tool == tool && g.snap.RevokedAt == nil && now.Before(g.snap.ExpiresAt) {
			cands = append(cands, cand{g.b, g.snapshot(now)})
		}
	}
	s.mu.RUnlock()
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].snap.ExpiresAt.Equal(cands[j].snap.ExpiresAt) {
			return cands[i].snap.ExpiresAt.After(cands[j].snap.ExpiresAt)
		}
		return cands[i].snap.ID < cands[j].snap.ID
	})
	for _, c := range cands {
		if c.b.contains(args, s.labelOf) == nil {
			return &c.snap
		}
	}
	return nil
}

// insertApproval stores a new request and forgets the oldest decided ones
// beyond History. Caller holds decideMu.
func (s *Service) insertApproval(a *Approval) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals[a.ID] = a
	s.order = append(s.order, a.ID)
	if len(s.order) <= s.history {
		return
	}
	excess := len(s.order) - s.history
	kept := s.order[:0]
	for _, id := range s.order {
		if excess > 0 && !s.approvals[id].Pending() {
			delete(s.approvals, id)
			excess--
			continue
		}
		kept = append(kept, id)
	}
	s.order = kept
}

// Withdraw implements actions.Approver: the task was cancelled, so its
// pending request ends Cancelled. A request that is no longer pending is
// left as it is.
func (s *Service) Withdraw(approvalID, reason string) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w := s.pendingLocked(approvalID)
	if a == nil {
		s.log.Debug("withdraw of a request that is not pending", "approval_id", approvalID)
		return
	}
	now := s.clock.Now()
	if !now.Before(a.ExpiresAt) {
		s.expireLocked(a, w)
		return
	}
	if strings.TrimSpace(reason) == "" {
		reason = "the task was cancelled"
	}
	rec := *a
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusCancelled, &now, SystemActor, reason
	if err := s.store.SaveApproval(context.Background(), rec); err != nil {
		s.log.Error("could not record a withdrawn approval request; withdrawing it anyway", "approval_id", a.ID, "err", err)
	}
	s.finishLocked(&rec, w, actions.Decision{Cancelled: true, Reason: reason, By: SystemActor}, EventApprovalCancelled)
	s.log.Info("approval withdrawn", "approval_id", a.ID, "reason", reason)
}

// pendingLocked returns the request and its waiter if it is pending.
// Caller holds decideMu.
func (s *Service) pendingLocked(id string) (*Approval, *waiter) {
	w := s.waiters[id]
	if w == nil {
		return nil, nil
	}
	s.mu.RLock()
	a := s.approvals[id]
	s.mu.RUnlock()
	return a, w
}

// onApprovalTimer expires a request whose TTL has passed.
func (s *Service) onApprovalTimer(id string) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w := s.pendingLocked(id)
	if a == nil || s.closed {
		return
	}
	if d := a.ExpiresAt.Sub(s.clock.Now()); d > 0 {
		// A real timer never fires early, but a clock that did must not
		// shorten an operator's time to decide.
		w.timer = s.clock.AfterFunc(d, func() { s.onApprovalTimer(id) })
		return
	}
	s.expireLocked(a, w)
}

// expireLocked ends a pending request whose TTL has passed. The record says
// it was decided at its expiry time, whenever this runs, so List and Get
// can show a due request as expired before the timer fires. Caller holds
// decideMu.
func (s *Service) expireLocked(a *Approval, w *waiter) {
	rec := *a
	at := a.ExpiresAt
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusExpired, &at, SystemActor, s.expiryReason()
	if err := s.store.SaveApproval(context.Background(), rec); err != nil {
		s.log.Error("could not record an expired approval request; expiring it anyway", "approval_id", a.ID, "err", err)
	}
	s.finishLocked(&rec, w, actions.Decision{Expired: true, Reason: rec.Reason, By: SystemActor}, EventApprovalExpired)
	s.log.Info("approval expired", "approval_id", a.ID, "task_id", a.TaskID, "tool", a.Tool)
}

func (s *Service) expiryReason() string {
	return fmt.Sprintf("no operator decided within %s", s.approvalTTL)
}

// finishLocked applies a final status: it replaces the record, delivers the
// one decision, closes the channel and announces the change. Caller holds
// decideMu.
func (s *Service) finishLocked(rec *Approval, w *waiter, d actions.Decision, ev EventType) {
	s.mu.Lock()
	s.approvals[rec.ID] = rec
	s.mu.Unlock()
	delete(s.waiters, rec.ID)
	w.timer.Stop()
	// Announce first, so whoever sees the decision can also see the event.
	s.publish(Event{Type: ev, Time: s.clock.Now(), Approval: rec})
	w.ch <- d
	close(w.ch)
}

// decidable returns the pending request id for an operator decision, or
// the error that explains why it cannot be decided. A request past its TTL
// is expired here and now. Caller holds decideMu.
func (s *Service) decidable(id string) (*Approval, *waiter, error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	a, w := s.pendingLocked(id)
	if a == nil {
		s.mu.RLock()
		done := s.approvals[id]
		s.mu.RUnlock()
		if done == nil {
			return nil, nil, &NotFoundError{Kind: "approval", ID: id}
		}
		return nil, nil, notPending(done)
	}
	if !s.clock.Now().Before(a.ExpiresAt) {
		s.expireLocked(a, w)
		s.mu.RLock()
		done := s.approvals[id]
		s.mu.RUnlock()
		return nil, nil, notPending(done)
	}
	return a, w, nil
}

func notPending(a *Approval) error {
	e := &NotPendingError{Kind: "approval", ID: a.ID, Status: string(a.Status), By: a.DecidedBy}
	if a.DecidedAt != nil {
		e.At = *a.DecidedAt
	}
	return e
}

// ApproveOptions are the optional parts of an approval.
type ApproveOptions struct {
	// Reason is the operator's note on why (optional), kept in the record.
	Reason string
	// Grant, when set, also creates a scoped grant, so that calls like this
	// one are approved without asking for the grant's TTL. Its Scope.Tool
	// defaults to the request's tool.
	Grant *GrantSpec
}

// GrantSpec is a scoped grant to create.
type GrantSpec struct {
	Scope Scope
	// TTL is the grant's lifetime, in (0, safety.max_grant_ttl].
	TTL time.Duration
}

// Approve approves a pending request once: it creates an approve-once grant
// bound to the request's tool, argument hash, robot and task, and delivers
// the approval. With opts.Grant it also creates a scoped grant. A request
// that is no longer pending gives a *NotPendingError (ErrNotPending), an
// unknown id a *NotFoundError (ErrNotFound), a bad scope or TTL an
// *InvalidError (ErrInvalid).
func (s *Service) Approve(ctx context.Context, id, by string, opts ApproveOptions) (Approval, error) {
	if err := checkName("by", by); err != nil {
		return Approval{}, err
	}
	if err := checkReason("reason", opts.Reason, false); err != nil {
		return Approval{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w, err := s.decidable(id)
	if err != nil {
		return Approval{}, err
	}
	var scoped *grant
	if opts.Grant != nil {
		sc := opts.Grant.Scope
		if strings.TrimSpace(sc.Tool) == "" {
			sc.Tool = a.Tool
		}
		if scoped, err = s.newScoped(sc, opts.Grant.TTL, by, "grant.scope", "grant.ttl"); err != nil {
			return Approval{}, err
		}
		scoped.snap.ApprovalID = a.ID
	}
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	now := s.clock.Now()
	onceID, err := s.uniqueID("grt_")
	if err != nil {
		return Approval{}, err
	}
	once := &grant{
		snap: Grant{
			ID: onceID, Kind: GrantOnce, Tool: a.Tool, RobotID: a.RobotID, ArgsHash: a.ArgsHash,
			ApprovalID: a.ID, CreatedBy: by, CreatedAt: now, ExpiresAt: now.Add(s.onceTTL),
			Description: "once: " + a.Preview,
		},
		boundTask: a.TaskID,
	}
	rec := *a
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason, rec.GrantID = StatusApproved, &now, by, opts.Reason, onceID
	if scoped != nil {
		scoped.snap.CreatedAt, scoped.snap.ExpiresAt = now, now.Add(opts.Grant.TTL)
		if scoped.snap.ID, err = s.uniqueID("grt_"); err != nil {
			return Approval{}, err
		}
		if scoped.snap.ID == onceID {
			return Approval{}, errors.New("approval: NewID returned the same id twice in a row")
		}
		rec.ScopedGrantID = scoped.snap.ID
	}

	// Grants first: the approval record refers to them.
	if err := s.store.SaveGrant(ctx, once.snapshot(now)); err != nil {
		return Approval{}, fmt.Errorf("approval: record the grant: %w", err)
	}
	if scoped != nil {
		if err := s.store.SaveGrant(ctx, scoped.snapshot(now)); err != nil {
			return Approval{}, fmt.Errorf("approval: record the scoped grant: %w", err)
		}
	}
	if err := s.store.SaveApproval(ctx, rec); err != nil {
		return Approval{}, fmt.Errorf("approval: record the approval: %w", err)
	}
	// Snapshot before the grants become visible: once the decision is
	// delivered the task may bind them under mu at any moment.
	onceSnap := once.snapshot(now)
	var scopedSnap Grant
	if scoped != nil {
		scopedSnap = scoped.snapshot(now)
	}
	s.insertGrant(once)
	if scoped != nil {
		s.insertGrant(scoped)
	}
	s.finishLocked(&rec, w, actions.Decision{Approved: true, By: by, GrantID: onceID, Reason: opts.Reason}, EventApprovalApproved)
	s.publish(Event{Type: EventGrantCreated, Time: now, Grant: &onceSnap})
	if scoped != nil {
		s.publish(Event{Type: EventGrantCreated, Time: now, Grant: &scopedSnap})
	}
	s.log.Info("approval approved", "approval_id", a.ID, "task_id", a.TaskID, "tool", a.Tool, "by", by,
		"grant_id", onceID, "scoped_grant_id", rec.ScopedGrantID)
	return rec, nil
}

// Deny denies a pending request. The reason is required and reaches the
// agent verbatim in APPROVAL_DENIED.
func (s *Service) Deny(ctx context.Context, id, by, reason string) (Approval, error) {
	if err := checkName("by", by); err != nil {
		return Approval{}, err
	}
	if err := checkReason("reason", reason, true); err != nil {
		return Approval{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w, err := s.decidable(id)
	if err != nil {
		return Approval{}, err
	}
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	now := s.clock.Now()
	rec := *a
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusDenied, &now, by, reason
	if err := s.store.SaveApproval(ctx, rec); err != nil {
		return Approval{}, fmt.Errorf("approval: record the denial: %w", err)
	}
	s.finishLocked(&rec, w, actions.Decision{Reason: reason, By: by}, EventApprovalDenied)
	s.log.Info("approval denied", "approval_id", a.ID, "task_id", a.TaskID, "tool", a.Tool, "by", by, "reason", reason)
	return rec, nil
}

// CreateGrant creates a scoped grant directly: any call of scope.Tool inside
// its bounds is approved and authorized until ttl passes or it is revoked.
// Requests already pending are left for the operator to decide.
func (s *Service) CreateGrant(ctx context.Context, by string, scope Scope, ttl time.Duration) (Grant, error) {
	if err := checkName("by", by); err != nil {
		return Grant{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return Grant{}, ErrClosed
	}
	g, err := s.newScoped(scope, ttl, by, "scope", "ttl")
	if err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	now := s.clock.Now()
	if g.snap.ID, err = s.uniqueID("grt_"); err != nil {
		return Grant{}, err
	}
	g.snap.CreatedAt, g.snap.ExpiresAt = now, now.Add(ttl)
	snap := g.snapshot(now)
	if err := s.store.SaveGrant(ctx, snap); err != nil {
		return Grant{}, fmt.Errorf("approval: record the grant: %w", err)
	}
	s.insertGrant(g)
	s.publish(Event{Type: EventGrantCreated, Time: now, Grant: &snap})
	s.log.Info("scoped grant created", "grant_id", snap.ID, "tool", snap.Tool, "by", by, "expires_at", snap.ExpiresAt, "scope", snap.Description)
	return snap, nil
}

// newScoped validates a scope and TTL into a grant without id or times.
func (s *Service) newScoped(sc Scope, ttl time.Duration, by, scopeField, ttlField string) (*grant, error) {
	if ttl <= 0 {
		return nil, invalid(ttlField, "required: a positive duration like \"10m\", at most %s", s.maxGrantTTL)
	}
	if ttl > s.maxGrantTTL {
		return nil, invalid(ttlField, "%s is longer than this robot's max_grant_ttl of %s", ttl, s.maxGrantTTL)
	}
	b, err := compileScope(s.cfg, sc, scopeField)
	if err != nil {
		return nil, err
	}
	scope := b.scope
	return &grant{
		snap: Grant{
			Kind: GrantScoped, Tool: b.tool, RobotID: s.robotID, Scope: &scope, CreatedBy: by,
			Description: b.desc,
		},
		b:     b,
		tasks: map[string]struct{}{},
	}, nil
}

// insertGrant stores a new grant, arms its expiry event and forgets the
// oldest dead grants beyond History. Caller holds decideMu.
func (s *Service) insertGrant(g *grant) {
	id := g.snap.ID
	now := s.clock.Now()
	s.mu.Lock()
	s.grants[id] = g
	s.grantOrder = append(s.grantOrder, id)
	if excess := len(s.grantOrder) - s.history; excess > 0 {
		kept := s.grantOrder[:0]
		for _, gid := range s.grantOrder {
			if old := s.grants[gid]; excess > 0 && (old.snap.RevokedAt != nil || !now.Before(old.snap.ExpiresAt)) {
				delete(s.grants, gid)
				if t := s.grantTimers[gid]; t != nil {
					t.Stop()
					delete(s.grantTimers, gid)
				}
				excess--
				continue
			}
			kept = append(kept, gid)
		}
		s.grantOrder = kept
	}
	s.mu.Unlock()
	s.grantTimers[id] = s.clock.AfterFunc(g.snap.ExpiresAt.Sub(now), func() { s.onGrantTimer(id) })
}

// onGrantTimer announces that a grant expired.
func (s *Service) onGrantTimer(id string) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed || s.grantTimers[id] == nil {
		return
	}
	now := s.clock.Now()
	s.mu.RLock()
	g := s.grants[id]
	var snap Grant
	if g != nil {
		snap = g.snapshot(now)
	}
	s.mu.RUnlock()
	if g == nil || snap.Status == GrantRevoked {
		delete(s.grantTimers, id)
		return
	}
	if d := snap.ExpiresAt.Sub(now); d > 0 {
		s.grantTimers[id] = s.clock.AfterFunc(d, func() { s.onGrantTimer(id) })
		return
	}
	delete(s.grantTimers, id)
	s.publish(Event{Type: EventGrantExpired, Time: now, Grant: &snap})
	s.log.Info("grant expired", "grant_id", id, "tool", snap.Tool)
}

// Revoke revokes a grant. From the moment Revoke returns, Authorize refuses
// every use of it, also by a task that is already moving on it (the
// supervisor then stops that motion). Revoking a grant twice gives a
// *NotPendingError.
func (s *Service) Revoke(ctx context.Context, grantID, by string) (Grant, error) {
	if err := checkName("by", by); err != nil {
		return Grant{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return Grant{}, ErrClosed
	}
	now := s.clock.Now()
	s.mu.RLock()
	g := s.grants[grantID]
	var snap Grant
	if g != nil {
		snap = g.snapshot(now)
	}
	s.mu.RUnlock()
	if g == nil {
		return Grant{}, &NotFoundError{Kind: "grant", ID: grantID}
	}
	if snap.RevokedAt != nil {
		return Grant{}, &NotPendingError{Kind: "grant", ID: grantID, Status: string(GrantRevoked), By: snap.RevokedBy, At: *snap.RevokedAt}
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	snap.RevokedAt, snap.RevokedBy, snap.Status = &now, by, GrantRevoked
	if err := s.store.SaveGrant(ctx, snap); err != nil {
		return Grant{}, fmt.Errorf("approval: record the revocation: %w", err)
	}
	s.mu.Lock()
	g.snap.RevokedAt, g.snap.RevokedBy = &now, by
	s.mu.Unlock()
	if t := s.grantTimers[grantID]; t != nil {
		t.Stop()
		delete(s.grantTimers, grantID)
	}
	s.publish(Event{Type: EventGrantRevoked, Time: now, Grant: &snap})
	s.log.Info("grant revoked", "grant_id", grantID, "tool", snap.Tool, "by", by)
	return snap, nil
}

// List returns the requests with the given status ("" for all), oldest
// first. A pending request past its TTL is shown as expired even if its
// timer has not fired yet, exactly as it will be recorded.
func (s *Service) List(status string) []Approval {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Approval, 0, len(s.approvals))
	for _, a := range s.approvals {
		v := s.view(a, now)
		if status == "" || string(v.Status) == status {
			out = append(out, v)
		}
	}
	sortOldestFirst(out, func(a Approval) (time.Time, string) { return a.CreatedAt, a.ID })
	return out
}

// Get returns one request, or a *NotFoundError.
func (s *Service) Get(id string) (Approval, error) {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := s.approvals[id]
	if a == nil {
		return Approval{}, &NotFoundError{Kind: "approval", ID: id}
	}
	return s.view(a, now), nil
}

// view is a's snapshot as of now. Caller holds mu.
func (s *Service) view(a *Approval, now time.Time) Approval {
	v := *a
	if v.Status == StatusPending && !now.Before(v.ExpiresAt) {
		at := v.ExpiresAt
		v.Status, v.DecidedAt, v.DecidedBy, v.Reason = StatusExpired, &at, SystemActor, s.expiryReason()
	}
	return v
}

// Grants returns the active grants (neither expired nor revoked), oldest
// first.
func (s *Service) Grants() []Grant {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Grant
	for _, g := range s.grants {
		if snap := g.snapshot(now); snap.Status == GrantActive {
			out = append(out, snap)
		}
	}
	sortOldestFirst(out, func(g Grant) (time.Time, string) { return g.CreatedAt, g.ID })
	return out
}

// Grant returns one grant in any status, or a *NotFoundError.
func (s *Service) Grant(id string) (Grant, error) {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.grants[id]
	if g == nil {
		return Grant{}, &NotFoundError{Kind: "grant", ID: id}
	}
	return g.snapshot(now), nil
}

// Close shuts the service down: pending requests end Cancelled (their
// tasks cannot go on without it), timers stop, subscriptions end. Reads
// keep working; decisions and new requests fail with ErrClosed. Close is
// idempotent.
func (s *Service) Close() error {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return nil
	}
	now := s.clock.Now()
	for id, w := range s.waiters {
		s.mu.RLock()
		a := s.approvals[id]
		s.mu.RUnlock()
		rec := *a
		reason := "the approval service shut down"
		rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusCancelled, &now, SystemActor, reason
		if err := s.store.SaveApproval(context.Background(), rec); err != nil {
			s.log.Error("could not record a request cancelled by shutdown", "approval_id", id, "err", err)
		}
		s.finishLocked(&rec, w, actions.Decision{Cancelled: true, Reason: reason, By: SystemActor}, EventApprovalCancelled)
	}
	for id, t := range s.grantTimers {
		t.Stop()
		delete(s.grantTimers, id)
	}
	s.closed = true
	s.events.close()
	return nil
}

// labelOf resolves an object's label through Conf.Objects, then the
// simulator's objects in the config.
func (s *Service) labelOf(id string) (string, bool) {
	if s.objects != nil {
		if info, err := s.objects.Lookup(context.Background(), id); err == nil && info.Label != "" {
			return info.Label, true
		}
	}
	l, ok := s.simLabels[id]
	return l, ok
}

func checkName(field, v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return invalid(field, "required: who decides (the operator's name)")
	case len(v) > MaxNameLen || !utf8.ValidString(v):
		return invalid(field, "must be valid UTF-8 of at most %d bytes", MaxNameLen)
	}
	return nil
}

func checkReason(field, v string, required bool) error {
	switch {
	case required && strings.TrimSpace(v) == "":
		return invalid(field, "required: say why, in words the agent can pass on to the user")
	case len(v) > MaxReasonLen:
		return invalid(field, "at most %d bytes, got %d", MaxReasonLen, len(v))
	case !utf8.ValidString(v):
		return invalid(field, "must be valid UTF-8")
	}
	return nil
}

// cloneArgs deep-copies decoded JSON arguments, so a caller changing its
// map later cannot change what the operator approved.
func cloneArgs(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneArgs(x)
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = cloneValue(e)
		}
		return c
	default:
		return v
	}
}

// sortOldestFirst orders records by creation time, the id breaking ties,
// so listings are stable.
func sortOldestFirst[T any](out []T, key func(T) (time.Time, string)) {
	slices.SortFunc(out, func(a, b T) int {
		at, aid := key(a)
		bt, bid := key(b)
		if c := at.Compare(bt); c != 0 {
			return c
		}
		return strings.Compare(aid, bid)
	})
}
