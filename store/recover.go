package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// RecoverInput is what the bridge did before Recover, for the record.
type RecoverInput struct {
	// By names who recovers (it defaults to "bridge").
	By string
	// StopSent is true when the stop command sent before Recover was
	// accepted by the robot link; StopErr says why not otherwise.
	StopSent bool
	StopErr  error
	// Details (optional) are added to the restart's audit record.
	Details map[string]any
	// CrashFault (optional) is a fault the bridge latched because the
	// previous run did not shut down cleanly (Info.CleanShutdown false on a
	// store that is not fresh). Recover records it like any fault — its
	// safety event, its audit record and the fault latch, by In.By — in
	// the restart's own transaction, so the crash and the fault that
	// answers it are on the disk together or not at all. A fault latched
	// already keeps its first cause, as in the supervisor. With Robots it
	// is latched for every robot of the bridge.
	CrashFault *safety.FaultStatus
	// Robots (optional) are the robot ids of this bridge, in config order:
	// the ids its supervisors put in their safety events. Recover hands
	// every active legacy latch (one a single-robot bridge recorded before
	// the store knew robots) to each of them that has no such latch of its
	// own and deletes the legacy rows, so after the first start that names
	// its robots every latch is a robot's own. Empty means one robot with
	// the legacy id "", the single-robot store of before; a bridge whose
	// supervisors name their robot passes that id even when it is the only
	// one, or a reset of that robot would leave a legacy latch in force.
	// Ids must be non-empty and unique.
	Robots []string
}

// InterruptedTask is a task Recover found live.
type InterruptedTask struct {
	ID   string    `json:"id"`
	Tool string    `json:"tool"`
	From fsm.State `json:"from"`
	// RobotID is the robot the task was for ("" for a task a
	// single-robot bridge recorded before the store knew robots).
	RobotID string `json:"robot_id,omitempty"`
}

// RecoveryReport says what Recover changed.
type RecoveryReport struct {
	Fresh         bool              `json:"fresh"`
	CleanShutdown bool              `json:"clean_shutdown"`
	Interrupted   []InterruptedTask `json:"interrupted,omitempty"`
	// ExpiredApprovals were pending when the previous run ended.
	ExpiredApprovals []string `json:"expired_approvals,omitempty"`
	// EndedGrants were active when the previous run ended; grants do not
	// survive a restart (an operator grants again if still wanted).
	EndedGrants []string `json:"ended_grants,omitempty"`
	// SettledKeys are idempotency reservations whose task was created;
	// ReleasedKeys had created nothing and were forgotten.
	SettledKeys  int `json:"settled_keys,omitempty"`
	ReleasedKeys int `json:"released_keys,omitempty"`
	// EStop and Fault are the first latched e-stop and the first latched
	// fault found across the robots, in RecoverInput.Robots' order (each
	// may be of another robot; Robots says whose). With one robot they are
	// that robot's latches.
	EStop safety.EStopStatus `json:"estop"`
	Fault safety.FaultStatus `json:"fault"`
	// Robots holds every robot's latches after the recovery, by robot id
	// (the one key "" without RecoverInput.Robots). The restart's audit
	// record lists only the robots with a latch.
	Robots map[string]RobotLatches `json:"robots,omitempty"`
	// LegacyLatches names the legacy latches ("estop", "fault") that were
	// active and were handed to every robot of RecoverInput.Robots.
	LegacyLatches []string `json:"legacy_latches,omitempty"`
	// CrashFault is true when Recover latched RecoverInput.CrashFault.
	CrashFault bool `json:"crash_fault,omitempty"`
	// AuditSeq is the restart's audit record.
	AuditSeq int64 `json:"audit_seq"`
}

// Recover settles what the previous run left behind, in one transaction,
// before the API opens: every live task becomes interrupted (a transition
// and an audit record each), pending approvals expire, active grants end,
// idempotency reservations are settled, the start or restart is audited
// with the latches found, a crash fault the caller latched is recorded,
// legacy latches are handed to the robots (RecoverInput.Robots), and the
// memory of a crash (Info.CleanShutdown) is settled, so the next run after
// a clean shutdown reads clean again. The caller sends the stop first and
// restores each robot's latches (Latches) into its supervisor.
func (s *Store) Recover(ctx context.Context, in RecoverInput) (RecoveryReport, error) {
	if in.By == "" {
		in.By = "bridge"
	}
	rep := RecoveryReport{Fresh: s.info.Fresh, CleanShutdown: s.info.CleanShutdown}
	robots, err := recoverRobots(in.Robots)
	if err != nil {
		return rep, err
	}
	if s.conf.BridgeID != "" && len(in.Robots) == 0 {
		return rep, fmt.Errorf("store: recover: bridge %s: RecoverInput.Robots is required in cluster mode (recovery touches only this bridge's robots)", s.conf.BridgeID)
	}
	now := s.clock.Now()
	err = s.tx(ctx, "recover", func(tx txn) error {
		rep.Interrupted, rep.ExpiredApprovals, rep.EndedGrants, rep.SettledKeys, rep.ReleasedKeys = nil, nil, nil, 0, 0
		rep.EStop, rep.Fault, rep.Robots, rep.LegacyLatches = safety.EStopStatus{}, safety.FaultStatus{}, nil, nil
		ls, err := loadLatches(ctx, tx, "")
		if err != nil {
			return fmt.Errorf("latches: %w", err)
		}
		rep.Robots = make(map[string]RobotLatches, len(robots))
		for _, r := range robots {
			l := ls.of(r)
			rep.Robots[r] = l
			if l.EStop.Active && !rep.EStop.Active {
				rep.EStop = l.EStop
			}
			if l.Fault.Latched && !rep.Fault.Latched {
				rep.Fault = l.Fault
			}
		}
		if len(in.Robots) > 0 {
			// In cluster mode the legacy rows stay: they hold the other
			// bridges' robots too, which this bridge cannot name.
			keepLegacy := s.conf.BridgeID != ""
			if rep.LegacyLatches, err = handOverLegacyLatches(ctx, tx, ls, robots, now, keepLegacy); err != nil {
				return fmt.Errorf("legacy latches: %w", err)
			}
		}
		// In cluster mode only this bridge's robots and reservations: the
		// other bridges' are theirs, and live.
		var scope []string
		idemScope, idemArgs := "", []any(nil)
		if s.conf.BridgeID != "" {
			scope = robots
			idemScope, idemArgs = " AND bridge_id=?", []any{s.conf.BridgeID}
		}
		if rep.Interrupted, err = s.interruptTasks(ctx, tx, in.By, scope, restartCause(s.info.CleanShutdown), now); err != nil {
			return fmt.Errorf("interrupt tasks: %w", err)
		}
		if rep.ExpiredApprovals, err = s.expireApprovals(ctx, tx, scope, "the bridge restarted before an operator decided; the request expired and nothing moved", now); err != nil {
			return fmt.Errorf("expire approvals: %w", err)
		}
		if rep.EndedGrants, err = s.endGrants(ctx, tx, scope, "the bridge restarted; grants do not survive a restart", now); err != nil {
			return fmt.Errorf("end grants: %w", err)
		}
		res, err := tx.exec(ctx, `UPDATE idempotency SET state=? WHERE state=? AND task_id IS NOT NULL`+idemScope,
			append([]any{string(toolapi.IdemDone), string(toolapi.IdemPending)}, idemArgs...)...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		rep.SettledKeys = int(n)
		if res, err = tx.exec(ctx, `DELETE FROM idempotency WHERE state=? AND task_id IS NULL`+idemScope,
			append([]any{string(toolapi.IdemPending)}, idemArgs...)...); err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		rep.ReleasedKeys = int(n)
		if _, err := tx.exec(ctx, `DELETE FROM meta WHERE key=?`, s.metaKey(metaUnclean)); err != nil {
			return err
		}
		typ, summary := AuditBridgeRestart, "bridge restarted"
		switch {
		case s.info.Fresh:
			typ, summary = AuditBridgeStart, "bridge started with a new store"
		case s.firstRun:
			typ, summary = AuditBridgeStart, "bridge started (its first run on the cluster's store)"
		case s.info.CleanShutdown:
			summary += " after a clean shutdown"
		default:
			summary += " after a crash (the previous run did not shut down)"
		}
		if s.conf.BridgeID != "" {
			summary = strings.Replace(summary, "bridge", "bridge "+s.conf.BridgeID, 1)
		}
		if len(rep.Interrupted) > 0 {
			summary += fmt.Sprintf("; %d task(s) interrupted", len(rep.Interrupted))
		}
		if rep.EStop.Active {
			summary += "; e-stop latch restored" + whichRobots(in.Robots, rep.Robots, func(l RobotLatches) bool { return l.EStop.Active })
		}
		if rep.Fault.Latched {
			summary += "; fault latch restored" + whichRobots(in.Robots, rep.Robots, func(l RobotLatches) bool { return l.Fault.Latched })
		}
		if in.CrashFault != nil {
			summary += "; fault latched: " + in.CrashFault.Reason
		}
		details := map[string]any{"report": auditedReport(rep), "stop_sent": in.StopSent, "store": s.info}
		if in.StopErr != nil {
			details["stop_error"] = in.StopErr.Error()
		}
		maps.Copy(details, in.Details)
		if f := in.CrashFault; f != nil {
			at := f.Since
			if at.IsZero() {
				at = now
			}
			for _, r := range robots {
				e := safety.Event{Kind: safety.EventFaultLatched, At: at, RobotID: r, TaskID: f.TaskID, By: in.By, Reason: f.Reason}
				if err := writeSafetyEvent(ctx, tx, e); err != nil {
					return fmt.Errorf("crash fault of robot %q: %w", r, err)
				}
			}
		}
		seq, err := insertAudit(ctx, tx, AuditRecord{At: now, Type: typ, Actor: in.By, Summary: summary}, details)
		rep.AuditSeq = seq
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("store: recover: %w", err)
	}
	if in.CrashFault != nil {
		rep.CrashFault = true
		crash := *in.CrashFault
		crash.Latched = true
		if !rep.Fault.Latched {
			rep.Fault = crash
		}
		for r, l := range rep.Robots {
			if !l.Fault.Latched {
				l.Fault = crash
				rep.Robots[r] = l
			}
		}
	}
	if len(rep.Interrupted) > 0 || len(rep.ExpiredApprovals) > 0 || rep.EStop.Active || rep.Fault.Latched || len(rep.LegacyLatches) > 0 {
		s.log.Warn("restart recovery", "interrupted", len(rep.Interrupted), "expired_approvals", len(rep.ExpiredApprovals),
			"ended_grants", len(rep.EndedGrants), "estop", rep.EStop.Active, "fault", rep.Fault.Latched, "clean_shutdown", rep.CleanShutdown,
			"robots", len(robots), "legacy_latches", rep.LegacyLatches)
	}
	return rep, nil
}

// recoverRobots checks RecoverInput.Robots and returns the robots Recover
// works on: those, or the one legacy robot "".
func recoverRobots(ids []string) ([]string, error) {
	if len(ids) == 0 {
		return []string{legacyRobot}, nil
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		switch {
		case id == "":
			return nil, fmt.Errorf("store: recover: RecoverInput.Robots[%d] is empty; every robot needs its id", i)
		case seen[id]:
			return nil, fmt.Errorf("store: recover: RecoverInput.Robots names robot %q twice", id)
		}
		seen[id] = true
	}
	return ids, nil
}

// maxNamedRobots bounds how many robots one audit summary names.
const maxNamedRobots = 10

// whichRobots names, for a summary, the robots (in config order) whose
// latches match — nothing when the bridge has one robot, whose summary
// reads as before.
func whichRobots(order []string, by map[string]RobotLatches, match func(RobotLatches) bool) string {
	if len(order) <= 1 {
		return ""
	}
	var names []string
	n := 0
	for _, r := range order {
		if !match(by[r]) {
			continue
		}
		n++
		if len(names) < maxNamedRobots {
			names = append(names, r)
		}
	}
	out := " (" + strings.Join(names, ", ")
	if n > len(names) {
		out += fmt.Sprintf(" and %d more", n-len(names))
	}
	return out + ")"
}

// auditedReport is the report as the restart's audit record keeps it:
// only the robots with a latch, so a large fleet's restart stays one
// small record.
func auditedReport(rep RecoveryReport) RecoveryReport {
	out := rep
	out.Robots = nil
	for r, l := range rep.Robots {
		if l.latched() {
			if out.Robots == nil {
				out.Robots = map[string]RobotLatches{}
			}
			out.Robots[r] = l
		}
	}
	return out
}

func liveStates() []any {
	var out []any
	for _, st := range fsm.AllStates() {
		if !st.Terminal() {
			out = append(out, string(st))
		}
	}
	return out
}

func placeholders(n int) string {
	var s strings.Builder
	for i := range n {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString("?")
	}
	return s.String()
}

// interruptCause words why live tasks are interrupted.
type interruptCause struct {
	// reason is the transition's reason.
	reason string
	// text is the task's message for a task of tool that was in from.
	text func(tool string, from fsm.State) string
}

// restartCause is Recover's: the bridge restarted.
func restartCause(clean bool) interruptCause {
	reason := "the bridge restarted"
	if !clean {
		reason += " after a crash"
	}
	return interruptCause{reason: reason, text: func(tool string, from fsm.State) string {
		what := "nothing had moved"
		if from.Motion() {
			what = "the robot was commanded to stop before the bridge accepted calls again"
		}
		return fmt.Sprintf("the bridge restarted while %s was %s; the task was interrupted and %s", tool, from, what)
	}}
}

// takeoverCause is TakeOver's: the robot's bridge went silent and
// another took the robot over.
func takeoverCause(me, robot string, a acquired) interruptCause {
	dead := "the bridge that drove it"
	if a.had && a.prev.Owner != "" {
		dead = "bridge " + a.prev.Owner
	}
	reason := fmt.Sprintf("%s stopped renewing its lease on robot %s; bridge %s took the robot over", dead, robot, me)
	if a.had && a.prev.Released {
		reason = fmt.Sprintf("%s had released robot %s; bridge %s took the robot over", dead, robot, me)
	}
	return interruptCause{reason: reason, text: func(tool string, from fsm.State) string {
		what := "nothing had moved"
		if from.Motion() {
			what = "the robot stops by itself when its bridge goes silent, and bridge " + me + " commands it to stop before anything else"
		}
		return fmt.Sprintf("%s while %s was %s; the task was interrupted and %s", reason, tool, from, what)
	}}
}

// interruptTasks interrupts every live task (of robots, or of every
// robot when robots is nil) and returns them.
func (s *Store) interruptTasks(ctx context.Context, tx txn, by string, robots []string, cause interruptCause, now time.Time) ([]InterruptedTask, error) {
	live := liveStates()
	q := `SELECT id, robot_id, tool, status, approval_id, grant_id FROM tasks WHERE status IN (` + placeholders(len(live)) + `)`
	args := live
	if robots != nil {
		q += ` AND robot_id IN (` + placeholders(len(robots)) + `)`
		for _, r := range robots {
			args = append(args, r)
		}
	}
	rows, err := tx.query(ctx, q+` ORDER BY created_at`, args...)
	if err != nil {
		return nil, err
	}
	type row struct {
		id, robot, tool, status string
		appr, grant             sql.NullString
	}
	var found []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.robot, &r.tool, &r.status, &r.appr, &r.grant); err != nil {
			closeRead(rows)
			return nil, err
		}
		found = append(found, r)
	}
	closeRead(rows)
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []InterruptedTask
	for _, r := range found {
		from := fsm.State(r.status)
		if _, ok := fsm.Next(from, fsm.EvInterrupt); !ok {
			return nil, fmt.Errorf("task %s is %s, which interrupt cannot leave", r.id, from)
		}
		reason := cause.reason
		te := toolerr.New(toolerr.ActionFailed, "%s", cause.text(r.tool, from)).
			With("task_id", r.id).With("status", string(fsm.Interrupted)).With("was", string(from))
		te.Suggestion = "check get_robot_state to see where the robot is now, then ask the user before calling " + r.tool +
			" again (with a new idempotency key)"
		tr := actions.TransitionRecord{
			TaskID: r.id, RobotID: r.robot, Tool: r.tool, From: from, To: fsm.Interrupted, Event: fsm.EvInterrupt, At: now,
			By: by, Reason: reason, GrantID: r.grant.String, ApprovalID: r.appr.String,
		}
		if err := insertTransition(ctx, tx, tr, now); err != nil {
			return nil, err
		}
		if _, err := tx.exec(ctx, `UPDATE tasks SET status=?, text=?, error=?, updated_at=? WHERE id=?`,
			string(fsm.Interrupted), te.Message, mustJSON(errorRecordOf(te)), ns(now), r.id); err != nil {
			return nil, err
		}
		if _, err := insertAudit(ctx, tx, AuditRecord{
			At: now, Type: TransitionAuditType(fsm.Interrupted), Actor: by, RobotID: r.robot, TaskID: r.id,
			Summary: fmt.Sprintf("task %s (%s): %s → %s (%s)", r.id, r.tool, from, fsm.Interrupted, fsm.EvInterrupt), Reason: reason,
		},
			map[string]any{"tool": r.tool, "from": string(from), "to": string(fsm.Interrupted), "event": string(fsm.EvInterrupt), "text": te.Message}); err != nil {
			return nil, err
		}
		if err := notify(ctx, tx, Notice{Kind: NoticeTask, RobotID: r.robot, ID: r.id}); err != nil {
			return nil, err
		}
		out = append(out, InterruptedTask{ID: r.id, Tool: r.tool, From: from, RobotID: r.robot})
	}
	return out, nil
}

// robotScope is the SQL condition and arguments of robots (nil: every
// robot).
func robotScope(robots []string) (string, []any) {
	if robots == nil {
		return "", nil
	}
	args := make([]any, len(robots))
	for i, r := range robots {
		args[i] = r
	}
	return ` AND robot_id IN (` + placeholders(len(robots)) + `)`, args
}

func (s *Store) expireApprovals(ctx context.Context, tx txn, robots []string, why string, now time.Time) ([]string, error) {
	where, args := robotScope(robots)
	rows, err := tx.query(ctx, `SELECT data FROM approvals WHERE status=?`+where+` ORDER BY created_at`, append([]any{string(approval.StatusPending)}, args...)...)
	if err != nil {
		return nil, err
	}
	var out []string
	var pending []approval.Approval
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			closeRead(rows)
			return nil, err
		}
		var a approval.Approval
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			closeRead(rows)
			return nil, err
		}
		pending = append(pending, a)
	}
	closeRead(rows)
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, a := range pending {
		at := now
		a.Status, a.DecidedAt, a.DecidedBy = approval.StatusExpired, &at, approval.SystemActor
		a.Reason = why
		if err := s.saveApprovalTx(ctx, tx, a, now, approval.SystemActor); err != nil {
			return nil, err
		}
		out = append(out, a.ID)
	}
	return out, nil
}

func (s *Store) endGrants(ctx context.Context, tx txn, robots []string, why string, now time.Time) ([]string, error) {
	where, args := robotScope(robots)
	rows, err := tx.query(ctx, `SELECT data FROM grants WHERE status=?`+where+` ORDER BY created_at`, append([]any{string(approval.GrantActive)}, args...)...)
	if err != nil {
		return nil, err
	}
	var out []string
	var active []approval.Grant
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			closeRead(rows)
			return nil, err
		}
		var g approval.Grant
		if err := json.Unmarshal([]byte(data), &g); err != nil {
			closeRead(rows)
			return nil, err
		}
		active = append(active, g)
	}
	closeRead(rows)
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, g := range active {
		reason := "expired"
		at := g.ExpiresAt
		if now.Before(g.ExpiresAt) {
			at = now
			g.Status, g.RevokedAt, g.RevokedBy = approval.GrantRevoked, &at, approval.SystemActor
			reason = why
		} else {
			g.Status = approval.GrantExpired
		}
		if err := saveGrantTx(ctx, tx, g, at, approval.SystemActor, reason); err != nil {
			return nil, err
		}
		out = append(out, g.ID)
	}
	return out, nil
}
