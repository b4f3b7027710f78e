package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
)

// item is one queued safety event, or a Sync barrier (no Kind). seq
// orders it among the latch changes, which travel apart.
type item struct {
	ev   safety.Event
	seq  uint64
	done chan error
}

// taskUpdate is the newest view of a task waiting to be written.
type taskUpdate = actions.TaskView

// isLatch reports whether an event changes the e-stop or fault latch.
func isLatch(k safety.EventKind) bool {
	switch k {
	case safety.EventEStopPressed, safety.EventEStopReset, safety.EventFaultLatched, safety.EventFaultCleared:
		return true
	}
	return false
}

// ErrLatchNotRecorded says that a latch change (e-stop pressed or reset, fault
// latched or cleared) is in force in the supervisor but not yet committed
// to the disk. The store keeps it and tries again; SyncLatches and
// Healthy report it until it is written.
var ErrLatchNotRecorded = errors.New("latch change not recorded")

// latchLane carries latch changes to the writer apart from the bounded
// queue: it has no bound, so a latch change is never dropped, and one that
// failed to commit stays at its head and is tried again until it is
// written. SyncLatches waits on it.
type latchLane struct {
	mu        sync.Mutex
	pending   []item        // guarded by mu; not yet committed, oldest first
	enqueued  uint64        // guarded by mu; latch changes ever handed in
	committed uint64        // guarded by mu; of those, committed (a prefix)
	tried     uint64        // guarded by mu; enqueued count the last attempt covered
	err       error         // guarded by mu; the last attempt's failure, nil after a success
	failures  int           // guarded by mu; failed attempts in a row
	ended     bool          // guarded by mu; the writer has exited
	changed   chan struct{} // guarded by mu; closed and replaced after every attempt
	sig       chan struct{} // cap 1: pending has entries for the writer
}

func newLatchLane() *latchLane {
	return &latchLane{changed: make(chan struct{}), sig: make(chan struct{}, 1)}
}

func (l *latchLane) add(it item) {
	l.mu.Lock()
	l.pending = append(l.pending, it)
	l.enqueued++
	l.mu.Unlock()
	select {
	case l.sig <- struct{}{}:
	default:
	}
}

// take returns the pending latch changes for one commit attempt.
func (l *latchLane) take() []item {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]item(nil), l.pending...)
}

// settle records the outcome of an attempt that took the first n pending
// changes: on success they leave the lane; on failure they stay, for the
// next attempt.
func (l *latchLane) settle(n int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried = l.committed + uint64(n)
	if err == nil {
		l.pending = append(l.pending[:0:0], l.pending[n:]...)
		l.committed += uint64(n)
		l.err, l.failures = nil, 0
	} else {
		l.err = err
		l.failures++
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// failing reports whether latch changes wait after a failed attempt.
func (l *latchLane) failing() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return 0, nil
	}
	return len(l.pending), l.err
}

func (l *latchLane) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	close(l.changed)
	l.changed = make(chan struct{})
}

// SafetyEvent implements safety.Observer. The supervisor calls it after
// the stop an event implies was sent, and it never waits on the disk, so
// the stop path never does either. A latch change (e-stop pressed or
// reset, fault latched or cleared) goes to its own unbounded lane and is
// never dropped: a failed commit is tried again until it succeeds, and
// SyncLatches tells a caller when it is on the disk. Every other event
// goes through the bounded queue and is dropped, counted and logged when
// the queue is full.
func (s *Store) SafetyEvent(e safety.Event) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	latch := isLatch(e.Kind)
	if s.closed {
		if latch {
			s.log.Error("latch change after the store closed; not recorded", "kind", e.Kind, "robot_id", e.RobotID, "task_id", e.TaskID, "by", e.By)
		} else {
			s.log.Warn("safety event after the store closed; not recorded", "kind", e.Kind, "robot_id", e.RobotID, "task_id", e.TaskID)
		}
		return
	}
	it := item{ev: e, seq: s.seq.Add(1)}
	if latch {
		s.latches.add(it)
		return
	}
	select {
	case s.q <- it:
	default:
		s.drop("safety_event", "kind", e.Kind, "robot_id", e.RobotID, "task_id", e.TaskID)
	}
}

// SyncLatches waits until every latch change handed to SafetyEvent before
// the call is committed with synchronous=FULL, that is on the disk. It
// returns an error wrapping ErrLatchNotRecorded when the last attempt to
// commit one of them failed (the store goes on trying), when ctx ends
// first, or when the store closed without writing it. The bridge answers
// an operator's e-stop, reset or clear only after it returns.
func (s *Store) SyncLatches(ctx context.Context) error {
	l := s.latches
	l.mu.Lock()
	target := l.enqueued
	for {
		switch {
		case l.committed >= target:
			l.mu.Unlock()
			return nil
		case l.err != nil && l.tried >= target:
			err := l.err
			l.mu.Unlock()
			return fmt.Errorf("store: %w: %w", ErrLatchNotRecorded, err)
		case l.ended:
			l.mu.Unlock()
			return fmt.Errorf("store: %w: the store closed first", ErrLatchNotRecorded)
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("store: %w: not committed yet: %w", ErrLatchNotRecorded, ctx.Err())
		}
		l.mu.Lock()
	}
}

// TaskChanged implements actions.Observer: the task's text, progress,
// result and error are kept for get_task after a restart. Updates of one
// task coalesce, so a fast progress stream costs one write per batch; its
// status is never taken from here but only from recorded transitions.
func (s *Store) TaskChanged(v actions.TaskView) {
	if v.ID == "" {
		return
	}
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return
	}
	s.viewsMu.Lock()
	_, have := s.views[v.ID]
	if !have && len(s.views) >= s.conf.QueueSize {
		s.viewsMu.Unlock()
		s.drop("task_update", "task_id", v.ID)
		return
	}
	s.views[v.ID] = v
	s.viewsMu.Unlock()
	select {
	case s.viewsSig <- struct{}{}:
	default:
	}
}

// Sync waits until every safety event and task update queued before it is
// committed (or ctx ends). Tests and shutdown use it; the stop path never
// does.
func (s *Store) Sync(ctx context.Context) error {
	done := make(chan error, 1)
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	select {
	case s.q <- item{seq: s.seq.Add(1), done: done}: // a barrier: no event, only a reply
	case <-ctx.Done():
		s.closeMu.RUnlock()
		return ctx.Err()
	}
	s.closeMu.RUnlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) drop(kind string, attrs ...any) {
	n := s.dropped.Add(1)
	if s.conf.OnDrop != nil {
		s.conf.OnDrop(kind)
	}
	// Log the first drop and then every hundredth, so a flood cannot
	// become a second flood in the log.
	if n == 1 || n%100 == 0 {
		s.log.Error("store queue full; record dropped", append([]any{"kind", kind, "dropped_total", n}, attrs...)...)
	}
}

// writer is the one goroutine that commits queued records, in batches,
// with the latch changes waiting at the time. While a latch change fails
// to commit it tries again every Conf.LatchRetry.
func (s *Store) writer() {
	defer close(s.done)
	defer s.latches.end()
	for {
		var batch []item
		var again <-chan time.Time
		if n, err := s.latches.failing(); n > 0 && err != nil {
			again = time.After(s.conf.LatchRetry)
		}
		select {
		case it := <-s.q:
			batch = append(batch, it)
		case <-s.viewsSig:
		case <-s.latches.sig:
		case <-again:
		case <-s.quit:
			s.drain()
			return
		}
		s.commit(s.fill(batch), s.takeViews())
	}
}

// fill adds what is already queued, up to DefaultBatch records.
func (s *Store) fill(batch []item) []item {
	for len(batch) < DefaultBatch {
		select {
		case it := <-s.q:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

func (s *Store) takeViews() []actions.TaskView {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	if len(s.views) == 0 {
		return nil
	}
	out := make([]actions.TaskView, 0, len(s.views))
	for _, v := range s.views {
		out = append(out, v)
	}
	clear(s.views)
	return out
}

// drainLatchAttempts bounds how often Close tries again to commit latch
// changes that keep failing before it gives up and reports them.
const drainLatchAttempts = 3

// drain commits everything still queued; Close calls it through quit,
// after no one can enqueue any more. Latch changes that keep failing are
// tried a few more times, then left for Close to report.
func (s *Store) drain() {
	tries := 0
	for {
		batch, views := s.fill(nil), s.takeViews()
		n, failed := s.latches.failing()
		retrying := n > 0 && failed != nil
		if len(batch) == 0 && len(views) == 0 && (n == 0 || (retrying && tries >= drainLatchAttempts)) {
			return
		}
		if retrying {
			tries++
			time.Sleep(s.conf.LatchRetry)
		}
		s.commit(batch, views)
	}
}

// commit writes one batch of queued events and task views together with
// the latch changes pending now, in the order they happened, in one
// transaction. When that fails and latch changes were in it, the latch
// changes and the rest are tried again apart, so neither can keep the
// other off the disk; latch changes that still fail stay pending.
func (s *Store) commit(batch []item, views []actions.TaskView) {
	latches := s.latches.take()
	if len(batch) == 0 && len(views) == 0 && len(latches) == 0 {
		return
	}
	if s.conf.beforeBatch != nil {
		s.conf.beforeBatch()
	}
	all := make([]item, 0, len(batch)+len(latches))
	all = append(append(all, batch...), latches...)
	slices.SortStableFunc(all, func(a, b item) int { return cmp.Compare(a.seq, b.seq) })
	err := s.writeBatch(all, views)
	latchErr, restErr := err, err
	if err != nil && len(latches) > 0 {
		latchErr = s.writeBatch(latches, nil)
		restErr = nil
		if len(batch) > 0 || len(views) > 0 {
			restErr = s.writeBatch(batch, views)
		}
	}
	if len(latches) > 0 {
		s.latches.settle(len(latches), latchErr)
		if latchErr != nil {
			if n, _ := s.latches.failing(); n > 0 {
				s.latchFailed(n, latchErr)
			}
		}
	}
	if restErr != nil {
		s.log.Error("could not record safety events and task updates", "events", len(batch), "tasks", len(views), "err", restErr)
	}
	done := restErr
	if latchErr != nil {
		done = errors.Join(restErr, fmt.Errorf("%w: %w", ErrLatchNotRecorded, latchErr))
	}
	for _, it := range batch {
		if it.done != nil {
			it.done <- done
		}
	}
}

// latchFailed logs a failed latch commit: the first of a run of failures
// and then every 50th, so a dead disk does not flood the log.
func (s *Store) latchFailed(pending int, err error) {
	s.latches.mu.Lock()
	n := s.latches.failures
	s.latches.mu.Unlock()
	if n == 1 || n%50 == 0 {
		s.log.Error("latch change not recorded; the latch is in force and the store keeps trying",
			"pending", pending, "attempts", n, "err", err)
	}
}

func (s *Store) writeBatch(batch []item, views []actions.TaskView) error {
	ctx := context.Background()
	return s.tx(ctx, "batch", func(tx txn) error {
		for _, it := range batch {
			if it.ev.Kind == "" {
				continue // a Sync barrier
			}
			if err := writeSafetyEvent(ctx, tx, it.ev); err != nil {
				return fmt.Errorf("safety event %s: %w", it.ev.Kind, err)
			}
		}
		for _, v := range views {
			if err := writeTaskView(ctx, tx, v); err != nil {
				return fmt.Errorf("task %s: %w", v.ID, err)
			}
		}
		return nil
	})
}

// Statements of the asynchronous writer (prepared, group.go).
const (
	qInsertSafetyEvent = `INSERT INTO safety_events(kind, at, robot_id, task_id, by, reason, monitor, latency_ns, error)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qUpdateTaskView = `UPDATE tasks SET text=?, progress=?, result=?, error=?, session_id=?, principal=?,
		approval_id=COALESCE(?, approval_id), robot_id=COALESCE(NULLIF(?, ''), robot_id), updated_at=MAX(updated_at, ?)
		WHERE id=? AND updated_at<=?`
)

func writeSafetyEvent(ctx context.Context, tx txn, e safety.Event) error {
	var errText any
	if e.Err != nil {
		errText = e.Err.Error()
	}
	if _, err := tx.exec(ctx, qInsertSafetyEvent,
		string(e.Kind), ns(e.At), e.RobotID, nullStr(e.TaskID), e.By, e.Reason, string(e.Monitor), int64(e.Latency), errText); err != nil {
		return err
	}
	details := map[string]any{"kind": string(e.Kind)}
	if e.Monitor != "" {
		details["monitor"] = string(e.Monitor)
	}
	if e.Latency > 0 {
		details["latency_ms"] = float64(e.Latency.Microseconds()) / 1000
	}
	if e.Err != nil {
		details["error"] = e.Err.Error()
	}
	if _, err := insertAudit(ctx, tx, AuditRecord{
		At: e.At, Type: "safety." + string(e.Kind), Actor: e.By, RobotID: e.RobotID, TaskID: e.TaskID,
		Summary: e.String(), Reason: e.Reason,
	}, details); err != nil {
		return err
	}
	switch e.Kind {
	case safety.EventEStopPressed:
		return setLatch(ctx, tx, "estop", true, e)
	case safety.EventEStopReset:
		return setLatch(ctx, tx, "estop", false, e)
	case safety.EventFaultLatched:
		return setLatch(ctx, tx, "fault", true, e)
	case safety.EventFaultCleared:
		return setLatch(ctx, tx, "fault", false, e)
	}
	return nil
}

// setLatch records a latch change of the event's robot (e.RobotID; ""
// is the legacy row of a single-robot bridge). Latching keeps the first
// cause, as the supervisor does; releasing always wins. Only that robot's
// row changes: a reset of one robot of a fleet leaves the others latched.
func setLatch(ctx context.Context, tx txn, name string, active bool, e safety.Event) error {
	if active {
		_, err := tx.exec(ctx, `INSERT INTO latches(robot_id, name, active, by, reason, task_id, since, updated_at) VALUES(?, ?, 1, ?, ?, ?, ?, ?)
			ON CONFLICT(robot_id, name) DO UPDATE SET active=1, by=excluded.by, reason=excluded.reason, task_id=excluded.task_id,
				since=excluded.since, updated_at=excluded.updated_at WHERE latches.active=0`,
			e.RobotID, name, e.By, e.Reason, nullStr(e.TaskID), ns(e.At), ns(e.At))
		if err != nil {
			return err
		}
		return notify(ctx, tx, Notice{Kind: NoticeLatch, RobotID: e.RobotID})
	}
	_, err := tx.exec(ctx, `INSERT INTO latches(robot_id, name, active, by, reason, task_id, since, updated_at) VALUES(?, ?, 0, ?, ?, NULL, 0, ?)
		ON CONFLICT(robot_id, name) DO UPDATE SET active=0, by=excluded.by, reason=excluded.reason, task_id=NULL, since=0, updated_at=excluded.updated_at`,
		e.RobotID, name, e.By, e.Reason, ns(e.At))
	if err != nil {
		return err
	}
	return notify(ctx, tx, Notice{Kind: NoticeLatch, RobotID: e.RobotID})
}

func writeTaskView(ctx context.Context, tx txn, v actions.TaskView) error {
	var result, errJSON any
	if v.Result != nil {
		result = mustJSON(v.Result)
	}
	if er := errorRecordOf(v.Error); er != nil {
		errJSON = mustJSON(er)
	}
	res, err := tx.exec(ctx, qUpdateTaskView,
		v.Text, mustJSON(v.Progress), result, errJSON, nullStr(v.SessionID), nullStr(v.Principal), nullStr(v.ApprovalID),
		v.RobotID, ns(v.UpdatedAt), v.ID, ns(v.UpdatedAt))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	// Either a newer record exists (keep it) or the task's transitions
	// were never recorded; only the latter inserts.
	_, err = tx.exec(ctx, `INSERT INTO tasks(id, robot_id, tool, arguments, status, text, progress, result, error, approval_id,
		session_id, principal, created_at, updated_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		v.ID, v.RobotID, v.Tool, mustJSON(orEmpty(v.Arguments)), string(v.Status), v.Text, mustJSON(v.Progress), result, errJSON,
		nullStr(v.ApprovalID), nullStr(v.SessionID), nullStr(v.Principal), ns(v.CreatedAt), ns(v.UpdatedAt))
	return err
}
