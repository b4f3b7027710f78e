package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
)

// item is one queued safety event. done is set for latch events, whose
// sender waits (bounded) for the commit.
type item struct {
	ev   safety.Event
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

// SafetyEvent implements safety.Observer. The supervisor calls it after
// the stop an event implies was sent; it only enqueues, so the stop path
// never waits on the disk. A latch change (e-stop pressed or reset, fault
// latched or cleared) then waits up to Conf.LatchWait for its commit, so
// that an acknowledged e-stop is on the disk; every other event returns at
// once, and is dropped, counted and logged when the queue is full.
func (s *Store) SafetyEvent(e safety.Event) {
	latch := isLatch(e.Kind)
	it := item{ev: e}
	if latch {
		it.done = make(chan error, 1)
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		s.log.Warn("safety event after the store closed; not recorded", "kind", e.Kind, "task_id", e.TaskID)
		return
	}
	var deadline *time.Timer
	select {
	case s.q <- it:
	default:
		if !latch {
			s.closeMu.RUnlock()
			s.drop("safety_event", "kind", e.Kind, "task_id", e.TaskID)
			return
		}
		deadline = time.NewTimer(s.conf.LatchWait)
		select {
		case s.q <- it:
		case <-deadline.C:
			s.closeMu.RUnlock()
			s.drop("safety_event", "kind", e.Kind, "task_id", e.TaskID)
			s.log.Error("latch change not recorded: the store's queue stayed full", "kind", e.Kind, "wait", s.conf.LatchWait)
			return
		}
	}
	s.closeMu.RUnlock()
	if !latch {
		return
	}
	if deadline == nil {
		deadline = time.NewTimer(s.conf.LatchWait)
	}
	defer deadline.Stop()
	select {
	case err := <-it.done:
		if err != nil {
			s.log.Error("latch change not recorded", "kind", e.Kind, "err", err)
		}
	case <-deadline.C:
		s.log.Warn("latch change still not committed; going on without waiting", "kind", e.Kind, "wait", s.conf.LatchWait)
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
	case s.q <- item{done: done}: // a barrier: no event, only a reply
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

// writer is the one goroutine that commits queued records, in batches.
func (s *Store) writer() {
	defer close(s.done)
	for {
		var batch []item
		select {
		case it := <-s.q:
			batch = append(batch, it)
		case <-s.viewsSig:
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

// drain commits everything still queued; Close calls it through quit,
// after no one can enqueue any more.
func (s *Store) drain() {
	for {
		batch := s.fill(nil)
		views := s.takeViews()
		if len(batch) == 0 && len(views) == 0 {
			return
		}
		s.commit(batch, views)
	}
}

func (s *Store) commit(batch []item, views []actions.TaskView) {
	if len(batch) == 0 && len(views) == 0 {
		return
	}
	if s.conf.beforeBatch != nil {
		s.conf.beforeBatch()
	}
	ctx := context.Background()
	err := s.tx(ctx, "batch", func(tx *sql.Tx) error {
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
	if err != nil {
		s.log.Error("could not record safety events and task updates", "events", len(batch), "tasks", len(views), "err", err)
	}
	for _, it := range batch {
		if it.done != nil {
			it.done <- err
		}
	}
}

func writeSafetyEvent(ctx context.Context, tx *sql.Tx, e safety.Event) error {
	var errText any
	if e.Err != nil {
		errText = e.Err.Error()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO safety_events(kind, at, task_id, by, reason, monitor, latency_ns, error)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?)`,
		string(e.Kind), ns(e.At), nullStr(e.TaskID), e.By, e.Reason, string(e.Monitor), int64(e.Latency), errText); err != nil {
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
		At: e.At, Type: "safety." + string(e.Kind), Actor: e.By, TaskID: e.TaskID,
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

// setLatch records a latch change. Latching keeps the first cause, as the
// supervisor does; releasing always wins.
func setLatch(ctx context.Context, tx *sql.Tx, name string, active bool, e safety.Event) error {
	if active {
		_, err := tx.ExecContext(ctx, `INSERT INTO latches(name, active, by, reason, task_id, since, updated_at) VALUES(?, 1, ?, ?, ?, ?, ?)
			ON CONFLICT(name) DO UPDATE SET active=1, by=excluded.by, reason=excluded.reason, task_id=excluded.task_id,
				since=excluded.since, updated_at=excluded.updated_at WHERE latches.active=0`,
			name, e.By, e.Reason, nullStr(e.TaskID), ns(e.At), ns(e.At))
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO latches(name, active, by, reason, task_id, since, updated_at) VALUES(?, 0, ?, ?, NULL, 0, ?)
		ON CONFLICT(name) DO UPDATE SET active=0, by=excluded.by, reason=excluded.reason, task_id=NULL, since=0, updated_at=excluded.updated_at`,
		name, e.By, e.Reason, ns(e.At))
	return err
}

func writeTaskView(ctx context.Context, tx *sql.Tx, v actions.TaskView) error {
	var result, errJSON any
	if v.Result != nil {
		result = mustJSON(v.Result)
	}
	if er := errorRecordOf(v.Error); er != nil {
		errJSON = mustJSON(er)
	}
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET text=?, progress=?, result=?, error=?, session_id=?, principal=?,
		approval_id=COALESCE(?, approval_id), updated_at=MAX(updated_at, ?) WHERE id=? AND updated_at<=?`,
		v.Text, mustJSON(v.Progress), result, errJSON, nullStr(v.SessionID), nullStr(v.Principal), nullStr(v.ApprovalID),
		ns(v.UpdatedAt), v.ID, ns(v.UpdatedAt))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	// Either a newer record exists (keep it) or the task's transitions
	// were never recorded; only the latter inserts.
	_, err = tx.ExecContext(ctx, `INSERT INTO tasks(id, tool, arguments, status, text, progress, result, error, approval_id,
		session_id, principal, created_at, updated_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		v.ID, v.Tool, mustJSON(orEmpty(v.Arguments)), string(v.Status), v.Text, mustJSON(v.Progress), result, errJSON,
		nullStr(v.ApprovalID), nullStr(v.SessionID), nullStr(v.Principal), ns(v.CreatedAt), ns(v.UpdatedAt))
	return err
}
