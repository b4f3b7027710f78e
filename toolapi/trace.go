package toolapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
)

// Trace ids. Every request gets one: the trace id of an incoming W3C
// traceparent header, else a client's X-Request-Id, else a new random one
// (32 hex digits, a valid W3C trace id). It is put in the request's context
// (TraceIDFromContext), in its X-Request-Id header for the handlers, and in
// the response's X-Request-Id header, so a client can quote it and an
// operator can find every log line of that request by trace_id.

type traceKey struct{}

// WithTraceID returns ctx carrying the trace id.
func WithTraceID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// TraceIDFromContext returns the request's trace id ("" outside a request).
func TraceIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}

var (
	traceparentRe = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)
	requestIDRe   = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

// traceIDOf picks the request's trace id. A malformed header is ignored
// rather than trusted: it would otherwise flow into every log line.
func traceIDOf(r *http.Request) string {
	if tp := strings.TrimSpace(r.Header.Get("Traceparent")); tp != "" {
		if m := traceparentRe.FindStringSubmatch(strings.ToLower(tp)); m != nil && m[1] != strings.Repeat("0", 32) {
			return m[1]
		}
	}
	if id := strings.TrimSpace(r.Header.Get("X-Request-Id")); requestIDRe.MatchString(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// traced gives every request its trace id and logs it once it is done:
// at debug level when it succeeded, at info when it failed (4xx, 5xx).
// The log line has no query string and no headers, so no token can leak
// into it.
func (s *Server) traced(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := traceIDOf(r)
		r.Header.Set("X-Request-Id", id)
		w.Header().Set("X-Request-Id", id)
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r.WithContext(WithTraceID(r.Context(), id)))
		code := sw.status()
		lvl := slog.LevelDebug
		if code >= 400 {
			lvl = slog.LevelInfo
		}
		if s.log.Enabled(r.Context(), lvl) {
			attrs := []any{"method", r.Method, "path", r.URL.Path, "status", code, "duration", time.Since(start), "trace_id", id}
			if p, ok := PrincipalFromRequest(r); ok {
				attrs = append(attrs, "principal", p.Name)
			}
			s.log.Log(r.Context(), lvl, "http request", attrs...)
		}
	})
}

// statusWriter remembers the status code. It passes Flush through (the
// console's event stream needs it) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code atomic.Int32
}

func (w *statusWriter) WriteHeader(code int) {
	w.code.CompareAndSwap(0, int32(code))
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.code.CompareAndSwap(0, http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	w.code.CompareAndSwap(0, http.StatusOK)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if c := w.code.Load(); c != 0 {
		return int(c)
	}
	return http.StatusOK
}

// attempts counts the tries of one call's state read.
type attemptKey struct{}

func withAttemptCounter(ctx context.Context) (context.Context, *atomic.Int32) {
	n := new(atomic.Int32)
	return context.WithValue(ctx, attemptKey{}, n), n
}

func countAttempt(ctx context.Context) {
	if n, ok := ctx.Value(attemptKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
}
