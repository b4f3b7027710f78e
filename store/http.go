package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
)

// AuditHandlerConf configures NewAuditHandler.
type AuditHandlerConf struct {
	// Logger (optional). It defaults to slog.Default(); the handler adds
	// component=store.http.
	Logger *slog.Logger
}

// NewAuditHandler serves the audit trail to operators:
//
//	GET /v1/audit?since=&task_id=&robot=&type=&limit=&cursor=  → {"records":[AuditRecord…], "next_cursor"?: "…"}
//	GET /v1/audit/export?since=&task_id=&robot=&type=&limit=   → JSON lines, one AuditRecord each (application/x-ndjson)
//
// robot keeps one robot's records (a robot id, as in the hw-config);
// without it the records of every robot and of the bridge itself come.
//
// A malformed query is a 400 {"error":{"type":"INVALID_PARAMS","message":…,
// "details":{"field":…,"allowed":…}}}. The handler does no authentication:
// mount it behind the router that only lets operators through.
func NewAuditHandler(s *Store, conf AuditHandlerConf) http.Handler {
	log := conf.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "store.http")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audit", func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseAuditQuery(r.URL.Query(), false)
		if err != nil {
			writeQueryError(w, err)
			return
		}
		recs, next, err := s.Audit(r.Context(), q)
		if err != nil {
			if errors.Is(err, ErrInvalidQuery) {
				writeQueryError(w, err)
				return
			}
			log.Error("audit query failed", "err", err)
			writeStoreError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the audit trail could not be read right now")
			return
		}
		if recs == nil {
			recs = []AuditRecord{}
		}
		body := map[string]any{"records": recs}
		if next != "" {
			body["next_cursor"] = next
		}
		writeJSONBody(w, http.StatusOK, body)
	})
	mux.HandleFunc("GET /v1/audit/export", func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseAuditQuery(r.URL.Query(), true)
		if err != nil {
			writeQueryError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Content-Disposition", `attachment; filename="robot-bridge-audit.jsonl"`)
		bw := bufio.NewWriterSize(w, 32<<10)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		n := 0
		err = s.ExportAudit(r.Context(), q, func(rec AuditRecord) error {
			n++
			return enc.Encode(rec)
		})
		if err != nil {
			// The status line is gone once a record was written; the
			// truncated stream and the log say what happened.
			log.Error("audit export failed", "records_sent", n, "err", err)
			if n == 0 {
				writeStoreError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the audit trail could not be read right now")
				return
			}
		}
		_ = bw.Flush()
	})
	return mux
}

func writeQueryError(w http.ResponseWriter, err error) {
	var qe *QueryError
	if !errors.As(err, &qe) {
		writeStoreError(w, http.StatusBadRequest, "INVALID_PARAMS", err.Error())
		return
	}
	writeJSONBody(w, http.StatusBadRequest, map[string]any{"ok": false, "error": map[string]any{
		"type": "INVALID_PARAMS", "message": qe.Error(), "retryable": false,
		"suggestion": "fix the query parameter named in details.field",
		"details":    map[string]any{"field": qe.Param, "allowed": qe.Allowed},
	}})
}

func writeStoreError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSONBody(w, code, map[string]any{"ok": false, "error": map[string]any{"type": typ, "message": msg, "retryable": code >= 500}})
}

func writeJSONBody(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
