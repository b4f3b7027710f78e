package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Audit record types of leases (the family "lease"). The spec's
// lease_acquired, lease_released and failover became these: the audit
// API reads a type without a dot as a family, so only dotted types can
// be filtered one by one.
const (
	AuditLeaseAcquired = "lease.acquired"
	AuditLeaseReleased = "lease.released"
	AuditFailover      = "lease.failover"
)

// Lease is one robot's lease row. Times are the database's clock.
type Lease struct {
	RobotID  string `json:"robot_id"`
	Owner    string `json:"owner"`
	Instance string `json:"instance"`
	// Epoch grows by one on every acquisition, whoever acquires; a lease
	// row is never deleted, so it never goes back.
	Epoch      uint64    `json:"epoch"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Released   bool      `json:"released"`
	// Remaining is ExpiresAt minus the database's now at the read
	// (negative once expired; released leases expired when released).
	Remaining time.Duration `json:"remaining"`
}

// Live says whether the lease holds: not released and not expired at the
// read.
func (l Lease) Live() bool { return !l.Released && l.Remaining > 0 }

// ErrLeaseHeld says the robot's lease is held by another bridge (or another
// bridge's lease expired and only a takeover, AcquireExpired, may take
// it). The error is a *LeaseHeldError.
var ErrLeaseHeld = errors.New("robot lease held by another bridge")

// ErrLeaseOwned refuses a TakeOver of a robot whose lease this bridge
// holds already.
var ErrLeaseOwned = errors.New("robot lease already held by this bridge")

// LeaseHeldError is ErrLeaseHeld with the lease that stands in the way.
type LeaseHeldError struct{ Lease Lease }

// Error implements error.
func (e *LeaseHeldError) Error() string {
	l := e.Lease
	if l.Remaining > 0 {
		return fmt.Sprintf("robot %s: lease held by bridge %s (epoch %d, %s left)", l.RobotID, l.Owner, l.Epoch, secs(l.Remaining))
	}
	return fmt.Sprintf("robot %s: lease of bridge %s (epoch %d) expired %s ago; only a takeover may take the robot", l.RobotID, l.Owner, l.Epoch, secs(-l.Remaining))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// AcquireMode says which leases AcquireLease may take.
type AcquireMode int

const (
	// AcquireFree takes a robot without a lease row, with a released
	// lease, or with a lease of this bridge id: its own lease that expired,
	// or one an earlier run (instance) of this bridge held, expired or
	// not — the bridge id's lock proves that run is over.
	AcquireFree AcquireMode = iota
	// AcquireExpired also takes another bridge's expired lease (failover).
	AcquireExpired
)

func (m AcquireMode) String() string {
	if m == AcquireExpired {
		return "expired"
	}
	return "free"
}

// leaseRow reads one lease and the database's now; have is false
// without a row.
func leaseRow(ctx context.Context, tx txn, robotID string) (l Lease, have bool, now int64, err error) {
	var (
		owner, instance sql.NullString
		epoch, acq, exp sql.NullInt64
		released        sql.NullInt64
	)
	err = tx.queryRow(ctx, `SELECT l.owner, l.instance, l.epoch, l.acquired_at, l.expires_at, l.released, n.now
		FROM (SELECT `+dbNow+` AS now) n LEFT JOIN leases l ON l.robot_id = ?`, robotID).
		Scan(&owner, &instance, &epoch, &acq, &exp, &released, &now)
	if err != nil || !owner.Valid {
		return Lease{RobotID: robotID}, false, now, err
	}
	l = Lease{
		RobotID: robotID, Owner: owner.String, Instance: instance.String, Epoch: uint64(epoch.Int64),
		AcquiredAt: fromNS(acq.Int64), ExpiresAt: fromNS(exp.Int64), Released: released.Int64 != 0,
		Remaining: time.Duration(exp.Int64 - now),
	}
	return l, true, now, nil
}

// acquired is what acquireTx did.
type acquired struct {
	lease Lease
	prev  Lease // the row before, if any
	had   bool  // a row existed
	// already: this instance held the lease, unexpired; it was only
	// extended (no new epoch, no audit record).
	already bool
}

// acquireTx is AcquireLease inside tx: the decision, the new epoch, the
// audit record and the notice.
func (s *Store) acquireTx(ctx context.Context, tx txn, robotID string, ttl time.Duration, mode AcquireMode, actor, via string) (acquired, error) {
	prev, had, now, err := leaseRow(ctx, tx, robotID)
	if err != nil {
		return acquired{}, err
	}
	me, inst := s.conf.BridgeID, s.info.Instance
	out := acquired{prev: prev, had: had}
	if had && !prev.Released {
		switch {
		case prev.Owner == me && prev.Instance == inst && prev.Remaining > 0:
			if _, err := tx.exec(ctx, `UPDATE leases SET expires_at=? WHERE robot_id=? AND epoch=?`, now+int64(ttl), robotID, int64(prev.Epoch)); err != nil {
				return acquired{}, err
			}
			out.lease, out.already = prev, true
			out.lease.ExpiresAt, out.lease.Remaining = fromNS(now+int64(ttl)), ttl
			return out, nil
		case prev.Owner == me:
			// Our own lease that expired, or an earlier run's.
		case prev.Remaining > 0, mode != AcquireExpired:
			return acquired{}, &LeaseHeldError{Lease: prev}
		}
	}
	epoch := uint64(1)
	if had {
		epoch = prev.Epoch + 1
	}
	res, err := tx.exec(ctx, `INSERT INTO leases(robot_id, owner, instance, epoch, acquired_at, expires_at, released) VALUES(?, ?, ?, ?, ?, ?, 0)
		ON CONFLICT(robot_id) DO UPDATE SET owner=excluded.owner, instance=excluded.instance, epoch=excluded.epoch,
			acquired_at=excluded.acquired_at, expires_at=excluded.expires_at, released=0
		WHERE leases.epoch = ?`,
		robotID, me, inst, int64(epoch), now, now+int64(ttl), int64(prev.Epoch))
	if err != nil {
		return acquired{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return acquired{}, err
	} else if n != 1 {
		return acquired{}, fmt.Errorf("robot %s: the lease changed while it was being acquired; %w", robotID, ErrUnavailable)
	}
	out.lease = Lease{RobotID: robotID, Owner: me, Instance: inst, Epoch: epoch, AcquiredAt: fromNS(now), ExpiresAt: fromNS(now + int64(ttl)), Remaining: ttl}
	summary := fmt.Sprintf("bridge %s took robot %s at epoch %d", me, robotID, epoch)
	details := map[string]any{"epoch": epoch, "mode": mode.String(), "ttl_ms": ttl.Milliseconds(), "instance": inst, "via": via}
	switch {
	case !had:
	case prev.Released:
		summary += fmt.Sprintf(" (bridge %s had released it at epoch %d)", prev.Owner, prev.Epoch)
	case prev.Owner == me && prev.Instance != inst:
		summary += " again after a restart"
		if prev.Remaining > 0 {
			summary += fmt.Sprintf(" (the lease of its previous run had %s left)", secs(prev.Remaining))
		} else {
			summary += fmt.Sprintf(" (the lease of its previous run had expired %s before)", secs(-prev.Remaining))
		}
	case prev.Owner == me:
		summary += fmt.Sprintf(" again; its own lease had expired %s before", secs(-prev.Remaining))
	default:
		summary += fmt.Sprintf(" from bridge %s, whose lease had expired %s before", prev.Owner, secs(-prev.Remaining))
	}
	if had {
		details["from"], details["from_epoch"], details["from_instance"] = prev.Owner, prev.Epoch, prev.Instance
		details["from_released"] = prev.Released
		if !prev.Released {
			details["from_expired_ms"] = (-prev.Remaining).Milliseconds()
		}
	}
	if _, err := insertAudit(ctx, tx, AuditRecord{At: s.clock.Now(), Type: AuditLeaseAcquired, Actor: actor, RobotID: robotID, Summary: summary}, details); err != nil {
		return acquired{}, err
	}
	return out, notify(ctx, tx, Notice{Kind: NoticeLease, RobotID: robotID})
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("lease ttl must be positive, got %s", ttl)
	}
	return nil
}

// AcquireLease takes robot robotID's lease for this bridge for ttl (on the
// database's clock), with a new epoch, when mode allows (AcquireMode);
// otherwise it fails with a *LeaseHeldError (ErrLeaseHeld). A lease this
// run already holds, unexpired, is only extended: same epoch, no audit
// record. An acquisition writes, in one transaction, the lease, an audit
// record (AuditLeaseAcquired, by the bridge id) and a NoticeLease.
//
// The lease's expiry is the database's; a bridge that measures its lease
// on its own monotonic clock from the moment it called AcquireLease (or
// RenewLeases) plus ttl never believes it holds the lease longer than the
// database does, whatever the clocks say.
func (s *Store) AcquireLease(ctx context.Context, robotID string, ttl time.Duration, mode AcquireMode) (Lease, error) {
	if err := s.cluster(); err != nil {
		return Lease{}, fmt.Errorf("store: acquire lease: %w", err)
	}
	if err := checkTTL(ttl); err != nil {
		return Lease{}, fmt.Errorf("store: acquire lease: %w", err)
	}
	if robotID == "" {
		return Lease{}, errors.New("store: acquire lease: a robot id is required")
	}
	var a acquired
	err := s.tx(ctx, "lease", func(tx txn) error {
		var err error
		a, err = s.acquireTx(ctx, tx, robotID, ttl, mode, s.conf.BridgeID, "acquire")
		return err
	})
	if err != nil {
		return Lease{}, fmt.Errorf("store: acquire lease: %w", err)
	}
	if !a.already {
		s.log.Info("lease acquired", "robot_id", robotID, "epoch", a.lease.Epoch, "from", a.prev.Owner, "from_epoch", a.prev.Epoch, "mode", mode.String())
	}
	return a.lease, nil
}

// RenewLeases extends every lease this run holds that is neither released
// nor expired (at the database's now) to now+ttl, in one statement that
// also bumps this bridge's seen_at (Bridges), and returns them: robot →
// epoch. A lease that expired is not renewed and is missing from the map
// — whether or not another bridge took it since — so the bridge must stop
// commanding every robot missing from it. Measure the new expiry from the
// moment of the call on the local monotonic clock (AcquireLease).
func (s *Store) RenewLeases(ctx context.Context, ttl time.Duration) (map[string]uint64, error) {
	if err := s.cluster(); err != nil {
		return nil, fmt.Errorf("store: renew leases: %w", err)
	}
	if err := checkTTL(ttl); err != nil {
		return nil, fmt.Errorf("store: renew leases: %w", err)
	}
	out := map[string]uint64{}
	err := s.tx(ctx, "lease", func(tx txn) error {
		clear(out)
		rows, err := tx.query(ctx, `WITH n AS (SELECT `+dbNow+` AS now),
			b AS (UPDATE bridges SET seen_at=(SELECT now FROM n) WHERE id=?)
			UPDATE leases SET expires_at=(SELECT now FROM n) + ?
			WHERE owner=? AND instance=? AND released=0 AND expires_at > (SELECT now FROM n)
			RETURNING robot_id, epoch`,
			s.conf.BridgeID, int64(ttl), s.conf.BridgeID, s.info.Instance)
		if err != nil {
			return err
		}
		defer closeRead(rows)
		for rows.Next() {
			var r string
			var e int64
			if err := rows.Scan(&r, &e); err != nil {
				return err
			}
			out[r] = uint64(e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: renew leases: %w", err)
	}
	return out, nil
}

// ReleaseLeases hands this run's leases of robots back (a clean handover:
// released, expired now), each with an audit record (AuditLeaseReleased)
// and a NoticeLease. No robots releases nothing. A robot whose lease
// this run does not hold (or no longer: another bridge took it) is
// skipped. It returns nothing about which were released: Leases tells.
func (s *Store) ReleaseLeases(ctx context.Context, robots []string) error {
	if err := s.cluster(); err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	if len(robots) == 0 {
		return nil
	}
	var released []Lease
	err := s.tx(ctx, "lease", func(tx txn) error {
		released = nil
		q := `UPDATE leases SET released=1, expires_at=LEAST(expires_at, ` + dbNow + `)
			WHERE owner=? AND instance=? AND released=0`
		args := []any{s.conf.BridgeID, s.info.Instance}
		q += ` AND robot_id IN (` + placeholders(len(robots)) + `)`
		for _, r := range robots {
			args = append(args, r)
		}
		rows, err := tx.query(ctx, q+` RETURNING robot_id, epoch`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var l Lease
			var e int64
			if err := rows.Scan(&l.RobotID, &e); err != nil {
				closeRead(rows)
				return err
			}
			l.Epoch = uint64(e)
			released = append(released, l)
		}
		closeRead(rows)
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(released, func(a, b Lease) int { return compareStrings(a.RobotID, b.RobotID) })
		for _, l := range released {
			if _, err := insertAudit(ctx, tx, AuditRecord{
				At: s.clock.Now(), Type: AuditLeaseReleased, Actor: s.conf.BridgeID, RobotID: l.RobotID,
				Summary: fmt.Sprintf("bridge %s released robot %s (epoch %d)", s.conf.BridgeID, l.RobotID, l.Epoch),
			}, map[string]any{"epoch": l.Epoch, "instance": s.info.Instance}); err != nil {
				return err
			}
			if err := notify(ctx, tx, Notice{Kind: NoticeLease, RobotID: l.RobotID}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	if len(released) > 0 {
		s.log.Info("leases released", "robots", len(released))
	}
	return nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Leases returns every lease row, by robot id, Remaining measured from
// the database's now at the read.
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	if err := s.cluster(); err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	rows, err := s.query(ctx, `SELECT robot_id, owner, instance, epoch, acquired_at, expires_at, released, `+dbNow+` FROM leases ORDER BY robot_id`)
	if err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	defer closeRead(rows)
	var out []Lease
	for rows.Next() {
		var l Lease
		var epoch, acq, exp, rel, now int64
		if err := rows.Scan(&l.RobotID, &l.Owner, &l.Instance, &epoch, &acq, &exp, &rel, &now); err != nil {
			return nil, fmt.Errorf("store: leases: %w", s.classify(err))
		}
		l.Epoch, l.AcquiredAt, l.ExpiresAt, l.Released, l.Remaining = uint64(epoch), fromNS(acq), fromNS(exp), rel != 0, time.Duration(exp-now)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: leases: %w", s.classify(err))
	}
	return out, nil
}

// TakeoverInput says who takes a robot over, and how.
type TakeoverInput struct {
	// By is the actor of the failover's audit record (the operator who
	// confirmed, or the bridge for an automatic failover).
	By string
	// Mode is "operator" or "auto", for the record.
	Mode string
	// TTL is the new lease's.
	TTL time.Duration
}

// TakeoverReport says what TakeOver changed.
type TakeoverReport struct {
	Lease Lease `json:"lease"`
	// From and FromEpoch are the lease's previous owner and epoch ("" and
	// 0 for a robot that never had a lease).
	From      string `json:"from,omitempty"`
	FromEpoch uint64 `json:"from_epoch,omitempty"`
	// Interrupted are the robot's tasks that were live; ExpiredApprovals
	// its pending approvals; EndedGrants its active grants.
	Interrupted      []InterruptedTask `json:"interrupted,omitempty"`
	ExpiredApprovals []string          `json:"expired_approvals,omitempty"`
	EndedGrants      []string          `json:"ended_grants,omitempty"`
	AuditSeq         int64             `json:"audit_seq"`
}

// TakeOver is a failover of one robot, in one transaction: AcquireLease
// with AcquireExpired, then the robot's live tasks become interrupted
// (the records Recover writes for a crash, naming the bridge that went
// silent), its pending approvals expire and its active grants end, and an
// audit record AuditFailover (actor in.By) sums it up. It refuses with
// ErrLeaseHeld while another bridge's lease is unexpired, and with
// ErrLeaseOwned when this run holds the lease already. The caller sends
// the robot a stop with the new epoch first thing after it returns.
func (s *Store) TakeOver(ctx context.Context, robotID string, in TakeoverInput) (TakeoverReport, error) {
	if err := s.cluster(); err != nil {
		return TakeoverReport{}, fmt.Errorf("store: take over: %w", err)
	}
	if err := checkTTL(in.TTL); err != nil {
		return TakeoverReport{}, fmt.Errorf("store: take over: %w", err)
	}
	if robotID == "" {
		return TakeoverReport{}, errors.New("store: take over: a robot id is required")
	}
	if in.By == "" {
		in.By = s.conf.BridgeID
	}
	if in.Mode == "" {
		in.Mode = "operator"
	}
	now := s.clock.Now()
	var rep TakeoverReport
	err := s.tx(ctx, "lease", func(tx txn) error {
		rep = TakeoverReport{}
		a, err := s.acquireTx(ctx, tx, robotID, in.TTL, AcquireExpired, in.By, "takeover:"+in.Mode)
		if err != nil {
			return err
		}
		if a.already {
			return fmt.Errorf("robot %s (epoch %d): %w", robotID, a.lease.Epoch, ErrLeaseOwned)
		}
		rep.Lease = a.lease
		if a.had {
			rep.From, rep.FromEpoch = a.prev.Owner, a.prev.Epoch
		}
		cause := takeoverCause(s.conf.BridgeID, robotID, a)
		if rep.Interrupted, err = s.interruptTasks(ctx, tx, in.By, []string{robotID}, cause, now); err != nil {
			return fmt.Errorf("interrupt tasks: %w", err)
		}
		why := fmt.Sprintf("bridge %s took robot %s over before an operator decided; the request expired and nothing moved", s.conf.BridgeID, robotID)
		if rep.ExpiredApprovals, err = s.expireApprovals(ctx, tx, []string{robotID}, why, now); err != nil {
			return fmt.Errorf("expire approvals: %w", err)
		}
		if rep.EndedGrants, err = s.endGrants(ctx, tx, []string{robotID}, "bridge "+s.conf.BridgeID+" took the robot over; grants do not survive a failover", now); err != nil {
			return fmt.Errorf("end grants: %w", err)
		}
		summary := fmt.Sprintf("failover (%s): bridge %s took robot %s over at epoch %d", in.Mode, s.conf.BridgeID, robotID, a.lease.Epoch)
		if a.had && !a.prev.Released && a.prev.Owner != s.conf.BridgeID {
			summary += fmt.Sprintf(" from bridge %s (epoch %d), whose lease had expired %s before", a.prev.Owner, a.prev.Epoch, secs(-a.prev.Remaining))
		}
		if n := len(rep.Interrupted); n > 0 {
			summary += fmt.Sprintf("; %d task(s) interrupted", n)
		}
		rep.AuditSeq, err = insertAudit(ctx, tx, AuditRecord{At: now, Type: AuditFailover, Actor: in.By, RobotID: robotID, Summary: summary},
			map[string]any{"report": rep, "mode": in.Mode, "bridge_id": s.conf.BridgeID})
		return err
	})
	if err != nil {
		return TakeoverReport{}, fmt.Errorf("store: take over: %w", err)
	}
	s.log.Warn("robot taken over", "robot_id", robotID, "epoch", rep.Lease.Epoch, "from", rep.From, "from_epoch", rep.FromEpoch,
		"mode", in.Mode, "by", in.By, "interrupted", len(rep.Interrupted), "expired_approvals", len(rep.ExpiredApprovals), "ended_grants", len(rep.EndedGrants))
	return rep, nil
}
