package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store/pgtest"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// cluster is one PostgreSQL database several test bridges share.
type testCluster struct {
	t   *testing.T
	dsn string
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	return &testCluster{t: t, dsn: pgtest.Shared(t).CreateDB(t)}
}

// conf is bridge id's Conf on the cluster's database (id "" is a bridge
// outside cluster mode).
func (c *testCluster) conf(id string) Conf {
	return Conf{Driver: DriverPostgres, DSN: c.dsn, BridgeID: id, Clock: clockwork.NewFakeClockAt(t0), Logger: quietLogger()}
}

// open opens bridge id's store, closed when the test ends.
func (c *testCluster) open(id string, edit ...func(*Conf)) *Store {
	c.t.Helper()
	conf := c.conf(id)
	for _, e := range edit {
		e(&conf)
	}
	s, err := Open(context.Background(), conf)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestCluster_BridgesShareAStoreAndOneIDRunsOnce(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	// Given two bridges with their own ids on one database
	a := c.open("a")
	b := c.open("b")
	require.Equal(t, "a", a.Info().BridgeID)
	require.NotEmpty(t, a.Info().Instance)
	require.NotEqual(t, a.Info().Instance, b.Info().Instance)
	require.Equal(t, a.Info().StoreID, b.Info().StoreID)
	// When a second process starts as bridge a
	_, err := Open(ctx, c.conf("a"))
	// Then it is refused, naming the bridge id
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, `runs as bridge "a"`)
	// And a bridge without an id cannot join the cluster's store either
	_, err = Open(ctx, c.conf(""))
	require.ErrorIs(t, err, ErrLocked)
	// And both bridges write
	create(t, a, "task-a", "grasp", nil, "agent", t0)
	create(t, b, "task-b", "grasp", nil, "agent", t0)
	require.NoError(t, a.Healthy(ctx))
	require.NoError(t, b.Healthy(ctx))
	// And once the bridges are gone, the store opens for a single bridge
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	single := c.open("")
	// And while it runs, no cluster bridge can join
	_, err = Open(ctx, c.conf("c"))
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, "without a bridge id holds the store")
	require.NoError(t, single.Close())
}

func TestCluster_ConfIsChecked(t *testing.T) {
	ctx := context.Background()
	// A bridge id needs the postgres store
	_, err := Open(ctx, Conf{Dir: t.TempDir(), BridgeID: "a", Logger: quietLogger()})
	require.ErrorIs(t, err, ErrClusterNeedsPostgres)
	// And must look like one
	for _, bad := range []string{"A", "-a", "a b", "a/b", strings.Repeat("a", 33), "é"} {
		require.Error(t, ValidateBridgeID(bad), bad)
		_, err := Open(ctx, Conf{Driver: DriverPostgres, DSN: "postgres://x@127.0.0.1:1/x", BridgeID: bad, Logger: quietLogger()})
		require.ErrorContains(t, err, "Conf.BridgeID", bad)
	}
	for _, good := range []string{"a", "bridge-1", "b.2_x", strings.Repeat("a", 32), "0"} {
		require.NoError(t, ValidateBridgeID(good), good)
	}
	// And the cluster calls say why they cannot work on SQLite
	s, _ := openTest(t, t.TempDir())
	_, err = s.AcquireLease(ctx, "r1", time.Second, AcquireFree)
	require.ErrorIs(t, err, ErrClusterNeedsPostgres)
	_, err = s.Listen(ctx)
	require.ErrorIs(t, err, ErrClusterNeedsPostgres)
	_, err = s.PostMail(ctx, "b", "r1", "k", nil)
	require.ErrorIs(t, err, ErrClusterNeedsPostgres)
	// And on a PostgreSQL store without a bridge id
	p, _ := newTestEngine(t, DriverPostgres).open(t, t.TempDir())
	_, err = p.RenewLeases(ctx, time.Second)
	require.ErrorIs(t, err, ErrNotCluster)
}

func TestCluster_ACrashIsKnownToItsBridgeOnly(t *testing.T) {
	c := newTestCluster(t)
	// Given bridge a killed and bridge b shut down cleanly
	a := c.open("a")
	b := c.open("b")
	crash(a)
	require.NoError(t, b.Close())
	// When both start again
	a2 := c.open("a")
	b2 := c.open("b")
	// Then only a knows it crashed
	require.False(t, a2.Info().CleanShutdown)
	require.True(t, b2.Info().CleanShutdown)
	// And a's recovery settles a's crash, not b's state
	_, err := a2.Recover(context.Background(), RecoverInput{Robots: []string{"ra"}, StopSent: true})
	require.NoError(t, err)
	require.NoError(t, a2.Close())
	require.True(t, c.open("a").Info().CleanShutdown)
}

func TestCluster_LeasesAcquireRenewExpireRelease(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	a := c.open("a")
	b := c.open("b")
	// Given robot r1 acquired by bridge a
	l, err := a.AcquireLease(ctx, "r1", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Epoch)
	require.Equal(t, "a", l.Owner)
	require.Equal(t, a.Info().Instance, l.Instance)
	require.Equal(t, 5*time.Second, l.Remaining)
	// Then bridge b cannot take it, in any mode, and hears who holds it
	for _, m := range []AcquireMode{AcquireFree, AcquireExpired} {
		_, err = b.AcquireLease(ctx, "r1", time.Second, m)
		require.ErrorIs(t, err, ErrLeaseHeld)
		var held *LeaseHeldError
		require.ErrorAs(t, err, &held)
		require.Equal(t, "a", held.Lease.Owner)
		require.Equal(t, uint64(1), held.Lease.Epoch)
		require.Positive(t, held.Lease.Remaining)
		require.ErrorContains(t, err, "held by bridge a (epoch 1,")
	}
	_, err = b.TakeOver(ctx, "r1", TakeoverInput{By: "alice", TTL: time.Second})
	require.ErrorIs(t, err, ErrLeaseHeld)
	// And a acquiring it again only extends it
	l2, err := a.AcquireLease(ctx, "r1", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	require.Equal(t, uint64(1), l2.Epoch)
	_, err = a.TakeOver(ctx, "r1", TakeoverInput{By: "alice", TTL: time.Second})
	require.ErrorIs(t, err, ErrLeaseOwned)

	// Given r2 acquired by a with a short lease that a lets expire
	_, err = a.AcquireLease(ctx, "r2", 150*time.Millisecond, AcquireFree)
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond)
	// Then a's renewal no longer holds r2 (but still r1)
	got, err := a.RenewLeases(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"r1": 1}, got)
	// And b can take r2 only as a failover
	_, err = b.AcquireLease(ctx, "r2", time.Second, AcquireFree)
	require.ErrorIs(t, err, ErrLeaseHeld)
	require.ErrorContains(t, err, "expired")
	l, err = b.AcquireLease(ctx, "r2", 5*time.Second, AcquireExpired)
	require.NoError(t, err)
	require.Equal(t, uint64(2), l.Epoch)
	// And a's renewal after that still leaves r2 out, and a cannot take it back
	got, err = a.RenewLeases(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"r1": 1}, got)
	_, err = a.AcquireLease(ctx, "r2", time.Second, AcquireExpired)
	require.ErrorIs(t, err, ErrLeaseHeld)
	got, err = b.RenewLeases(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"r2": 2}, got)

	// And releasing no robots releases nothing, and a's release of r2
	// (b's now) is skipped
	require.NoError(t, b.ReleaseLeases(ctx, nil))
	require.NoError(t, a.ReleaseLeases(ctx, []string{"r2"}))
	got, err = b.RenewLeases(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"r2": 2}, got)
	// When b hands r2 back
	require.NoError(t, b.ReleaseLeases(ctx, []string{"r2"}))
	// Then b no longer renews it and a takes it freely, at a new epoch
	got, err = b.RenewLeases(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, got)
	l, err = a.AcquireLease(ctx, "r2", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	require.Equal(t, uint64(3), l.Epoch)

	// When a restarts (a new run of the same id) while its leases run
	crash(a)
	a2 := c.open("a")
	// Then its old run's leases are not renewed by the new run
	got, err = a2.RenewLeases(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, got)
	// And it takes them back freely, each at a new epoch
	l, err = a2.AcquireLease(ctx, "r1", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	require.Equal(t, uint64(2), l.Epoch)

	// And every lease row is there, remaining time from the database's clock
	ls, err := b.Leases(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, "r1", ls[0].RobotID)
	require.Equal(t, "a", ls[0].Owner)
	require.True(t, ls[0].Live())
	require.Equal(t, uint64(3), ls[1].Epoch)
	require.True(t, ls[1].Live(), "r2's lease of a's previous run runs until it expires")
	require.Equal(t, "a", ls[1].Owner)
	require.NotEqual(t, a2.Info().Instance, ls[1].Instance)

	// And the audit trail tells every acquisition and the release
	recs := auditAll(t, b, AuditQuery{Type: "lease"})
	var sums []string
	for _, r := range recs {
		sums = append(sums, r.Type+": "+r.Summary)
	}
	require.Equal(t, []string{
		"lease.acquired: bridge a took robot r1 at epoch 1",
		"lease.acquired: bridge a took robot r2 at epoch 1",
		sums[2], // from bridge a, expired some time before
		"lease.released: bridge b released robot r2 (epoch 2)",
		"lease.acquired: bridge a took robot r2 at epoch 3 (bridge b had released it at epoch 2)",
		sums[5],
	}, sums)
	require.Regexp(t, `^lease.acquired: bridge b took robot r2 at epoch 2 from bridge a, whose lease had expired \d+\.\d s before$`, sums[2])
	require.Regexp(t, `^lease.acquired: bridge a took robot r1 at epoch 2 again after a restart \(the lease of its previous run had \d+\.\d s left\)$`, sums[5])
	require.Equal(t, "b", recs[2].Actor)
	require.Equal(t, "r2", recs[2].RobotID)
}

func TestCluster_RacingFailoversTakeEachEpochOnce(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	// Given a robot whose lease expires again and again, and six bridges
	// with two goroutines each racing to take it over every time
	const bridges, each, rounds = 6, 2, 8
	var stores []*Store
	for i := range bridges {
		stores = append(stores, c.open(fmt.Sprintf("b%d", i)))
	}
	dead := c.open("dead")
	// The lease outlives a round (the race detector makes a round slow),
	// so a round has one winner; the invariant checked below — one
	// bridge per epoch, epochs growing — holds whatever the timing.
	const ttl = 400 * time.Millisecond
	_, err := dead.AcquireLease(ctx, "r1", ttl, AcquireFree)
	require.NoError(t, err)
	type win struct {
		owner string
		epoch uint64
	}
	var winners []win
	for range rounds {
		time.Sleep(ttl + 50*time.Millisecond) // the lease has expired
		var mu sync.Mutex
		var got []win
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, s := range stores {
			for range each {
				wg.Go(func() {
					<-start
					l, err := s.AcquireLease(ctx, "r1", ttl, AcquireExpired)
					switch {
					case errors.Is(err, ErrLeaseHeld):
					case err != nil:
						t.Errorf("AcquireLease: %v", err)
					default:
						mu.Lock()
						got = append(got, win{s.conf.BridgeID, l.Epoch})
						mu.Unlock()
					}
				})
			}
		}
		close(start)
		wg.Wait()
		// Then in every round one bridge won, at one epoch (its second
		// goroutine may only have extended its own lease)
		require.NotEmpty(t, got)
		for _, w := range got {
			require.Equal(t, got[0], w, "two bridges won one round: %v", got)
		}
		winners = append(winners, got[0])
	}
	// And the epochs grew by one per round, never repeating
	for i, w := range winners {
		require.Equal(t, uint64(i+2), w.epoch, "%v", winners)
	}
	// And the audit holds exactly one acquisition per epoch
	recs := auditAll(t, dead, AuditQuery{Type: AuditLeaseAcquired})
	require.Len(t, recs, rounds+1)
}

// liveTask records a task of robot that is executing.
func liveTask(t *testing.T, s *Store, id, robot string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{TaskID: id, RobotID: robot, Tool: "move_base_to", To: fsm.Requested, At: t0, By: "agent"}))
	st, ok := fsm.Next(fsm.Requested, fsm.EvPreauthorized)
	require.True(t, ok)
	require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{TaskID: id, RobotID: robot, Tool: "move_base_to", From: fsm.Requested, To: st, Event: fsm.EvPreauthorized, At: t0, By: "config"}))
	ex, ok := fsm.Next(st, fsm.EvStart)
	require.True(t, ok)
	require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{TaskID: id, RobotID: robot, Tool: "move_base_to", From: st, To: ex, Event: fsm.EvStart, At: t0, By: "supervisor"}))
}

// pendingOf records a pending approval and an active grant of robot.
func pendingOf(t *testing.T, s *Store, robot string) (approvalID, grantID string) {
	t.Helper()
	ctx := context.Background()
	a := testApproval("apr_"+robot, "task-x-"+robot, approval.StatusPending)
	a.RobotID = robot
	require.NoError(t, s.SaveApproval(ctx, a))
	g := approval.Grant{
		ID: "grt_" + robot, Kind: approval.GrantOnce, Tool: "move_base_to", RobotID: robot, Status: approval.GrantActive,
		CreatedBy: "alice", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
	require.NoError(t, s.SaveGrant(ctx, g))
	return a.ID, g.ID
}

func TestCluster_TakeOverInterruptsTheDeadBridgesTasksOfThatRobot(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	// Given bridge a driving r1 (a task executing, a request pending, a
	// grant active) and r2, and killed
	a := c.open("a")
	b := c.open("b")
	for _, r := range []string{"r1", "r2"} {
		_, err := a.AcquireLease(ctx, r, 100*time.Millisecond, AcquireFree)
		require.NoError(t, err)
		liveTask(t, a, "task-"+r, r)
	}
	apr, grt := pendingOf(t, a, "r1")
	pendingOf(t, a, "r2")
	crash(a)
	// When the lease has expired and bridge b takes r1 over
	time.Sleep(200 * time.Millisecond)
	rep, err := b.TakeOver(ctx, "r1", TakeoverInput{By: "alice", Mode: "operator", TTL: 5 * time.Second})
	require.NoError(t, err)
	// Then b holds r1 at the next epoch, from a
	require.Equal(t, uint64(2), rep.Lease.Epoch)
	require.Equal(t, "b", rep.Lease.Owner)
	require.Equal(t, "a", rep.From)
	require.Equal(t, uint64(1), rep.FromEpoch)
	// And r1's task is interrupted, its request expired, its grant ended,
	// naming the bridge that went silent
	require.Equal(t, []InterruptedTask{{ID: "task-r1", Tool: "move_base_to", From: fsm.Executing, RobotID: "r1"}}, rep.Interrupted)
	require.Equal(t, []string{apr}, rep.ExpiredApprovals)
	require.Equal(t, []string{grt}, rep.EndedGrants)
	v, err := b.Task(ctx, "task-r1")
	require.NoError(t, err)
	require.Equal(t, fsm.Interrupted, v.Status)
	require.Contains(t, v.Text, "bridge a stopped renewing its lease on robot r1; bridge b took the robot over")
	trs, err := b.Transitions(ctx, "task-r1")
	require.NoError(t, err)
	require.Equal(t, "alice", trs[len(trs)-1].By)
	ap, err := b.Approval(ctx, apr)
	require.NoError(t, err)
	require.Equal(t, approval.StatusExpired, ap.Status)
	// And r2's are untouched
	v, err = b.Task(ctx, "task-r2")
	require.NoError(t, err)
	require.Equal(t, fsm.Executing, v.Status)
	pend, err := b.PendingApprovals(ctx, nil)
	require.NoError(t, err)
	require.Len(t, pend, 1)
	require.Equal(t, "r2", pend[0].RobotID)
	// And the failover is audited by the operator
	recs := auditAll(t, b, AuditQuery{Type: AuditFailover})
	require.Len(t, recs, 1)
	require.Equal(t, "alice", recs[0].Actor)
	require.Regexp(t, `^failover \(operator\): bridge b took robot r1 over at epoch 2 from bridge a \(epoch 1\), whose lease had expired \d+\.\d s before; 1 task\(s\) interrupted$`, recs[0].Summary)
	// And a second takeover of r1 is refused: b holds it
	_, err = b.TakeOver(ctx, "r1", TakeoverInput{By: "alice", TTL: time.Second})
	require.ErrorIs(t, err, ErrLeaseOwned)
}

func TestCluster_RecoverTouchesOnlyItsOwnRobotsAndKeys(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	// Given bridges a and b, each with a live task, a pending request, a
	// grant and an idempotency reservation without its task
	a := c.open("a")
	b := c.open("b")
	liveTask(t, a, "task-a", "ra")
	liveTask(t, b, "task-b", "rb")
	pendingOf(t, a, "ra")
	pendingOf(t, b, "rb")
	_, ok, err := a.Reserve(ctx, "agent\x00ka", "grasp", "h")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.Reserve(ctx, "agent\x00kb", "grasp", "h")
	require.NoError(t, err)
	require.True(t, ok)
	// When bridge a is killed and restarts
	crash(a)
	a2 := c.open("a")
	require.False(t, a2.Info().CleanShutdown)
	// Then its recovery without its robots is refused
	_, err = a2.Recover(ctx, RecoverInput{StopSent: true})
	require.ErrorContains(t, err, "RecoverInput.Robots is required in cluster mode")
	rep, err := a2.Recover(ctx, RecoverInput{Robots: []string{"ra"}, StopSent: true})
	require.NoError(t, err)
	// And it interrupts a's task, expires a's request, ends a's grant,
	// releases a's reservation
	require.Equal(t, []InterruptedTask{{ID: "task-a", Tool: "move_base_to", From: fsm.Executing, RobotID: "ra"}}, rep.Interrupted)
	require.Equal(t, []string{"apr_ra"}, rep.ExpiredApprovals)
	require.Equal(t, []string{"grt_ra"}, rep.EndedGrants)
	require.Equal(t, 1, rep.ReleasedKeys)
	// And none of bridge b's
	v, err := b.Task(ctx, "task-b")
	require.NoError(t, err)
	require.Equal(t, fsm.Executing, v.Status)
	pend, err := b.PendingApprovals(ctx, []string{"rb", "ra"})
	require.NoError(t, err)
	require.Len(t, pend, 1)
	require.Equal(t, "apr_rb", pend[0].ID)
	rec, ok, err := b.Lookup(ctx, "agent\x00kb")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, toolapi.IdemPending, rec.State)
	_, ok, err = b.Lookup(ctx, "agent\x00ka")
	require.NoError(t, err)
	require.False(t, ok)
	// And the robot lookups name each record's robot
	for _, tc := range []struct {
		fn   func(context.Context, string) (string, error)
		id   string
		want string
	}{{b.ApprovalRobot, "apr_rb", "rb"}, {b.GrantRobot, "grt_ra", "ra"}, {b.TaskRobot, "task-b", "rb"}} {
		got, err := tc.fn(ctx, tc.id)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err = b.TaskRobot(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestCluster_IdempotencyKeysAreGlobal(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	a := c.open("a")
	b := c.open("b")
	// Given a key reserved on bridge a
	_, ok, err := a.Reserve(ctx, "agent\x00same", "grasp", "h")
	require.NoError(t, err)
	require.True(t, ok)
	// When the same key reaches bridge b
	rec, ok, err := b.Reserve(ctx, "agent\x00same", "grasp", "h")
	// Then b finds a's reservation and reserves nothing
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, toolapi.IdemPending, rec.State)
	var owner string
	require.NoError(t, b.r.QueryRow(`SELECT bridge_id FROM idempotency`).Scan(&owner))
	require.Equal(t, "a", owner)
}

// next reads one notice, failing after a while.
func next(t *testing.T, ch <-chan Notice) Notice {
	t.Helper()
	select {
	case n, ok := <-ch:
		require.True(t, ok, "the notices closed")
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("no notice")
	}
	return Notice{}
}

// until reads notices until one matches, and returns it.
func until(t *testing.T, ch <-chan Notice, match func(Notice) bool) Notice {
	t.Helper()
	for {
		if n := next(t, ch); match(n) {
			return n
		}
	}
}

func TestCluster_ListenHearsTheOtherBridgesWrites(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	a := c.open("a")
	b := c.open("b")
	// Given bridge a listening
	ch, err := a.Listen(ctx)
	require.NoError(t, err)
	// Then it hears a resync first
	require.Equal(t, Notice{Kind: NoticeResync}, next(t, ch))
	// When bridge b writes, each kind of record
	_, err = b.AcquireLease(ctx, "r1", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	b.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, RobotID: "r1", By: "op", Reason: "drill"})
	require.NoError(t, b.SyncLatches(ctx))
	apr, grt := pendingOf(t, b, "r1")
	create(t, b, "task-1", "grasp", nil, "agent", t0)
	seq, err := b.PostMail(ctx, "a", "r1", "approve", []byte(`{"id":"x"}`))
	require.NoError(t, err)
	// Then a hears each, from b, in commit order
	want := []Notice{
		{Kind: NoticeLease, RobotID: "r1", From: "b"},
		{Kind: NoticeLatch, RobotID: "r1", From: "b"},
		{Kind: NoticeApproval, RobotID: "r1", ID: apr, From: "b"},
		{Kind: NoticeGrant, RobotID: "r1", ID: grt, From: "b"},
		{Kind: NoticeTask, ID: "task-1", From: "b"},
		{Kind: NoticeMail, RobotID: "r1", ID: "a", From: "b", Seq: seq},
	}
	for _, w := range want {
		require.Equal(t, w, next(t, ch))
	}
	// And when a answers the mail, b hears the answer
	chB, err := b.Listen(ctx)
	require.NoError(t, err)
	require.Equal(t, NoticeResync, next(t, chB).Kind)
	mails, err := a.TakeMail(ctx)
	require.NoError(t, err)
	require.Len(t, mails, 1)
	require.NoError(t, a.AnswerMail(ctx, seq, 200, []byte(`ok`)))
	require.Equal(t, Notice{Kind: NoticeAnswer, RobotID: "r1", ID: "b", From: "a", Seq: seq},
		until(t, chB, func(n Notice) bool { return n.Kind == NoticeAnswer }))
	// And the channel closes when the store closes
	require.NoError(t, a.Close())
	for range ch {
	}
}

func TestCluster_ListenResyncsAfterTheServerRestarts(t *testing.T) {
	// Given two bridges on a server of their own, a listening
	pg := pgtest.New(t)
	dsn := pg.CreateDB(t)
	open := func(id string) *Store {
		s, err := Open(context.Background(), Conf{
			Driver: DriverPostgres, DSN: dsn, BridgeID: id, Clock: clockwork.NewFakeClockAt(t0),
			Logger: quietLogger(), BusyTimeout: 2 * time.Second,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("a"), open("b")
	ctx := context.Background()
	ch, err := a.Listen(ctx)
	require.NoError(t, err)
	require.Equal(t, NoticeResync, next(t, ch).Kind)
	// When the server restarts, and b writes as soon as it is back —
	// perhaps before a listens again
	require.NoError(t, pg.Restart())
	require.Eventually(t, func() bool {
		return b.SaveApproval(ctx, func() approval.Approval {
			x := testApproval("apr_after", "task-after", approval.StatusPending)
			return x
		}()) == nil
	}, 30*time.Second, 20*time.Millisecond)
	// Then a hears a resync after the reconnect, and its re-read finds
	// b's write whether or not its own notice arrived
	until(t, ch, func(n Notice) bool { return n.Kind == NoticeResync })
	var got approval.Approval
	require.Eventually(t, func() bool { // the pool's connections died with the server
		got, err = a.Approval(ctx, "apr_after")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, approval.StatusPending, got.Status)
	// And notices flow again
	create(t, b, "task-z", "grasp", nil, "agent", t0)
	until(t, ch, func(n Notice) bool { return n.Kind == NoticeTask && n.ID == "task-z" })
}

func TestCluster_AListenerThatFallsBehindGetsAResync(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	a := c.open("a")
	b := c.open("b")
	ch, err := a.Listen(ctx)
	require.NoError(t, err)
	require.Equal(t, NoticeResync, next(t, ch).Kind)
	// Given more notices than the channel holds, while no one reads
	const n = listenBuffer + 200
	require.NoError(t, b.tx(ctx, "test", func(tx txn) error {
		for i := range n {
			if err := notify(ctx, tx, Notice{Kind: NoticeTask, ID: fmt.Sprint("t", i)}); err != nil {
				return err
			}
		}
		return nil
	}))
	// When the consumer reads: a full buffer, then a resync in place of
	// what was dropped
	deadline := time.After(20 * time.Second)
	for len(ch) < listenBuffer {
		select {
		case <-deadline:
			t.Fatalf("only %d notices buffered", len(ch))
		case <-time.After(10 * time.Millisecond):
		}
	}
	for i := range listenBuffer {
		require.Equal(t, fmt.Sprint("t", i), next(t, ch).ID)
	}
	require.Equal(t, NoticeResync, next(t, ch).Kind, "the dropped notices must be replaced by a resync")
	// And later notices flow again
	create(t, b, "task-later", "grasp", nil, "agent", t0)
	until(t, ch, func(n Notice) bool { return n.ID == "task-later" })
}

func TestCluster_MailboxAnswerOrAbandonExactlyOneWins(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	a := c.open("a") // the owner
	b := c.open("b") // the sender
	// Given mail from b to a, taken and answered
	seq, err := b.PostMail(ctx, "a", "r1", "decide", []byte(`{"approve":true}`))
	require.NoError(t, err)
	_, settled, err := b.MailAnswerOf(ctx, seq)
	require.NoError(t, err)
	require.False(t, settled)
	mails, err := b.TakeMail(ctx)
	require.NoError(t, err)
	require.Empty(t, mails, "mail to a is not b's to take")
	mails, err = a.TakeMail(ctx)
	require.NoError(t, err)
	require.Len(t, mails, 1)
	require.Equal(t, Mail{Seq: seq, From: "b", To: "a", RobotID: "r1", Kind: "decide", Body: []byte(`{"approve":true}`), CreatedAt: mails[0].CreatedAt}, mails[0])
	ans, err := b.AbandonMail(ctx, seq)
	require.NoError(t, err)
	require.Equal(t, MailTaken, ans.State, "taken mail is being executed: the sender keeps waiting")
	require.ErrorIs(t, b.AnswerMail(ctx, seq, 200, nil), ErrMailState)
	require.NoError(t, a.AnswerMail(ctx, seq, 200, []byte(`done`)))
	require.ErrorIs(t, a.AnswerMail(ctx, seq, 500, nil), ErrMailState, "answered once")
	ans, settled, err = b.MailAnswerOf(ctx, seq)
	require.NoError(t, err)
	require.True(t, settled)
	require.Equal(t, MailAnswer{Status: 200, Body: []byte(`done`), State: MailAnswered}, ans)
	ans, err = b.AbandonMail(ctx, seq)
	require.NoError(t, err)
	require.Equal(t, MailAnswered, ans.State)

	// When the sender gives up while the owner takes, again and again
	for i := range 30 {
		seq, err := b.PostMail(ctx, "a", "r1", "decide", nil)
		require.NoError(t, err)
		var took bool
		var abandoned MailAnswer
		var wg sync.WaitGroup
		wg.Go(func() {
			ms, err := a.TakeMail(ctx)
			if err != nil {
				t.Errorf("TakeMail: %v", err)
				return
			}
			for _, m := range ms {
				took = took || m.Seq == seq
				if err := a.AnswerMail(ctx, m.Seq, 200, nil); err != nil {
					t.Errorf("AnswerMail: %v", err)
				}
			}
		})
		wg.Go(func() {
			ans, err := b.AbandonMail(ctx, seq)
			if err != nil {
				t.Errorf("AbandonMail: %v", err)
			}
			abandoned = ans
		})
		wg.Wait()
		// Then exactly one of them won
		final, settled, err := b.MailAnswerOf(ctx, seq)
		require.NoError(t, err)
		require.True(t, settled)
		if took {
			require.Contains(t, []string{MailTaken, MailAnswered}, abandoned.State, "round %d", i)
			require.Equal(t, MailAnswered, final.State)
		} else {
			require.Equal(t, MailAbandoned, abandoned.State, "round %d", i)
			require.Equal(t, MailAbandoned, final.State)
		}
	}

	// And mail that waited longer than MailMaxAge is never run late
	seq, err = b.PostMail(ctx, "a", "r1", "decide", nil)
	require.NoError(t, err)
	_, err = b.w.Exec(`UPDATE mailbox SET created_at = created_at - $1 WHERE seq = $2`, int64(MailMaxAge+time.Second), seq)
	require.NoError(t, err)
	mails, err = a.TakeMail(ctx)
	require.NoError(t, err)
	require.Empty(t, mails)
	ans, _, err = b.MailAnswerOf(ctx, seq)
	require.NoError(t, err)
	require.Equal(t, MailAbandoned, ans.State)
	_, _, err = b.MailAnswerOf(ctx, 999999)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestCluster_AStaleRunOfABridgeCanNeitherRenewNorWrite(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	// Given bridge a holding r1
	a := c.open("a")
	_, err := a.AcquireLease(ctx, "r1", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	// When its lock's session dies (a lost connection) and a new run of
	// bridge a starts meanwhile
	a.own.mu.Lock()
	pid := a.own.pid
	a.own.mu.Unlock()
	var killed bool
	require.NoError(t, a.w.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)
	var a2 *Store
	require.Eventually(t, func() bool {
		s, err := Open(ctx, c.conf("a"))
		a2 = s
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { _ = a2.Close() })
	// Then the old run can neither renew its lease nor write anything
	_, err = a.RenewLeases(ctx, 5*time.Second)
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, `runs as bridge "a"`)
	_, err = a.AcquireLease(ctx, "r2", time.Second, AcquireFree)
	require.ErrorIs(t, err, ErrLocked)
	// And the new run takes the robot at a new epoch
	l, err := a2.AcquireLease(ctx, "r1", 5*time.Second, AcquireFree)
	require.NoError(t, err)
	require.Equal(t, uint64(2), l.Epoch)
}

func TestCluster_BridgesAreKnownWithTheirLastRenewal(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	a := c.open("a")
	b := c.open("b")
	require.NoError(t, a.SetBridgeURL(ctx, "http://10.0.0.1:8080"))
	time.Sleep(100 * time.Millisecond)
	_, err := b.RenewLeases(ctx, time.Second)
	require.NoError(t, err)
	brs, err := a.Bridges(ctx)
	require.NoError(t, err)
	require.Len(t, brs, 2)
	require.Equal(t, "a", brs[0].ID)
	require.True(t, brs[0].Self)
	require.Equal(t, "http://10.0.0.1:8080", brs[0].URL)
	require.Equal(t, a.Info().Instance, brs[0].Instance)
	require.False(t, brs[1].Self)
	require.Greater(t, brs[0].SeenAgo, brs[1].SeenAgo, "b renewed after a started")
	require.GreaterOrEqual(t, brs[0].SeenAgo, 100*time.Millisecond)
	require.Less(t, brs[1].SeenAgo, 100*time.Millisecond)
}

// BenchmarkLeaseRenew renews the leases of 20 robots: one statement (and
// the write lock's owner check) per renewal.
func BenchmarkLeaseRenew(b *testing.B) {
	dsn := pgtest.Shared(b).CreateDB(b)
	s, err := Open(context.Background(), Conf{Driver: DriverPostgres, DSN: dsn, BridgeID: "bench", Logger: quietLogger()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for i := range 20 {
		_, err := s.AcquireLease(ctx, fmt.Sprintf("r%02d", i), time.Minute, AcquireFree)
		require.NoError(b, err)
	}
	var lat latencies
	for b.Loop() {
		t1 := time.Now()
		got, err := s.RenewLeases(ctx, time.Minute)
		if err != nil || len(got) != 20 {
			b.Fatalf("renew: %v, %d leases", err, len(got))
		}
		lat = append(lat, time.Since(t1))
	}
	lat.report(b, "renew-")
}

func TestMigrate_V4DatabaseLearnsTheRobotOfApprovalsAndGrants(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a version 4 database with an approval and a grant whose
		// robot is only in their JSON, and an idempotency reservation
		dir := t.TempDir()
		db := e.rawDB(t, dir)
		_, v, err := migrateTo(context.Background(), e.dialect(), db, t0, 4)
		require.NoError(t, err)
		require.Equal(t, 4, v)
		d := e.dialect()
		for _, q := range []string{
			`INSERT INTO meta(key, value) VALUES('store_id', 'v4store'), ('running', '0')`,
			`INSERT INTO approvals(id, tool, status, data, created_at, updated_at) VALUES('apr_old', 'grasp', 'pending', '{"id":"apr_old","robot_id":"arm-2"}', 1, 1)`,
			`INSERT INTO approvals(id, tool, status, data, created_at, updated_at) VALUES('apr_older', 'grasp', 'pending', '{"id":"apr_older"}', 1, 1)`,
			`INSERT INTO grants(id, kind, tool, status, data, created_at, expires_at, updated_at) VALUES('grt_old', 'once', 'grasp', 'active', '{"id":"grt_old","robot_id":"arm-2"}', 1, 2, 1)`,
		} {
			_, err := db.Exec(d.bind(q))
			require.NoError(t, err, q)
		}
		_, err = db.Exec(d.bind(`INSERT INTO idempotency(key, tool, args_hash, state, created_at) VALUES(?, 'grasp', 'h', 'pending', 1)`), d.key("agent\x00k"))
		require.NoError(t, err)
		require.NoError(t, db.Close())
		// When this build opens it
		s, _ := e.open(t, dir)
		require.Equal(t, []int{5}, s.Info().Migrated)
		ctx := context.Background()
		// Then the robot of each record is a column
		r, err := s.ApprovalRobot(ctx, "apr_old")
		require.NoError(t, err)
		require.Equal(t, "arm-2", r)
		r, err = s.ApprovalRobot(ctx, "apr_older")
		require.NoError(t, err)
		require.Empty(t, r)
		r, err = s.GrantRobot(ctx, "grt_old")
		require.NoError(t, err)
		require.Equal(t, "arm-2", r)
		// And the old reservation belongs to no bridge
		var b string
		require.NoError(t, s.r.QueryRow(`SELECT bridge_id FROM idempotency`).Scan(&b))
		require.Empty(t, b)
	})
}

func TestCluster_RecoverAuditsWhichBridgeStarted(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	// Given bridge a on a new store, and bridge b joining it later
	a := c.open("a")
	_, err := a.Recover(ctx, RecoverInput{Robots: []string{"ra"}, StopSent: true})
	require.NoError(t, err)
	b := c.open("b")
	require.False(t, b.Info().Fresh)
	require.True(t, b.Info().CleanShutdown, "a first run has no crash to answer")
	_, err = b.Recover(ctx, RecoverInput{Robots: []string{"rb"}, StopSent: true})
	require.NoError(t, err)
	// When b restarts after a clean shutdown
	require.NoError(t, b.Close())
	b2 := c.open("b")
	_, err = b2.Recover(ctx, RecoverInput{Robots: []string{"rb"}, StopSent: true})
	require.NoError(t, err)
	// Then the audit says which bridge started and how
	recs := auditAll(t, b2, AuditQuery{Type: "bridge"})
	require.Len(t, recs, 3)
	require.Equal(t, []string{AuditBridgeStart, AuditBridgeStart, AuditBridgeRestart}, types(recs))
	require.Equal(t, "bridge a started with a new store", recs[0].Summary)
	require.Equal(t, "bridge b started (its first run on the cluster's store)", recs[1].Summary)
	require.Equal(t, "bridge b restarted after a clean shutdown", recs[2].Summary)
}
