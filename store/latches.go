package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/safety"
)

// legacyRobot is the robot id of the latch rows (and tasks, transitions,
// safety events, audit records) a single-robot bridge wrote before the
// store knew robots, and of those a store user writes without naming a
// robot.
const legacyRobot = ""

// Latch names in the latches table.
const (
	latchEStop = "estop"
	latchFault = "fault"
)

// RobotLatches is one robot's e-stop and fault latches as recorded.
type RobotLatches struct {
	EStop safety.EStopStatus `json:"estop"`
	Fault safety.FaultStatus `json:"fault"`
}

// latched reports whether either latch holds.
func (l RobotLatches) latched() bool { return l.EStop.Active || l.Fault.Latched }

// latchRow is one row of the latches table.
type latchRow struct {
	robot, name string
	active      bool
	by, reason  string
	task        sql.NullString
	since       int64
}

// latchSet holds latch rows by robot and name.
type latchSet map[string]map[string]latchRow

// rowsQuerier is a write transaction or the store's readers.
type rowsQuerier interface {
	query(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// loadLatches reads the latch rows where (a condition on robot_id, or "")
// selects.
func loadLatches(ctx context.Context, q rowsQuerier, where string, args ...any) (latchSet, error) {
	rows, err := q.query(ctx, `SELECT robot_id, name, active, by, reason, task_id, since FROM latches`+where, args...)
	if err != nil {
		return nil, err
	}
	defer closeRead(rows)
	out := latchSet{}
	for rows.Next() {
		var r latchRow
		if err := rows.Scan(&r.robot, &r.name, &r.active, &r.by, &r.reason, &r.task, &r.since); err != nil {
			return nil, err
		}
		if out[r.robot] == nil {
			out[r.robot] = map[string]latchRow{}
		}
		out[r.robot][r.name] = r
	}
	return out, rows.Err()
}

// row is the latch that holds for robot: its own row when that is
// active, otherwise an active legacy row — a latch a single-robot bridge
// recorded applies to every robot, so an e-stop pressed before the bridge
// named its robots cannot vanish because it now does.
func (ls latchSet) row(robot, name string) (latchRow, bool) {
	if r, ok := ls[robot][name]; ok && r.active {
		return r, true
	}
	if r, ok := ls[legacyRobot][name]; ok && r.active {
		return r, true
	}
	return latchRow{}, false
}

// of is what holds for robot.
func (ls latchSet) of(robot string) RobotLatches {
	var out RobotLatches
	if r, ok := ls.row(robot, latchEStop); ok {
		out.EStop = safety.EStopStatus{Active: true, By: r.by, Reason: r.reason, Since: fromNS(r.since)}
	}
	if r, ok := ls.row(robot, latchFault); ok {
		out.Fault = safety.FaultStatus{Latched: true, Reason: r.reason, TaskID: r.task.String, Since: fromNS(r.since)}
	}
	return out
}

// Latches returns robot's e-stop and fault latches as last recorded: the
// robot's own, and a legacy latch (robot id "", recorded by a
// single-robot bridge and not yet handed to the robots by Recover) that
// is active applies to every robot. robotID "" reads the legacy latches
// alone, the single-robot store of before.
func (s *Store) Latches(ctx context.Context, robotID string) (safety.EStopStatus, safety.FaultStatus, error) {
	where, args := ` WHERE robot_id = ?`, []any{robotID}
	if robotID != legacyRobot {
		where, args = ` WHERE robot_id IN (?, ?)`, []any{robotID, legacyRobot}
	}
	ls, err := loadLatches(ctx, storeReader{s}, where, args...)
	if err != nil {
		return safety.EStopStatus{}, safety.FaultStatus{}, fmt.Errorf("store: latches: %w", err)
	}
	l := ls.of(robotID)
	return l.EStop, l.Fault, nil
}

// storeReader reads through the store's reader connections.
type storeReader struct{ s *Store }

func (r storeReader) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.s.query(ctx, q, args...)
}

// handOverLegacyLatches gives every active legacy latch to each robot
// that has no active latch of that name of its own (one that has keeps
// its own first cause), then deletes the legacy rows, so from then on a
// reset of one robot clears only that robot. It returns the names of the
// legacy latches that were active.
//
// With keep (cluster mode) the legacy rows are not deleted: they also
// hold the robots of the cluster's other bridges, which this bridge
// cannot name. A robot then stays latched until the legacy latch is
// reset too (a reset of robot "").
func handOverLegacyLatches(ctx context.Context, tx txn, ls latchSet, robots []string, now time.Time, keep bool) ([]string, error) {
	legacy := ls[legacyRobot]
	if len(legacy) == 0 {
		return nil, nil
	}
	var handed []string
	for _, name := range []string{latchEStop, latchFault} {
		l, ok := legacy[name]
		if !ok || !l.active {
			continue
		}
		handed = append(handed, name)
		for _, robot := range robots {
			if own, ok := ls[robot][name]; ok && own.active {
				continue
			}
			if _, err := tx.exec(ctx, `INSERT INTO latches(robot_id, name, active, by, reason, task_id, since, updated_at)
				VALUES(?, ?, 1, ?, ?, ?, ?, ?)
				ON CONFLICT(robot_id, name) DO UPDATE SET active=1, by=excluded.by, reason=excluded.reason, task_id=excluded.task_id,
					since=excluded.since, updated_at=excluded.updated_at WHERE latches.active=0`,
				robot, name, l.by, l.reason, nullStr(l.task.String), l.since, ns(now)); err != nil {
				return nil, err
			}
			if err := notify(ctx, tx, Notice{Kind: NoticeLatch, RobotID: robot}); err != nil {
				return nil, err
			}
		}
	}
	if keep {
		return handed, nil
	}
	if _, err := tx.exec(ctx, `DELETE FROM latches WHERE robot_id = ?`, legacyRobot); err != nil {
		return nil, err
	}
	return handed, nil
}
