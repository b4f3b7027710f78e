package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit (issue 19). Every write transaction of the store goes
// through Store.tx, which queues the write and commits it in a group: the
// write that finds no commit in progress leads, takes what is queued at
// that moment (itself first, up to groupMax writes) and commits it in one
// transaction, that is with one fsync; writes that arrive meanwhile queue
// and the first of them leads the next group as soon as the commit in
// progress is done. There is no timer: a lone write commits at once,
// exactly as before, and a write waits only for the commit that was
// already in progress when it arrived — which, on SQLite's one writer
// connection and PostgreSQL's write lock, it had to wait for anyway.
//
// Every caller returns only once its own write is committed (or failed):
// a leader returns right after its group's commit, never committing
// another group; the next queued writer leads that one. In a group of
// several writes each runs inside a savepoint of its own, so a write whose
// statements fail is rolled back alone and only its caller gets its error;
// the others commit. When the transaction itself fails (it cannot begin,
// the commit fails, or a failed write took the whole transaction down with
// it, as SQLite does on a full disk), every write of the group gets that
// error, each as if its own commit had failed: nothing of it is in force
// and the caller treats it as not written (nothing is retried here).
//
// A write's context is consulted before it is queued. Once queued, its
// statements run under the group's context (no deadline on SQLite, the
// busy timeout on PostgreSQL, as before), so one caller going away can
// never roll back another caller's write that shares its transaction.

// groupMax bounds the writes one group commit takes (on PostgreSQL each
// is a subtransaction; beyond 64 of them a transaction overflows the
// server's per-backend cache).
const groupMax = 32

// writeReq is one write waiting for (or in) a group commit.
type writeReq struct {
	op    string
	fn    func(tx txn) error
	start time.Time
	// err is the write's outcome, set by the group's leader.
	err error
	// done is set by the leader once err is final; guarded by
	// committer.mu.
	done bool
	// wake (cap 1) tells a waiting writer to look again: its write is
	// done, or it may lead the next group.
	wake chan struct{}
}

var writeReqPool = sync.Pool{New: func() any { return &writeReq{wake: make(chan struct{}, 1)} }}

// committer is the store's group commit.
type committer struct {
	mu    sync.Mutex
	queue []*writeReq // guarded by mu; waiting, oldest first
	busy  bool        // guarded by mu; a leader is committing
	spare []*writeReq // guarded by mu; the leader's batch buffer

	// commits counts the transactions leaders ran (each one commit, one
	// fsync when it committed) and writes the writes they carried, for
	// tests and benchmarks (writes/commits is writes per fsync).
	commits atomic.Int64
	writes  atomic.Int64
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tx runs fn as one write, committed in a group (see above), and records
// its duration and failure. It is never retried here: a write whose
// commit failed may or may not have landed, and the caller treats it as
// not written. On PostgreSQL the transaction first takes the store's
// write lock, so commits happen one at a time in seq order, as on
// SQLite's one writer connection (the audit cursor relies on it), and
// checks that this process still holds the store.
func (s *Store) tx(ctx context.Context, op string, fn func(tx txn) error) error {
	if err := ctx.Err(); err != nil {
		err = s.classify(err)
		s.noteErr(op, err)
		return err
	}
	w := writeReqPool.Get().(*writeReq)
	w.op, w.fn, w.start, w.err, w.done = op, fn, time.Now(), nil, false
	c := &s.group
	c.mu.Lock()
	c.queue = append(c.queue, w)
	for c.busy && !w.done {
		c.mu.Unlock()
		<-w.wake
		c.mu.Lock()
	}
	if !w.done {
		c.busy = true
		batch := c.takeLocked(w)
		c.mu.Unlock()
		s.commitGroup(batch)
		c.mu.Lock()
		for _, b := range batch {
			b.done = true
			if b != w {
				signal(b.wake)
			}
		}
		clear(batch)
		c.spare = batch[:0]
		c.busy = false
		if len(c.queue) > 0 {
			signal(c.queue[0].wake)
		}
	}
	c.mu.Unlock()
	err := w.err
	// A stale wake (sent after this writer last looked) may still be in
	// the channel; drain it before the request is reused.
	select {
	case <-w.wake:
	default:
	}
	w.fn, w.err = nil, nil
	writeReqPool.Put(w)
	return err
}

// takeLocked removes the leader's group from the queue: lead first, then
// the oldest waiting, up to groupMax.
func (c *committer) takeLocked(lead *writeReq) []*writeReq {
	batch := append(c.spare[:0], lead)
	c.spare = nil
	rest := c.queue[:0]
	for _, w := range c.queue {
		switch {
		case w == lead:
		case len(batch) < groupMax:
			batch = append(batch, w)
		default:
			rest = append(rest, w)
		}
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	return batch
}

// commitGroup commits batch in one transaction and settles each write's
// outcome: its error (classified, noted for Healthy) or its duration for
// ObserveWrite, measured from when its caller asked.
func (s *Store) commitGroup(batch []*writeReq) {
	s.group.commits.Add(1)
	s.group.writes.Add(int64(len(batch)))
	err := s.runGroup(batch)
	for _, w := range batch {
		e := w.err
		if e == nil {
			e = err
		}
		if e == nil && s.conf.ackLost != nil && s.conf.ackLost(w.op) {
			e = fmt.Errorf("%w: the connection was lost before the commit's answer arrived", ErrUnavailable)
		}
		if e != nil {
			e = s.classify(e)
			s.noteErr(w.op, e)
			w.err = e
			continue
		}
		s.lastErr.Store(nil)
		if s.conf.ObserveWrite != nil {
			s.conf.ObserveWrite(w.op, time.Since(w.start))
		}
	}
}

// savepoint statements of a group's writes. One name serves every
// write: ROLLBACK TO names the newest savepoint of that name, the one
// the failing write began with.
const (
	qSavepoint   = `SAVEPOINT w`
	qRollbackTo  = `ROLLBACK TO SAVEPOINT w`
	qGroupFailed = "a write committed in the same transaction failed: %w"
)

// runGroup runs batch's writes in one transaction and commits it. A
// write that fails alone (its savepoint rolled back) has its err set; the
// returned error is the transaction's, which every write without its own
// error takes.
func (s *Store) runGroup(batch []*writeReq) error {
	ctx := context.Background()
	if s.own != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.conf.BusyTimeout)
		defer cancel()
	}
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	tx := txn{tx: sqlTx, d: s.d, from: s.conf.BridgeID, ctx: ctx, ps: s.stmts}
	fail := func(err error) error {
		_ = sqlTx.Rollback()
		return err
	}
	if s.own != nil {
		if err := s.own.check(ctx, tx); err != nil {
			return fail(err)
		}
	}
	if len(batch) == 1 {
		if err := batch[0].fn(tx); err != nil {
			return fail(err)
		}
		return s.commitTx(sqlTx)
	}
	written := 0
	for _, w := range batch {
		if _, err := tx.exec(ctx, qSavepoint); err != nil {
			return fail(err)
		}
		if err := w.fn(tx); err != nil {
			w.err = err
			if _, rerr := tx.exec(ctx, qRollbackTo); rerr != nil {
				return fail(fmt.Errorf(qGroupFailed, err))
			}
			continue
		}
		written++
	}
	if written == 0 {
		return fail(nil)
	}
	return s.commitTx(sqlTx)
}

func (s *Store) commitTx(sqlTx *sql.Tx) error {
	if s.conf.beforeCommit != nil {
		if err := s.conf.beforeCommit(); err != nil {
			_ = sqlTx.Rollback()
			return err
		}
	}
	return sqlTx.Commit()
}

// preparedQueries are the statements of the hot writes — a transition, a
// task's status, an audit record, the idempotency link, the asynchronous
// writer's task views and safety events, and the group's savepoints —
// prepared once at Open and reused by every transaction (txn.exec looks
// them up by text). Every other statement is prepared when it runs.
func preparedQueries(d *dialect) []string {
	qs := []string{
		qInsertTransition, qCreateTask, qUpdateTaskStatus, qInsertTaskIfMissing,
		qPendingIdempotency, qLinkIdempotency, qUpdateTaskView, qInsertSafetyEvent,
		qSavepoint, qRollbackTo,
	}
	if d.returning {
		return append(qs, qInsertAudit+qReturningSeq)
	}
	return append(qs, qInsertAudit)
}

// prepare prepares preparedQueries on the writer. On SQLite the one
// writer connection keeps them; on PostgreSQL database/sql prepares each
// again on every pooled connection a transaction runs on, once.
func (s *Store) prepare(ctx context.Context) error {
	s.stmts = map[string]*sql.Stmt{}
	for _, q := range preparedQueries(s.d) {
		st, err := s.w.PrepareContext(ctx, s.d.bind(q))
		if err != nil {
			s.closeStmts()
			return fmt.Errorf("store: prepare %.40q…: %w", q, s.classify(err))
		}
		s.stmts[q] = st
	}
	return nil
}

func (s *Store) closeStmts() {
	for _, st := range s.stmts {
		_ = st.Close()
	}
	s.stmts = nil
}
