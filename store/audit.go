package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AuditRecord is one entry of the audit trail: who (Actor) did what (Type,
// Summary, Details) to which task or approval, when (At) and why (Reason).
type AuditRecord struct {
	// Seq orders the trail; it only grows.
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	Type string    `json:"type"`
	// Actor is who caused it: an operator or agent credential name,
	// "supervisor", "robot", "system", "bridge".
	Actor string `json:"actor,omitempty"`
	// RobotID is the robot the record is about (hw-config robot.id); it
	// is empty for what concerns the whole bridge (its start, restart and
	// shutdown) and for records a single-robot bridge wrote before the
	// store knew robots.
	RobotID string `json:"robot_id,omitempty"`
	TaskID  string `json:"task_id,omitempty"`
	// Subject is the approval or grant id the record is about.
	Subject string `json:"subject,omitempty"`
	// Summary says what happened in one line.
	Summary string `json:"summary"`
	// Reason is the why, verbatim: an operator's words, a monitor's
	// finding.
	Reason  string          `json:"reason,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
}

// Paging limits of the audit API.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
	// exportPage is how many records an export reads per query.
	exportPage = 500
)

// AuditQuery filters the audit trail. The zero value reads from the start.
type AuditQuery struct {
	// Since keeps records at or after this time.
	Since time.Time
	// TaskID keeps the records of one task.
	TaskID string
	// Robot keeps the records of one robot (its hw-config robot.id); empty
	// keeps every robot's and the bridge's own.
	Robot string
	// Type keeps one type ("approval.approved") or, without a dot, a
	// family ("approval", "task", "safety", "grant", "bridge").
	Type string
	// Limit is the page size: 1 to MaxAuditLimit, 0 for DefaultAuditLimit.
	// For ExportAudit it caps the whole export (0: everything).
	Limit int
	// Cursor continues after the last record of a previous page; it is
	// opaque and comes from Audit's second result.
	Cursor string
}

// ErrInvalidQuery is wrapped by every *QueryError.
var ErrInvalidQuery = errors.New("invalid audit query")

// QueryError names the query parameter at fault and what it allows.
type QueryError struct {
	Param   string
	Value   string
	Allowed string
}

// Error implements error.
func (e *QueryError) Error() string {
	v := e.Value
	if len(v) > 64 {
		v = v[:64] + "…"
	}
	if e.Value == "" && e.Param != "" {
		return fmt.Sprintf("audit query parameter %s: allowed: %s", e.Param, e.Allowed)
	}
	return fmt.Sprintf("audit query parameter %s=%q is not valid; allowed: %s", e.Param, v, e.Allowed)
}

// Unwrap returns ErrInvalidQuery.
func (e *QueryError) Unwrap() error { return ErrInvalidQuery }

var (
	auditTypeRe = regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z_]+)?$`)
	taskIDRe    = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	// robotIDRe is hw-configs' rule for robot.id, repeated here so the
	// store does not depend on the configuration package.
	robotIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
)

// robotIDAllowed says what a robot filter may be.
const robotIDAllowed = "a robot id: 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit"

// auditParams are the parameters ParseAuditQuery accepts.
var auditParams = []string{"since", "task_id", "robot", "type", "limit", "cursor"}

// ParseAuditQuery reads the query string of GET /v1/audit (export false)
// or GET /v1/audit/export (export true) strictly: unknown or repeated
// parameters and malformed values are *QueryError naming the parameter and
// what is allowed. An empty value is the same as leaving it out.
func ParseAuditQuery(v url.Values, export bool) (AuditQuery, error) {
	var q AuditQuery
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		known := false
		for _, p := range auditParams {
			known = known || k == p
		}
		if !known {
			return q, &QueryError{Param: k, Value: v.Get(k), Allowed: "only " + strings.Join(auditParams, ", ")}
		}
		if len(v[k]) > 1 {
			return q, &QueryError{Param: k, Value: strings.Join(v[k], ","), Allowed: "the parameter once"}
		}
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, &QueryError{Param: "since", Value: s, Allowed: "an RFC 3339 time, e.g. 2026-01-02T15:04:05Z"}
		}
		q.Since = t
	}
	if s := v.Get("task_id"); s != "" {
		if !taskIDRe.MatchString(s) {
			return q, &QueryError{Param: "task_id", Value: s, Allowed: "a task id: 1 to 128 letters, digits or . _ : -"}
		}
		q.TaskID = s
	}
	if s := v.Get("robot"); s != "" {
		if !robotIDRe.MatchString(s) {
			return q, &QueryError{Param: "robot", Value: s, Allowed: robotIDAllowed}
		}
		q.Robot = s
	}
	if s := v.Get("type"); s != "" {
		if len(s) > 64 || !auditTypeRe.MatchString(s) {
			return q, &QueryError{
				Param: "type", Value: s,
				Allowed: "a record type like approval.approved or a family like approval, task, safety, grant, bridge",
			}
		}
		q.Type = s
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		maxN := MaxAuditLimit
		if export {
			maxN = 1 << 30
		}
		if err != nil || n < 1 || n > maxN {
			return q, &QueryError{Param: "limit", Value: s, Allowed: fmt.Sprintf("an integer from 1 to %d", maxN)}
		}
		q.Limit = n
	}
	if s := v.Get("cursor"); s != "" {
		if _, err := decodeCursor(s); err != nil {
			return q, &QueryError{Param: "cursor", Value: s, Allowed: "the next_cursor value of a previous page, unchanged"}
		}
		q.Cursor = s
	}
	return q, nil
}

const cursorPrefix = "a1:"

func encodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(seq, 10)))
}

func decodeCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, errors.New("malformed cursor")
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(string(b), cursorPrefix), 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("malformed cursor")
	}
	return n, nil
}

func (q AuditQuery) validate(export bool) error {
	if q.TaskID != "" && !taskIDRe.MatchString(q.TaskID) {
		return &QueryError{Param: "task_id", Value: q.TaskID, Allowed: "a task id: 1 to 128 letters, digits or . _ : -"}
	}
	if q.Robot != "" && !robotIDRe.MatchString(q.Robot) {
		return &QueryError{Param: "robot", Value: q.Robot, Allowed: robotIDAllowed}
	}
	if q.Type != "" && !auditTypeRe.MatchString(q.Type) {
		return &QueryError{Param: "type", Value: q.Type, Allowed: "a record type like approval.approved or a family like approval"}
	}
	if q.Limit < 0 || (!export && q.Limit > MaxAuditLimit) {
		return &QueryError{Param: "limit", Value: strconv.Itoa(q.Limit), Allowed: fmt.Sprintf("0 to %d", MaxAuditLimit)}
	}
	if _, err := decodeCursor(q.Cursor); err != nil {
		return &QueryError{Param: "cursor", Value: q.Cursor, Allowed: "the next_cursor value of a previous page, unchanged"}
	}
	return nil
}

// Audit returns one page of the audit trail, oldest first, and the cursor
// of the next page ("" when this page is the last).
func (s *Store) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, string, error) {
	if err := q.validate(false); err != nil {
		return nil, "", err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultAuditLimit
	}
	after, _ := decodeCursor(q.Cursor)
	recs, err := s.auditPage(ctx, q, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(recs) > limit {
		recs = recs[:limit]
		next = encodeCursor(recs[len(recs)-1].Seq)
	}
	return recs, next, nil
}

// ExportAudit calls fn with every record matching q, oldest first, reading
// a page at a time; q.Limit caps the count (0: all). It stops at fn's
// first error and returns it.
func (s *Store) ExportAudit(ctx context.Context, q AuditQuery, fn func(AuditRecord) error) error {
	if err := q.validate(true); err != nil {
		return err
	}
	after, _ := decodeCursor(q.Cursor)
	sent := 0
	for {
		page := exportPage
		if q.Limit > 0 {
			page = min(page, q.Limit-sent)
		}
		if page <= 0 {
			return nil
		}
		recs, err := s.auditPage(ctx, q, after, page)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		sent += len(recs)
		if len(recs) < page {
			return nil
		}
		after = recs[len(recs)-1].Seq
	}
}

func (s *Store) auditPage(ctx context.Context, q AuditQuery, after int64, limit int) ([]AuditRecord, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + auditColumns + ` FROM audit WHERE seq > ?`)
	args := []any{after}
	if !q.Since.IsZero() {
		sb.WriteString(` AND at >= ?`)
		args = append(args, ns(q.Since))
	}
	if q.TaskID != "" {
		sb.WriteString(` AND task_id = ?`)
		args = append(args, q.TaskID)
	}
	if q.Robot != "" {
		sb.WriteString(` AND robot_id = ?`)
		args = append(args, q.Robot)
	}
	if q.Type != "" {
		if strings.Contains(q.Type, ".") {
			sb.WriteString(` AND type = ?`)
			args = append(args, q.Type)
		} else {
			// A family: every type from "family." up to "family/" ('/'
			// sorts right after '.').
			sb.WriteString(` AND type >= ? AND type < ?`)
			args = append(args, q.Type+".", q.Type+"/")
		}
	}
	sb.WriteString(` ORDER BY seq LIMIT ?`)
	args = append(args, limit)
	rows, err := s.query(ctx, sb.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	defer closeRead(rows)
	return scanAudit(rows)
}

// auditColumns are the columns scanAudit reads, in its order.
const auditColumns = `seq, at, type, actor, robot_id, task_id, subject, summary, reason, details`

func scanAudit(rows *sql.Rows) ([]AuditRecord, error) {
	var out []AuditRecord
	for rows.Next() {
		var r AuditRecord
		var at int64
		var task, subject, details sql.NullString
		if err := rows.Scan(&r.Seq, &at, &r.Type, &r.Actor, &r.RobotID, &task, &subject, &r.Summary, &r.Reason, &details); err != nil {
			return nil, fmt.Errorf("store: audit: %w", err)
		}
		r.At, r.TaskID, r.Subject = fromNS(at), task.String, subject.String
		if details.Valid && details.String != "" {
			r.Details = json.RawMessage(details.String)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return out, nil
}

// Recent returns the newest limit records (1 to MaxAuditLimit), newest
// first, for the operator console's audit view.
func (s *Store) Recent(ctx context.Context, limit int) ([]AuditRecord, error) {
	if limit < 1 || limit > MaxAuditLimit {
		return nil, &QueryError{Param: "limit", Value: strconv.Itoa(limit), Allowed: fmt.Sprintf("an integer from 1 to %d", MaxAuditLimit)}
	}
	rows, err := s.query(ctx, `SELECT `+auditColumns+` FROM audit ORDER BY seq DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	defer closeRead(rows)
	return scanAudit(rows)
}

// AppendAudit writes one audit record (synchronously) with details
// encoded as JSON, and returns its sequence number. The bridge records its
// start, restart and shutdown with it.
func (s *Store) AppendAudit(ctx context.Context, r AuditRecord, details any) (int64, error) {
	if r.Type == "" || !auditTypeRe.MatchString(r.Type) {
		return 0, fmt.Errorf("store: audit type %q: want a dotted lowercase type like bridge.start", r.Type)
	}
	if r.At.IsZero() {
		r.At = s.clock.Now()
	}
	var seq int64
	err := s.tx(ctx, "audit", func(tx txn) error {
		var err error
		seq, err = insertAudit(ctx, tx, r, details)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: audit: %w", err)
	}
	return seq, nil
}

// qInsertAudit writes one audit record (prepared, group.go).
const qInsertAudit = `INSERT INTO audit(at, type, actor, robot_id, task_id, subject, summary, reason, details) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)`

func insertAudit(ctx context.Context, tx txn, r AuditRecord, details any) (int64, error) {
	var d any
	switch v := details.(type) {
	case nil:
	case json.RawMessage:
		if len(v) > 0 {
			d = string(v)
		}
	default:
		d = mustJSON(v)
	}
	at := r.At
	if at.IsZero() {
		at = time.Now()
	}
	return insertReturningSeq(ctx, tx, qInsertAudit,
		ns(at), r.Type, r.Actor, r.RobotID, nullStr(r.TaskID), nullStr(r.Subject), r.Summary, r.Reason, d)
}
