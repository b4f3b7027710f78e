package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/robot-bridge/robot-bridge/approval"
)

// robotOf reads the robot_id of one row of table by id.
func (s *Store) robotOf(ctx context.Context, what, table, id string) (string, error) {
	var robot string
	err := s.queryRow(ctx, `SELECT robot_id FROM `+table+` WHERE id=?`, id).Scan(&robot)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: %s %q: %w", what, id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: %s %q: %w", what, id, s.classify(err))
	}
	return robot, nil
}

// ApprovalRobot returns the robot an approval request is for (to forward
// an operator's decision to the bridge that owns it); ErrNotFound when
// unknown.
func (s *Store) ApprovalRobot(ctx context.Context, id string) (string, error) {
	return s.robotOf(ctx, "approval", "approvals", id)
}

// GrantRobot returns the robot a grant is for; ErrNotFound when unknown.
func (s *Store) GrantRobot(ctx context.Context, id string) (string, error) {
	return s.robotOf(ctx, "grant", "grants", id)
}

// TaskRobot returns the robot a task is for; ErrNotFound when unknown.
func (s *Store) TaskRobot(ctx context.Context, id string) (string, error) {
	return s.robotOf(ctx, "task", "tasks", id)
}

// PendingApprovals returns the pending approval requests of robots (every
// robot when robots is empty), oldest first: what a console shows from
// the whole cluster.
func (s *Store) PendingApprovals(ctx context.Context, robots []string) ([]approval.Approval, error) {
	var scope []string
	if len(robots) > 0 {
		scope = robots
	}
	where, args := robotScope(scope)
	rows, err := s.query(ctx, `SELECT data FROM approvals WHERE status=?`+where+` ORDER BY created_at, id`,
		append([]any{string(approval.StatusPending)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	defer closeRead(rows)
	var out []approval.Approval
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("store: pending approvals: %w", s.classify(err))
		}
		var a approval.Approval
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			return nil, fmt.Errorf("store: pending approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", s.classify(err))
	}
	return out, nil
}
