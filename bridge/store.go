package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/events"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/metrics"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// durable is the bridge's memory and measurements: the store (SQLite in
// the data dir, or PostgreSQL, Conf.Store), which holds transitions,
// approvals, grants, safety events, latches, idempotency keys and the
// audit trail, and the Prometheus metrics fed by the same observers. It implements safety.Observer and actions.Observer by
// feeding both; the supervisor and the runner call it after they have
// done their work (a stop is always sent before its event arrives here).
type durable struct {
	st       *store.Store
	m        *metrics.Metrics
	mountOne sync.Once

	mu        sync.Mutex
	report    store.RecoveryReport // guarded by mu; the last restart recovery
	recovered bool                 // guarded by mu; a Start recovered the store
}

var (
	_ safety.Observer  = (*durable)(nil)
	_ actions.Observer = (*durable)(nil)
	_ approval.Store   = approvalStore{}
	_ toolapi.Tasks    = durableTasks{}
)

// Environment variables of the store (Conf.Env).
const (
	// EnvStore names the store's engine, "sqlite" or "postgres", when
	// Conf.Store.Driver is empty.
	EnvStore = "ROBOT_BRIDGE_STORE"
	// EnvStoreDSN is the PostgreSQL connection string. It is a secret:
	// never logged, never in an error.
	EnvStoreDSN = "ROBOT_BRIDGE_STORE_DSN"
	// EnvStoreDSNFile names a file holding the connection string (a
	// mounted secret), when Conf.Store.DSNFile is empty.
	EnvStoreDSNFile = "ROBOT_BRIDGE_STORE_DSN_FILE"
)

// StoreConf chooses the bridge's store. The zero value is the SQLite
// file in the data dir.
type StoreConf struct {
	// Driver (optional) is "sqlite" or "postgres". It defaults to
	// $ROBOT_BRIDGE_STORE, else sqlite.
	Driver string
	// DSNFile (optional) is a file whose first line is the PostgreSQL
	// connection string. It defaults to $ROBOT_BRIDGE_STORE_DSN_FILE; with
	// neither, the DSN is $ROBOT_BRIDGE_STORE_DSN. There is no flag for
	// the DSN itself: a command line is visible to every user of the
	// machine.
	DSNFile string
}

// storeEngine resolves Conf.Store and the environment into the store's
// driver and DSN. Its errors name where the DSN was looked for, never
// the DSN.
func (b *Bridge) storeEngine() (store.Driver, string, error) {
	env := b.conf.Env
	name := b.conf.Store.Driver
	if name == "" {
		name = env(EnvStore)
	}
	drv, err := store.ParseDriver(name)
	if err != nil {
		return "", "", err
	}
	file := b.conf.Store.DSNFile
	if file == "" {
		file = env(EnvStoreDSNFile)
	}
	dsn := env(EnvStoreDSN)
	if drv == store.DriverSQLite {
		if dsn != "" || file != "" {
			return "", "", fmt.Errorf("a PostgreSQL DSN is configured (%s or a DSN file) but the store is sqlite; "+
				"choose the postgres store (--store postgres or %s=postgres) or remove the DSN", EnvStoreDSN, EnvStore)
		}
		return drv, "", nil
	}
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("the store's DSN file: %w", err)
		}
		line, _, _ := strings.Cut(string(raw), "\n")
		if dsn = strings.TrimSpace(line); dsn == "" {
			return "", "", fmt.Errorf("the store's DSN file %s is empty", file)
		}
		return drv, dsn, nil
	}
	if strings.TrimSpace(dsn) == "" {
		return "", "", fmt.Errorf("the postgres store needs a connection string: set %s, or name a file holding it with --store-dsn-file or %s",
			EnvStoreDSN, EnvStoreDSNFile)
	}
	return drv, dsn, nil
}

// openDurable opens (or, on a first start, creates) the store and creates
// the metrics. It fails with the store's explanation when the database is
// corrupt, or missing from a data dir that had one: the bridge must not
// start on an empty store that has forgotten a latched fault.
func (b *Bridge) openDurable() error {
	m := metrics.New(b.reg)
	m.WatchFleet(b.metricRobots(), b.conf.Config.MetricsRobotSeries())
	reg, err := toolapi.NewRegistry(b.conf.Config)
	if err != nil {
		return fmt.Errorf("bridge: tool registry: %w", err)
	}
	drv, dsn, err := b.storeEngine()
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	bridgeID := ""
	if b.cluster != nil {
		bridgeID = b.cluster.conf.BridgeID
	}
	st, err := store.Open(context.Background(), store.Conf{
		Driver: drv, DSN: dsn, Dir: b.conf.DataDir, Clock: b.clock, Logger: b.conf.Logger, BridgeID: bridgeID,
		Redact: reg.Redact, OnDrop: m.StoreDropped, ObserveWrite: m.StoreWrite,
	})
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	b.dur = &durable{st: st, m: m}
	return nil
}

// SafetyEvent implements safety.Observer: metrics at once, the store
// through its writer. It never waits on the disk: a latch change goes to
// the store's unbounded latch lane and is never dropped, and whoever must
// not answer before it is on the disk (the operator's e-stop, reset and
// clear) waits with latchRecorded.
func (d *durable) SafetyEvent(e safety.Event) {
	d.m.SafetyEvent(e)
	d.st.SafetyEvent(e)
}

// TaskChanged implements actions.Observer.
func (d *durable) TaskChanged(v actions.TaskView) {
	d.m.TaskChanged(v)
	d.st.TaskChanged(v)
}

// approvals returns the approval service's store: every request, decision
// and grant is committed before it takes effect, and a decision's wait is
// measured once it is on the disk.
func (d *durable) approvals() approval.Store { return approvalStore{d.st, d.m} }

type approvalStore struct {
	st *store.Store
	m  *metrics.Metrics
}

func (a approvalStore) SaveApproval(ctx context.Context, ap approval.Approval) error {
	if err := a.st.SaveApproval(ctx, ap); err != nil {
		return err
	}
	a.m.ApprovalDecided(ap)
	return nil
}

func (a approvalStore) SaveGrant(ctx context.Context, g approval.Grant) error {
	return a.st.SaveGrant(ctx, g)
}

// durableTasks is one robot's runner as the tool API sees it, with a
// memory: a task the runner does not know — from before a restart, or
// pruned — is answered from the store, which reports a task the restart
// found live as interrupted. A stored task of another robot is not this
// robot's (NOT_FOUND, as the runner says). Everything else is the
// runner's.
type durableTasks struct {
	*actions.Runner
	st    *store.Store
	robot string
	// legacy is true for the bridge's only robot: tasks stored by a
	// bridge that did not yet name its robot are its.
	legacy bool
	// fence is the robot's lease in a cluster (nil otherwise): a call
	// for a robot another bridge drives is refused before any task
	// exists, naming that bridge.
	fence safety.Fence
}

// tasks wraps robot s's runner for the tool API.
func (d *durable) tasks(s *robotStack, legacy bool) durableTasks {
	t := durableTasks{Runner: s.runner, st: d.st, robot: s.id, legacy: legacy}
	if s.lease != nil {
		t.fence = s.lease
	}
	return t
}

// Submit implements toolapi.Tasks: in a cluster, only the bridge that
// holds the robot's lease creates its tasks.
func (t durableTasks) Submit(ctx context.Context, r actions.Request) (actions.TaskView, error) {
	if t.fence != nil {
		if err := t.fence.Hold(); err != nil {
			return actions.TaskView{}, err
		}
	}
	return t.Runner.Submit(ctx, r)
}

func isNotFound(err error) bool {
	var te *toolerr.Error
	return errors.As(err, &te) && te.Type == toolerr.NotFound
}

// stored returns task id from the store when it is this robot's.
func (t durableTasks) stored(ctx context.Context, id string) (actions.TaskView, bool) {
	sv, err := t.st.Task(ctx, id)
	if err != nil || (sv.RobotID != t.robot && (sv.RobotID != "" || !t.legacy)) {
		return actions.TaskView{}, false
	}
	return sv, true
}

// Get implements toolapi.Tasks.
func (t durableTasks) Get(id string) (actions.TaskView, error) {
	v, err := t.Runner.Get(id)
	if err == nil || !isNotFound(err) {
		return v, err
	}
	if sv, ok := t.stored(context.Background(), id); ok {
		return sv, nil
	}
	return v, err
}

// Wait implements toolapi.Tasks. A stored task belongs to a previous run
// and can no longer change, so it is returned at once.
func (t durableTasks) Wait(ctx context.Context, id string, max time.Duration) (actions.TaskView, error) {
	v, err := t.Runner.Wait(ctx, id, max)
	if err == nil || !isNotFound(err) {
		return v, err
	}
	if sv, ok := t.stored(ctx, id); ok {
		return sv, nil
	}
	return v, err
}

// Cancel implements toolapi.Tasks: a task from a previous run has ended
// already; cancelling it changes nothing and reports it as it is.
func (t durableTasks) Cancel(ctx context.Context, id, by string) (actions.TaskView, error) {
	v, err := t.Runner.Cancel(ctx, id, by)
	if err == nil || !isNotFound(err) {
		return v, err
	}
	if sv, ok := t.stored(ctx, id); ok {
		return sv, nil
	}
	return v, err
}

// latchRecordWait bounds how long an operator's e-stop, reset or clear
// waits for its latch record to reach the disk before it is answered
// that the latch is in force but not recorded.
const latchRecordWait = 5 * time.Second

// latchRecorded waits until every latch change the supervisor has emitted
// so far is committed to the disk (SQLite's synchronous=FULL, PostgreSQL's
// synchronous_commit=on). Its error says the
// change is in force in the supervisor but not recorded.
func (d *durable) latchRecorded(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, latchRecordWait)
	defer cancel()
	return d.st.SyncLatches(ctx)
}

// CrashFaultReason is the reason of the fault a bridge latches at start
// when it finds it was not shut down cleanly (safety.after_crash:
// latch_fault, the default).
const CrashFaultReason = "the bridge restarted after an unclean shutdown"

// recoverDurable runs before the API opens (ARCHITECTURE.md, invariant 8):
// the latches the store remembers are restored into the supervisor — and,
// when the previous run did not shut down cleanly, a fault that only an
// operator clears (safety.after_crash) — a stop is sent to the robot, then
// the store settles what the previous run left — live tasks interrupted,
// pending approvals expired, grants ended — records the crash fault and
// audits the restart. Only then may the listener open.
func (b *Bridge) recoverDurable(ctx context.Context) error {
	d := b.dur
	// In a cluster the recovery is of the robots this bridge holds; the
	// others' latches are mirrored, and their owners settle them.
	mine := b.robots
	if b.cluster != nil {
		mine = b.cluster.ownedStacks()
	}
	for _, s := range b.robots {
		estop, fault, err := d.st.Latches(ctx, s.id)
		if err != nil {
			return fmt.Errorf("bridge: read latches of %s: %w", s.id, err)
		}
		if b.cluster != nil && !b.cluster.owns(s.id) {
			s.sup.MirrorLatches(estop, fault)
			continue
		}
		s.sup.RestoreLatches(estop, fault)
	}
	var crash *safety.FaultStatus
	if info := d.st.Info(); !info.Fresh && !info.CleanShutdown {
		switch b.conf.Config.Safety.AfterCrash.Policy() {
		case hwconfig.AfterCrashResume:
			b.log.Warn("the previous run did not shut down cleanly; starting without a latched fault (safety.after_crash: resume)",
				"unclean_since", info.UncleanSince)
		default:
			crash = &safety.FaultStatus{Latched: true, Reason: CrashFaultReason, Since: b.clock.Now()}
			// Latched before the stop and long before the API opens; a
			// fault latched already keeps its own cause. Every robot:
			// nobody knows which of them was moving when the bridge died.
			for _, s := range mine {
				s.sup.RestoreLatches(safety.EStopStatus{}, *crash)
			}
		}
	}
	stopErr := eachRobot(mine, func(s *robotStack) error {
		if err := s.sup.Stop(ctx, "bridge", "bridge start: the robot is stopped before the API opens"); err != nil {
			if b.fleet() {
				return fmt.Errorf("%s: %w", s.id, err)
			}
			return err
		}
		return nil
	})
	if stopErr != nil {
		// The robot's own watchdog stops it when commands stop arriving
		// (invariant 9); the bridge still must not lose its records.
		b.log.Warn("stop at start not delivered", "err", stopErr)
	}
	details := map[string]any{"robot": b.first().id, "transport": string(b.conf.Config.Transport.Kind)}
	if b.fleet() {
		details["robots"] = len(b.robots)
	}
	ids := make([]string, len(mine))
	for i, s := range mine {
		ids[i] = s.id
	}
	if b.cluster != nil {
		details["bridge_id"] = b.cluster.conf.BridgeID
	}
	rep, err := d.st.Recover(ctx, store.RecoverInput{
		By: "bridge", StopSent: stopErr == nil, StopErr: stopErr, CrashFault: crash, Robots: ids,
		Details: details,
	})
	if err != nil {
		return fmt.Errorf("bridge: restart recovery: %w", err)
	}
	if crash != nil {
		// Recorded with the restart; the bus and the metrics learn of it
		// like of any fault.
		for _, s := range mine {
			e := safety.Event{Kind: safety.EventFaultLatched, At: crash.Since, RobotID: s.id, By: "bridge", Reason: crash.Reason}
			d.m.SafetyEvent(e)
			b.bus.Publish(events.TypeSafety, e.At, safetyEventData(e))
		}
		b.log.Warn("the previous run did not shut down cleanly: fault latched; an operator must clear it", "reason", crash.Reason)
	}
	d.mu.Lock()
	d.report, d.recovered = rep, true
	d.mu.Unlock()
	d.m.TasksRecovered(len(rep.Interrupted))
	d.mountOne.Do(func() {
		// Mounted here, before the listener opens, so the audit API
		// exists exactly when the store has been recovered.
		h := store.NewAuditHandler(d.st, store.AuditHandlerConf{Logger: b.conf.Logger})
		b.api.Mount("GET /v1/audit", h, toolapi.RoleOperator)
		b.api.Mount("GET /v1/audit/export", h, toolapi.RoleOperator)
	})
	b.bus.Publish(events.TypeSystem, b.clock.Now(), map[string]any{"event": "start", "recovery": rep})
	b.log.Info("restart recovery done", "fresh", rep.Fresh, "clean_shutdown", rep.CleanShutdown,
		"interrupted", len(rep.Interrupted), "expired_approvals", len(rep.ExpiredApprovals),
		"estop_latched", rep.EStop.Active, "fault_latched", rep.Fault.Latched, "crash_fault", rep.CrashFault, "stop_sent", stopErr == nil)
	return nil
}

// closeDurable is the store's release: it records the shutdown of a
// bridge that started (one that never recovered the store has nothing to
// record) and closes the store, giving up its lock (the data dir's lock
// file, or PostgreSQL's advisory lock). Stop runs it after the
// supervisor's stop and before the driver's last one.
func (b *Bridge) closeDurable(ctx context.Context) error {
	b.dur.mu.Lock()
	recovered := b.dur.recovered
	b.dur.mu.Unlock()
	if !recovered {
		return b.dur.st.Close()
	}
	if b.cluster != nil {
		// The robots were stopped by their supervisors' releases; the
		// leases go back so a bridge that claims them takes them at once.
		b.cluster.releaseAll(ctx)
	}
	if _, err := b.dur.st.AppendAudit(ctx, store.AuditRecord{
		Type: store.AuditBridgeStop, Actor: "bridge",
		Summary: "bridge shut down cleanly",
	}, map[string]any{"robot": b.first().id, "robots": len(b.robots)}); err != nil {
		b.log.Error("shutdown not audited", "err", err)
	}
	return b.dur.st.Close()
}

// readyDurable is GET /readyz: the robot link is up, the supervisor has
// state and the store takes writes, with no latch change it failed to
// record.
func (b *Bridge) readyDurable(ctx context.Context) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := b.dur.st.Healthy(ctx); err != nil {
		if errors.Is(err, store.ErrLatchNotRecorded) {
			return errors.New("store not writable: a latch change is in force but not recorded")
		}
		return errors.New("store not writable")
	}
	return nil
}

// Store returns the durable store (audit reads for the console, tests).
func (b *Bridge) Store() *store.Store { return b.dur.st }

// Recovery returns what the last start's recovery found and did.
func (b *Bridge) Recovery() store.RecoveryReport {
	b.dur.mu.Lock()
	defer b.dur.mu.Unlock()
	return b.dur.report
}

// ConsoleAudit is the durable audit trail in the console's shape, newest
// first: the console's Conf.Audit (instead of its in-memory ring).
func (b *Bridge) ConsoleAudit(ctx context.Context, limit int) ([]console.AuditEntry, error) {
	recs, err := b.dur.st.Recent(ctx, min(max(limit, 1), store.MaxAuditLimit))
	if err != nil {
		return nil, err
	}
	out := make([]console.AuditEntry, len(recs))
	for i, r := range recs {
		text := r.Summary
		if r.Reason != "" {
			text += ": " + r.Reason
		}
		out[i] = console.AuditEntry{Seq: uint64(r.Seq), Time: r.At, Type: auditEventType(r.Type), Kind: r.Type, By: r.Actor, Text: text}
	}
	return out, nil
}

// auditEventType maps an audit record type onto the bus's event types.
func auditEventType(t string) events.Type {
	for _, p := range []struct {
		prefix string
		typ    events.Type
	}{{"task.", events.TypeTask}, {"approval.", events.TypeApproval}, {"grant.", events.TypeApproval}, {"safety.", events.TypeSafety}} {
		if len(t) > len(p.prefix) && t[:len(p.prefix)] == p.prefix {
			return p.typ
		}
	}
	return events.TypeSystem
}
