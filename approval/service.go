package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
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
// never loses one (ARCHITECTURE.md, invariant 8). When an approve, deny or
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
	// locations and poses scopes are checked against. Required unless
	// Robots is given; with Robots it is not used.
	Config *hwconfig.Config
	// Robots (optional) is every robot the service decides for, in config
	// order: a fleet. Empty means one robot, built from Config, Objects
	// and Latched exactly as before; with Robots, Objects and Latched must
	// be left nil (each robot has its own), so that no latch is silently
	// ignored.
	Robots []Robot
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
	// approval TTL (each robot's own).
	OnceGrantTTL time.Duration
	// EventBuffer (optional) is each subscriber's channel buffer. It
	// defaults to 256.
	EventBuffer int
	// MaxPending (optional) caps the requests waiting for an operator at
	// once, per robot; more are refused with RATE_LIMITED. It defaults to
	// 64. Per robot, so that a fleet moving every robot at once is not
	// refused because its robots share one service.
	MaxPending int
	// History (optional) is how many decided requests and dead grants are
	// kept in memory (the Store keeps all of them). It defaults to 1000.
	History int
	// GrantEnded (optional) is told, synchronously and with no lock of the
	// service held, the moment a grant stops being usable: an operator
	// revoked (or deleted) it, or its TTL timer fired and it authorizes
	// nothing any more. The bridge wires it to the supervisor of the
	// grant's robot (GrantEnd.RobotID), which stops the motion running on
	// that grant at once instead of at its next Authorize. It is called at
	// most once per grant, never for an approve-once grant whose task
	// already started when its TTL passes (that task may finish; see
	// Authorize), and it may call back into the Service. It defaults to
	// nothing.
	GrantEnded func(GrantEnd)
	// Latched (optional) reports whether an e-stop or a fault is latched:
	// nil when not, else the refusal saying which (the bridge wires the
	// supervisor's RefuseLatched). Request consults it before filing
	// anything and returns its error, so no request is filed — and no
	// scoped grant approves one — after a latch; Approve consults it at the
	// moment the operator approves, and a latched robot withdraws the
	// request instead (see Approve). It is called with the service's
	// decision lock held, so that a latch and the decision it must stop
	// are ordered: it must not call into the Service, nor wait on a lock
	// held by whoever calls WithdrawAll. The latch owner should set the
	// latch first and then call WithdrawAll (WithdrawRobot in a fleet);
	// then no request filed before the latch stays pending and none can be
	// filed after it. It defaults to never latched.
	Latched func() error
}

// Service is the operator approval service. It implements actions.Approver
// for the action runner and safety.Grants for the supervisor's
// authorization gate, and serves the operator's decisions.
//
// Locking: decideMu serialises every change — the Store call, the state
// update, the decision delivery and the event — so the store, the
// decision channels and the event stream all see one order. mu guards the
// maps and every grant's binding to tasks (boundTask, started, tasks,
// ended are written only under mu held for writing); readers (Authorize,
// List, Get, Grants) take only mu and never wait on the store.
// Conf.GrantEnded is called with no lock held; Conf.Latched (each
// Robot.Latched) is asked under decideMu on purpose, so that the latch
// check and the decision it guards cannot be split by a WithdrawAll.
//
// One Service serves every robot of a bridge: requests, approvals and
// grants are each one robot's (their RobotID), a robot's latches stop only
// its own requests and approvals, a grant authorizes only its own robot,
// and listings show every robot unless filtered (ListRobot, GrantsRobot).
//
// The code is split by subject: this file has construction, events and
// Close; requests.go the approval requests (Request, Withdraw, Approve,
// Deny, their expiry and listing); grants.go the grants (CreateGrant,
// Revoke, their expiry and listing); authorize.go the gate's check.
type Service struct {
	robots     []*robotState          // config order; immutable
	byID       map[string]*robotState // immutable
	clock      clockwork.Clock
	log        *slog.Logger
	newID      func() string
	store      Store
	maxPending int
	history    int
	events     *hub
	grantEnded func(GrantEnd)

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

// New validates conf, fills its defaults and returns a Service.
func New(conf Conf) (*Service, error) {
	if conf.OnceGrantTTL < 0 {
		return nil, fmt.Errorf("approval: Conf.OnceGrantTTL is negative (%s)", conf.OnceGrantTTL)
	}
	s := &Service{
		byID:        map[string]*robotState{},
		clock:       conf.Clock,
		log:         conf.Logger,
		newID:       conf.NewID,
		store:       conf.Store,
		maxPending:  conf.MaxPending,
		history:     conf.History,
		grantEnded:  conf.GrantEnded,
		waiters:     map[string]*waiter{},
		grantTimers: map[string]clockwork.Timer{},
		approvals:   map[string]*Approval{},
		grants:      map[string]*grant{},
	}
	robots := conf.Robots
	names := func(i int) string { return fmt.Sprintf("Conf.Robots[%d]", i) }
	if len(robots) == 0 {
		if conf.Config == nil {
			return nil, errors.New("approval: Conf.Config is required")
		}
		robots = []Robot{{Config: conf.Config, Objects: conf.Objects, Latched: conf.Latched}}
		names = func(int) string { return "Conf" }
	} else if conf.Objects != nil || conf.Latched != nil {
		return nil, errors.New("approval: with Conf.Robots, give each robot its Objects and Latched; Conf.Objects and Conf.Latched must be nil")
	}
	for i, r := range robots {
		rs, err := newRobotState(names(i), r, conf.OnceGrantTTL)
		if err != nil {
			return nil, err
		}
		if _, dup := s.byID[rs.id]; dup {
			return nil, fmt.Errorf("approval: %s is robot %q a second time", names(i), rs.id)
		}
		s.robots = append(s.robots, rs)
		s.byID[rs.id] = rs
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
