package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

var (
	_ actions.Recorder         = (*Store)(nil)
	_ actions.BatchRecorder    = (*Store)(nil)
	_ actions.Observer         = (*Store)(nil)
	_ approval.Store           = (*Store)(nil)
	_ safety.Observer          = (*Store)(nil)
	_ toolapi.IdempotencyStore = (*Store)(nil)
)

// Audit record types. A transition's type is "task." plus the state it
// entered ("task.executing"); a safety event's is "safety." plus its kind
// ("safety.estop_pressed"); an approval's is "approval." plus what
// happened (created, approved, denied, expired, cancelled); a grant's is
// "grant." plus created, revoked or expired.
const (
	AuditBridgeStart   = "bridge.start"
	AuditBridgeRestart = "bridge.restart"
	AuditBridgeStop    = "bridge.stop"
)

// TransitionAuditType is the audit type of a transition into to.
func TransitionAuditType(to fsm.State) string { return "task." + string(to) }

// errorRecord is the stored form of a task's *toolerr.Error.
type errorRecord struct {
	Type         toolerr.Type   `json:"type"`
	Message      string         `json:"message"`
	Suggestion   string         `json:"suggestion,omitempty"`
	RetryAfterMS int64          `json:"retry_after_ms,omitempty"`
	Details      map[string]any `json:"details,omitempty"`
}

func errorRecordOf(e *toolerr.Error) *errorRecord {
	if e == nil {
		return nil
	}
	return &errorRecord{Type: e.Type, Message: e.Message, Suggestion: e.Suggestion, RetryAfterMS: e.RetryAfter.Milliseconds(), Details: e.Details}
}

func (r *errorRecord) toolErr() *toolerr.Error {
	if r == nil {
		return nil
	}
	return &toolerr.Error{
		Type: r.Type, Message: r.Message, Suggestion: r.Suggestion,
		RetryAfter: time.Duration(r.RetryAfterMS) * time.Millisecond, Details: r.Details,
	}
}

func (s *Store) redact(tool string, args map[string]any) map[string]any {
	if args == nil {
		return map[string]any{}
	}
	if s.conf.Redact == nil {
		return args
	}
	return s.conf.Redact(tool, args)
}

// RecordTransition implements actions.Recorder: the transition, the
// task's new status and an audit record are committed in one transaction
// (SQLite's synchronous=FULL, PostgreSQL's synchronous_commit=on) before
// it returns, so the command the transition implies is sent only once the
// record is on the disk. The first record of a task (From empty) also
// ties the task to the idempotency key that is waiting for it, so a retry
// after a crash finds the task. Transitions of several callers at once
// (the robots of a fleet) share one commit (group.go).
func (s *Store) RecordTransition(ctx context.Context, r actions.TransitionRecord) error {
	return s.RecordTransitions(ctx, []actions.TransitionRecord{r})
}

// RecordTransitions implements actions.BatchRecorder: the transitions, in
// order, each with exactly what RecordTransition writes for it (the
// transition row, the task's status, the audit record, the idempotency
// link of a first record), committed together in one transaction, so
// either all of them are on the disk when it returns or none is. The
// runner uses it for a call that is authorized when it is made: created,
// approved and executing land in the one commit that must precede the
// first command.
func (s *Store) RecordTransitions(ctx context.Context, rs []actions.TransitionRecord) error {
	if len(rs) == 0 {
		return nil
	}
	for _, r := range rs {
		if r.TaskID == "" {
			return errors.New("store: transition without a task id")
		}
	}
	now := s.clock.Now()
	return s.tx(ctx, "transition", func(tx txn) error {
		for i := range rs {
			if err := s.writeTransition(tx, &rs[i], now); err != nil {
				return err
			}
		}
		return nil
	})
}

// Statements of a transition (prepared, group.go).
const (
	qInsertTransition = `INSERT INTO transitions(task_id, robot_id, tool, from_state, to_state, event, at, by, reason, grant_id, approval_id)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qCreateTask = `INSERT INTO tasks(id, robot_id, tool, arguments, status, text, principal, created_at, updated_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`
	qUpdateTaskStatus = `UPDATE tasks SET status=?, updated_at=MAX(updated_at, ?),
			approval_id=COALESCE(?, approval_id), grant_id=COALESCE(?, grant_id), robot_id=COALESCE(NULLIF(?, ''), robot_id) WHERE id=?`
	qInsertTaskIfMissing = `INSERT INTO tasks(id, robot_id, tool, arguments, status, principal, approval_id, grant_id, created_at, updated_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`
	qPendingIdempotency = `SELECT key FROM idempotency
		WHERE state='pending' AND task_id IS NULL AND tool=? AND args_hash=?`
	qLinkIdempotency = `UPDATE idempotency SET task_id=? WHERE key=? AND task_id IS NULL`
)

// transitionDetails are a transition's audit details. Its fields are in
// the order of their names, so it encodes exactly as the map of them it
// replaced (encoding/json sorts a map's keys), without the map.
type transitionDetails struct {
	ApprovalID string          `json:"approval_id,omitempty"`
	Arguments  *map[string]any `json:"arguments,omitempty"`
	Event      string          `json:"event"`
	From       string          `json:"from"`
	GrantID    string          `json:"grant_id,omitempty"`
	To         string          `json:"to"`
	Tool       string          `json:"tool"`
}

// writeTransition writes one transition record in tx; now stamps a record
// its caller did not.
func (s *Store) writeTransition(tx txn, r *actions.TransitionRecord, now time.Time) error {
	ctx := tx.ctx
	at := r.At
	if at.IsZero() {
		at = now
	}
	if err := insertTransition(ctx, tx, *r, at); err != nil {
		return err
	}
	// An approval decided with the transition and left to the runner
	// (a request a scoped grant covered when it was filed).
	switch a := r.Approval.(type) {
	case nil:
	case approval.Approval:
		if a.ID == "" {
			return errors.New("store: approval without an id")
		}
		if err := s.writeApproval(ctx, tx, a, now); err != nil {
			return err
		}
	default:
		return fmt.Errorf("store: transition of task %s carries an approval record of unknown type %T", r.TaskID, r.Approval)
	}
	if r.From == "" {
		if _, err := tx.exec(ctx, qCreateTask,
			r.TaskID, r.RobotID, r.Tool, mustJSON(orEmpty(r.Arguments)), string(r.To), r.Reason, r.By, ns(at), ns(at)); err != nil {
			return err
		}
		if err := linkIdempotency(ctx, tx, *r); err != nil {
			return err
		}
	} else if err := setTaskStatus(ctx, tx, *r, at); err != nil {
		return err
	}
	details := transitionDetails{Tool: r.Tool, From: string(r.From), To: string(r.To), Event: string(r.Event), GrantID: r.GrantID, ApprovalID: r.ApprovalID}
	if r.From == "" {
		args := s.redact(r.Tool, r.Arguments)
		details.Arguments = &args
	}
	from := string(r.From)
	if from == "" {
		from = "(new)"
	}
	if _, err := insertAudit(ctx, tx, AuditRecord{
		At: at, Type: TransitionAuditType(r.To), Actor: r.By, RobotID: r.RobotID, TaskID: r.TaskID,
		Summary: "task " + r.TaskID + " (" + r.Tool + "): " + from + " → " + string(r.To) + " (" + string(r.Event) + ")", Reason: r.Reason,
	}, details); err != nil {
		return err
	}
	return notify(ctx, tx, Notice{Kind: NoticeTask, RobotID: r.RobotID, ID: r.TaskID})
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func insertTransition(ctx context.Context, tx txn, r actions.TransitionRecord, at time.Time) error {
	event := string(r.Event)
	if r.From == "" && event == "" {
		event = "create"
	}
	_, err := tx.exec(ctx, qInsertTransition,
		r.TaskID, r.RobotID, r.Tool, string(r.From), string(r.To), event, ns(at), r.By, r.Reason, nullStr(r.GrantID), nullStr(r.ApprovalID))
	return err
}

func setTaskStatus(ctx context.Context, tx txn, r actions.TransitionRecord, at time.Time) error {
	update := func() (bool, error) {
		res, err := tx.exec(ctx, qUpdateTaskStatus,
			string(r.To), ns(at), nullStr(r.ApprovalID), nullStr(r.GrantID), r.RobotID, r.TaskID)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	}
	if ok, err := update(); ok || err != nil {
		return err
	}
	// The task's first record was lost (its write failed and the runner
	// carried on); keep what this one knows. A task row another writer
	// inserted meanwhile (the runner's view, through the writer) takes
	// the update instead.
	res, err := tx.exec(ctx, qInsertTaskIfMissing,
		r.TaskID, r.RobotID, r.Tool, mustJSON(orEmpty(r.Arguments)), string(r.To), r.By, nullStr(r.ApprovalID), nullStr(r.GrantID), ns(at), ns(at))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	_, err = update()
	return err
}

// linkIdempotency ties a new task to the one pending idempotency
// reservation of the same principal, tool and arguments. The tool API
// reserves the key, submits, then completes the key with the task id; a
// crash between the submit and the completion would otherwise leave a
// reservation that never learns its task, and the retry would not find
// it. With two such reservations waiting at once it cannot tell which
// request made the task and links neither.
func linkIdempotency(ctx context.Context, tx txn, r actions.TransitionRecord) error {
	prefix := r.By + "\x00"
	hash := safety.ArgsHash(r.Tool, orEmpty(r.Arguments))
	// The key's scope separator is a NUL byte, which SQLite's string
	// functions stop at; the prefix is compared here instead.
	rows, err := tx.query(ctx, qPendingIdempotency, r.Tool, hash)
	if err != nil {
		return err
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			closeRead(rows)
			return err
		}
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	closeRead(rows)
	if err := rows.Err(); err != nil {
		return err
	}
	if len(keys) != 1 {
		return nil
	}
	_, err = tx.exec(ctx, qLinkIdempotency, r.TaskID, tx.d.key(keys[0]))
	return err
}

// approvalEvent names what a save of a in its status means.
func approvalEvent(st approval.Status) string {
	if st == approval.StatusPending {
		return "created"
	}
	return string(st)
}

// SaveApproval implements approval.Store: the request in its new status
// and an audit record, committed before the approval service lets the
// change take effect.
func (s *Store) SaveApproval(ctx context.Context, a approval.Approval) error {
	if a.ID == "" {
		return errors.New("store: approval without an id")
	}
	now := s.clock.Now()
	return s.tx(ctx, "approval", func(tx txn) error {
		return s.writeApproval(ctx, tx, a, now)
	})
}

// writeApproval is SaveApproval's write, in tx: the record as of its last
// change (its decision, else its creation; now when it has neither time).
func (s *Store) writeApproval(ctx context.Context, tx txn, a approval.Approval, now time.Time) error {
	at := a.CreatedAt
	actor := a.RequestedBy
	if a.DecidedAt != nil {
		at, actor = *a.DecidedAt, a.DecidedBy
	}
	if at.IsZero() {
		at = now
	}
	return s.saveApprovalTx(ctx, tx, a, at, actor)
}

func (s *Store) saveApprovalTx(ctx context.Context, tx txn, a approval.Approval, at time.Time, actor string) error {
	if _, err := tx.exec(ctx, `INSERT INTO approvals(id, task_id, robot_id, tool, status, data, created_at, updated_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET status=excluded.status, data=excluded.data, updated_at=excluded.updated_at,
			task_id=COALESCE(excluded.task_id, approvals.task_id), robot_id=excluded.robot_id`,
		a.ID, nullStr(a.TaskID), a.RobotID, a.Tool, string(a.Status), mustJSON(a), ns(a.CreatedAt), ns(at)); err != nil {
		return err
	}
	if err := notify(ctx, tx, Notice{Kind: NoticeApproval, RobotID: a.RobotID, ID: a.ID}); err != nil {
		return err
	}
	shown := a
	shown.Arguments = s.redact(a.Tool, a.Arguments)
	ev := approvalEvent(a.Status)
	summary := fmt.Sprintf("approval %s %s: %s", a.ID, ev, a.Preview)
	if a.GrantID != "" && a.Status == approval.StatusApproved {
		summary += " (grant " + a.GrantID + ")"
	}
	_, err := insertAudit(ctx, tx, AuditRecord{
		At: at, Type: "approval." + ev, Actor: actor, RobotID: a.RobotID, TaskID: a.TaskID, Subject: a.ID,
		Summary: summary, Reason: a.Reason,
	}, shown)
	return err
}

func grantEvent(st approval.GrantStatus) string {
	switch st {
	case approval.GrantActive:
		return "created"
	case approval.GrantRevoked:
		return "revoked"
	}
	return string(st)
}

// SaveGrant implements approval.Store: the grant (on creation and on
// revocation) and an audit record.
func (s *Store) SaveGrant(ctx context.Context, g approval.Grant) error {
	if g.ID == "" {
		return errors.New("store: grant without an id")
	}
	at, actor := g.CreatedAt, g.CreatedBy
	if g.RevokedAt != nil {
		at, actor = *g.RevokedAt, g.RevokedBy
	}
	if at.IsZero() {
		at = s.clock.Now()
	}
	return s.tx(ctx, "grant", func(tx txn) error { return saveGrantTx(ctx, tx, g, at, actor, "") })
}

func saveGrantTx(ctx context.Context, tx txn, g approval.Grant, at time.Time, actor, reason string) error {
	if _, err := tx.exec(ctx, `INSERT INTO grants(id, kind, robot_id, tool, status, data, created_at, expires_at, updated_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET status=excluded.status, data=excluded.data, updated_at=excluded.updated_at, robot_id=excluded.robot_id`,
		g.ID, string(g.Kind), g.RobotID, g.Tool, string(g.Status), mustJSON(g), ns(g.CreatedAt), ns(g.ExpiresAt), ns(at)); err != nil {
		return err
	}
	if err := notify(ctx, tx, Notice{Kind: NoticeGrant, RobotID: g.RobotID, ID: g.ID}); err != nil {
		return err
	}
	ev := grantEvent(g.Status)
	_, err := insertAudit(ctx, tx, AuditRecord{
		At: at, Type: "grant." + ev, Actor: actor, RobotID: g.RobotID, TaskID: g.TaskID, Subject: g.ID,
		Summary: fmt.Sprintf("%s grant %s %s: %s", g.Kind, g.ID, ev, g.Description), Reason: reason,
	}, g)
	return err
}

// Task returns a task as last recorded, with the robot it is for
// (RobotID; empty for a task of a single-robot bridge from before the
// store knew robots), for get_task after a restart (the runner only knows
// the tasks of its own run). ErrNotFound when unknown.
func (s *Store) Task(ctx context.Context, id string) (actions.TaskView, error) {
	var (
		v                                actions.TaskView
		args, status                     string
		progress, result, errJSON        sql.NullString
		approvalID, sessionID, principal sql.NullString
		createdAt, updatedAt             int64
	)
	err := s.queryRow(ctx, `SELECT id, robot_id, tool, arguments, status, text, progress, result, error, approval_id, session_id,
		principal, created_at, updated_at FROM tasks WHERE id=?`, id).
		Scan(&v.ID, &v.RobotID, &v.Tool, &args, &status, &v.Text, &progress, &result, &errJSON, &approvalID, &sessionID, &principal, &createdAt, &updatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return actions.TaskView{}, fmt.Errorf("store: task %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return actions.TaskView{}, fmt.Errorf("store: task %q: %w", id, s.classify(err))
	}
	v.Status = fsm.State(status)
	v.ApprovalID, v.SessionID, v.Principal = approvalID.String, sessionID.String, principal.String
	v.CreatedAt, v.UpdatedAt = fromNS(createdAt), fromNS(updatedAt)
	if err := json.Unmarshal([]byte(args), &v.Arguments); err != nil {
		return actions.TaskView{}, fmt.Errorf("store: task %q arguments: %w", id, err)
	}
	if progress.Valid {
		_ = json.Unmarshal([]byte(progress.String), &v.Progress)
	}
	if result.Valid {
		_ = json.Unmarshal([]byte(result.String), &v.Result)
	}
	if errJSON.Valid {
		var er errorRecord
		if json.Unmarshal([]byte(errJSON.String), &er) == nil && er.Type != "" {
			v.Error = er.toolErr()
		}
	}
	return v, nil
}

// Transition is one stored transition.
type Transition struct {
	Seq        int64     `json:"seq"`
	TaskID     string    `json:"task_id"`
	RobotID    string    `json:"robot_id,omitempty"`
	Tool       string    `json:"tool"`
	From       fsm.State `json:"from"`
	To         fsm.State `json:"to"`
	Event      string    `json:"event"`
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	Reason     string    `json:"reason"`
	GrantID    string    `json:"grant_id,omitempty"`
	ApprovalID string    `json:"approval_id,omitempty"`
}

// Transitions returns every recorded transition of a task ("" for all
// tasks), oldest first.
func (s *Store) Transitions(ctx context.Context, taskID string) ([]Transition, error) {
	q := `SELECT seq, task_id, robot_id, tool, from_state, to_state, event, at, by, reason, grant_id, approval_id FROM transitions`
	var args []any
	if taskID != "" {
		q += ` WHERE task_id=?`
		args = append(args, taskID)
	}
	rows, err := s.query(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: transitions: %w", err)
	}
	defer closeRead(rows)
	var out []Transition
	for rows.Next() {
		var t Transition
		var from, to string
		var at int64
		var grant, appr sql.NullString
		if err := rows.Scan(&t.Seq, &t.TaskID, &t.RobotID, &t.Tool, &from, &to, &t.Event, &at, &t.By, &t.Reason, &grant, &appr); err != nil {
			return nil, fmt.Errorf("store: transitions: %w", err)
		}
		t.From, t.To, t.At, t.GrantID, t.ApprovalID = fsm.State(from), fsm.State(to), fromNS(at), grant.String, appr.String
		out = append(out, t)
	}
	return out, rows.Err()
}

// Approval returns a stored approval request; ErrNotFound when unknown.
func (s *Store) Approval(ctx context.Context, id string) (approval.Approval, error) {
	var data string
	err := s.queryRow(ctx, `SELECT data FROM approvals WHERE id=?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return approval.Approval{}, fmt.Errorf("store: approval %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return approval.Approval{}, fmt.Errorf("store: approval %q: %w", id, s.classify(err))
	}
	var a approval.Approval
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return approval.Approval{}, fmt.Errorf("store: approval %q: %w", id, err)
	}
	return a, nil
}

// Approvals returns every stored approval request, oldest first.
func (s *Store) Approvals(ctx context.Context) ([]approval.Approval, error) {
	rows, err := s.query(ctx, `SELECT data FROM approvals ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: approvals: %w", err)
	}
	defer closeRead(rows)
	var out []approval.Approval
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var a approval.Approval
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			return nil, fmt.Errorf("store: approvals: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
