package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/robot-bridge/robot-bridge/escalation"
)

var _ escalation.Store = (*Store)(nil)

// Audit record types of the operator hand-off.
const (
	AuditEscalationOpened   = "escalation.opened"
	AuditEscalationAnswered = "escalation.answered"
	AuditEscalationClosed   = "escalation.closed"
)

// SaveEscalation implements escalation.Store: the escalation and an audit
// record of the change (opened, answered, closed once its answer reached
// the agent), in one transaction.
func (s *Store) SaveEscalation(ctx context.Context, e escalation.Escalation) error {
	if e.ID == "" {
		return errors.New("store: escalation without an id")
	}
	at, actor, typ := e.CreatedAt, e.Agent, AuditEscalationOpened
	summary := fmt.Sprintf("escalation %s opened (%s): %s", e.ID, e.Source, e.Summary)
	if e.Source != escalation.SourceAgent {
		actor = "bridge"
	}
	reason := ""
	switch e.Status {
	case escalation.StatusAnswered:
		at, actor, typ = e.Answer.At, e.Answer.By, AuditEscalationAnswered
		summary, reason = fmt.Sprintf("escalation %s answered", e.ID), e.Answer.Text
	case escalation.StatusClosed:
		at, actor, typ = *e.DeliveredAt, "bridge", AuditEscalationClosed
		summary = fmt.Sprintf("escalation %s closed: the answer reached the agent", e.ID)
	}
	if at.IsZero() {
		at = s.clock.Now()
	}
	return s.tx(ctx, "escalation", func(tx txn) error {
		if _, err := tx.exec(ctx, `INSERT INTO escalations(id, agent, session_id, task_id, source, status, data, created_at, updated_at)
			VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET status=excluded.status, data=excluded.data, updated_at=excluded.updated_at`,
			e.ID, e.Agent, e.SessionID, nullStr(e.TaskID), string(e.Source), string(e.Status), mustJSON(e), ns(e.CreatedAt), ns(at)); err != nil {
			return err
		}
		_, err := insertAudit(ctx, tx, AuditRecord{
			At: at, Type: typ, Actor: actor, TaskID: e.TaskID, RobotID: e.RobotID, Subject: e.ID, Summary: summary, Reason: reason,
		}, e)
		return err
	})
}

// Escalations returns every stored escalation, oldest first.
func (s *Store) Escalations(ctx context.Context) ([]escalation.Escalation, error) {
	rows, err := s.query(ctx, `SELECT data FROM escalations ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: escalations: %w", err)
	}
	defer closeRead(rows)
	var out []escalation.Escalation
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var e escalation.Escalation
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, fmt.Errorf("store: escalations: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
