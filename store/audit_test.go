package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
)

// seedAudit writes tasks task-0..n-1 (three records each), one approval
// and one safety event.
func seedAudit(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("task-%d", i)
		at := t0.Add(time.Duration(i) * time.Minute)
		create(t, s, id, "move_base_to", map[string]any{"x": float64(i)}, "agent", at)
		st := move(t, s, id, "move_base_to", fsm.Requested, fsm.EvPreauthorized, at, "config")
		move(t, s, id, "move_base_to", st, fsm.EvStart, at, "supervisor")
	}
	require.NoError(t, s.SaveApproval(context.Background(), testApproval("apr_a", "task-0", approval.StatusPending)))
	s.SafetyEvent(safety.Event{Kind: safety.EventStopSent, At: t0.Add(time.Hour), By: "agent"})
	flush(t, s)
}

func TestAudit_PagesThroughEverythingOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		seedAudit(t, s, 10)
		// When the whole trail is read in pages of 7
		var all []AuditRecord
		cursor := ""
		pages := 0
		for {
			recs, next, err := s.Audit(context.Background(), AuditQuery{Limit: 7, Cursor: cursor})
			require.NoError(t, err)
			all = append(all, recs...)
			pages++
			if next == "" {
				break
			}
			cursor = next
		}
		// Then every record comes exactly once, in order
		require.Len(t, all, 32)
		require.Equal(t, 5, pages)
		for i := 1; i < len(all); i++ {
			require.Greater(t, all[i].Seq, all[i-1].Seq)
		}
		require.Equal(t, all, auditAll(t, s, AuditQuery{}))
	})
}

func TestAudit_Filters(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		seedAudit(t, s, 5)
		tests := []struct {
			name  string
			q     AuditQuery
			count int
			check func(t *testing.T, recs []AuditRecord)
		}{
			{"one task", AuditQuery{TaskID: "task-3"}, 3, func(t *testing.T, recs []AuditRecord) {
				for _, r := range recs {
					require.Equal(t, "task-3", r.TaskID)
				}
			}},
			{"task family", AuditQuery{Type: "task"}, 15, nil},
			{"exact type", AuditQuery{Type: "task.executing"}, 5, nil},
			{"approval family", AuditQuery{Type: "approval"}, 1, nil},
			{"safety", AuditQuery{Type: "safety.stop_sent"}, 1, nil},
			{"since", AuditQuery{Since: t0.Add(3 * time.Minute)}, 3 + 3 + 1, nil},
			{"since and task", AuditQuery{Since: t0.Add(3 * time.Minute), TaskID: "task-1"}, 0, nil},
			{"prefix of a family is not the family", AuditQuery{Type: "tas"}, 0, nil},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				recs, next, err := s.Audit(context.Background(), tc.q)
				require.NoError(t, err)
				require.Empty(t, next)
				require.Len(t, recs, tc.count)
				if tc.check != nil {
					tc.check(t, recs)
				}
			})
		}
	})
}

func TestParseAuditQuery(t *testing.T) {
	good := encodeCursor(42)
	tests := []struct {
		name      string
		raw       string
		export    bool
		want      AuditQuery
		wantParam string
	}{
		{"empty", "", false, AuditQuery{}, ""},
		{
			"everything", "since=2026-03-01T12:00:00Z&task_id=task-1&type=approval.denied&limit=50&cursor=" + good, false,
			AuditQuery{Since: t0, TaskID: "task-1", Type: "approval.denied", Limit: 50, Cursor: good},
			"",
		},
		{"empty values are absent", "since=&task_id=&robot=&type=", false, AuditQuery{}, ""},
		{"a robot", "robot=r-7_b", false, AuditQuery{Robot: "r-7_b"}, ""},
		{"robot and task", "robot=r7&task_id=t-1", true, AuditQuery{Robot: "r7", TaskID: "t-1"}, ""},
		{"uppercase robot", "robot=R7", false, AuditQuery{}, "robot"},
		{"robot with a space", "robot=r%207", false, AuditQuery{}, "robot"},
		{"robot starting with a dash", "robot=-r7", false, AuditQuery{}, "robot"},
		{"long robot", "robot=" + strings.Repeat("r", 64), false, AuditQuery{}, "robot"},
		{"sql in robot", "robot=r7'--", false, AuditQuery{}, "robot"},
		{"repeated robot", "robot=a&robot=b", false, AuditQuery{}, "robot"},
		{"nanoseconds and offset", "since=2026-03-01T13:00:00.5%2B01:00", false, AuditQuery{Since: t0.Add(500 * time.Millisecond)}, ""},
		{"unknown parameter", "task=1", false, AuditQuery{}, "task"},
		{"repeated", "type=task&type=safety", false, AuditQuery{}, "type"},
		{"bad time", "since=yesterday", false, AuditQuery{}, "since"},
		{"unix time", "since=1700000000", false, AuditQuery{}, "since"},
		{"bad task id", "task_id=a%20b", false, AuditQuery{}, "task_id"},
		{"long task id", "task_id=" + strings.Repeat("a", 129), false, AuditQuery{}, "task_id"},
		{"bad type", "type=Task", false, AuditQuery{}, "type"},
		{"sql in type", "type=task'--", false, AuditQuery{}, "type"},
		{"limit zero", "limit=0", false, AuditQuery{}, "limit"},
		{"limit too big", "limit=1001", false, AuditQuery{}, "limit"},
		{"export limit may be big", "limit=5000", true, AuditQuery{Limit: 5000}, ""},
		{"limit not a number", "limit=ten", false, AuditQuery{}, "limit"},
		{"forged cursor", "cursor=bm9wZQ", false, AuditQuery{}, "cursor"},
		{"cursor not base64", "cursor=%%%", false, AuditQuery{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, perr := url.ParseQuery(tc.raw)
			if perr != nil {
				// Not even a query string: the HTTP layer rejects it.
				return
			}
			got, err := ParseAuditQuery(v, tc.export)
			if tc.wantParam == "" {
				require.NoError(t, err)
				require.True(t, tc.want.Since.Equal(got.Since), "since %v vs %v", tc.want.Since, got.Since)
				got.Since, tc.want.Since = time.Time{}, time.Time{}
				require.Equal(t, tc.want, got)
				return
			}
			var qe *QueryError
			require.ErrorAs(t, err, &qe, "%v", err)
			require.ErrorIs(t, err, ErrInvalidQuery)
			require.Equal(t, tc.wantParam, qe.Param)
			require.NotEmpty(t, qe.Allowed)
		})
	}
}

func TestAuditHandler(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		seedAudit(t, s, 3)
		srv := httptest.NewServer(NewAuditHandler(s, AuditHandlerConf{Logger: quietLogger()}))
		defer srv.Close()
		get := func(path string) (*http.Response, []byte) {
			resp, err := http.Get(srv.URL + path)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			var buf strings.Builder
			_, err = bufio.NewReader(resp.Body).WriteTo(&buf)
			require.NoError(t, err)
			return resp, []byte(buf.String())
		}

		t.Run("a page and its cursor", func(t *testing.T) {
			resp, body := get("/v1/audit?limit=4&type=task")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var page struct {
				Records    []AuditRecord `json:"records"`
				NextCursor string        `json:"next_cursor"`
			}
			require.NoError(t, json.Unmarshal(body, &page))
			require.Len(t, page.Records, 4)
			require.NotEmpty(t, page.NextCursor)
			resp, body = get("/v1/audit?limit=4&type=task&cursor=" + page.NextCursor)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var page2 struct {
				Records    []AuditRecord `json:"records"`
				NextCursor *string       `json:"next_cursor"`
			}
			require.NoError(t, json.Unmarshal(body, &page2))
			require.Len(t, page2.Records, 4)
			require.Greater(t, page2.Records[0].Seq, page.Records[3].Seq)
			resp, body = get("/v1/audit?limit=4&type=task&cursor=" + encodeCursor(page2.Records[3].Seq))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var last map[string]any
			require.NoError(t, json.Unmarshal(body, &last))
			require.Len(t, last["records"], 1)
			require.NotContains(t, last, "next_cursor")
		})
		t.Run("bad query is a 400 naming the parameter", func(t *testing.T) {
			resp, body := get("/v1/audit?since=last-tuesday")
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var e struct {
				Error struct {
					Type    string         `json:"type"`
					Message string         `json:"message"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, "INVALID_PARAMS", e.Error.Type)
			require.Equal(t, "since", e.Error.Details["field"])
			require.Contains(t, e.Error.Message, "RFC 3339")
		})
		t.Run("export is JSON lines", func(t *testing.T) {
			resp, body := get("/v1/audit/export?task_id=task-1")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
			lines := strings.Split(strings.TrimSpace(string(body)), "\n")
			require.Len(t, lines, 3)
			for _, l := range lines {
				var r AuditRecord
				require.NoError(t, json.Unmarshal([]byte(l), &r))
				require.Equal(t, "task-1", r.TaskID)
			}
		})
		t.Run("export refuses unknown parameters", func(t *testing.T) {
			resp, _ := get("/v1/audit/export?format=csv")
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		})
		t.Run("only GET", func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/audit", "application/json", strings.NewReader("{}"))
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		})
	})
}

func FuzzParseAuditQuery(f *testing.F) {
	for _, s := range []string{"", "since=2026-03-01T12:00:00Z", "type=task&limit=5", "cursor=" + encodeCursor(7), "task_id=a&task_id=b", "limit=-1", "robot=r7&type=safety", "robot=R%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseAuditQuery(v, false)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidQuery)
			return
		}
		// Whatever parses is a query Audit accepts.
		require.NoError(t, q.validate(false))
		require.True(t, q.Limit >= 0 && q.Limit <= MaxAuditLimit)
	})
}
