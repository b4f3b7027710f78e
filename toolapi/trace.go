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
	switch id := ctx.Value(traceKey{}).(type) {
	case string:
		return id
	case *string:
		return *id // a reqCtx's
	}
	return ""
}

var traceparentRe = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// traceIDOf picks the request's trace id. A malformed header is ignored
// rather than trusted: it would otherwise flow into every log line.
func traceIDOf(r *http.Request) string {
	if tp := strings.TrimSpace(r.Header.Get("Traceparent")); tp != "" {
		if m := traceparentRe.FindStringSubmatch(strings.ToLower(tp)); m != nil && m[1] != strings.Repeat("0", 32) {
			return m[1]
		}
	}
	if id := strings.TrimSpace(r.Header.Get("X-Request-Id")); isRequestID(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	var x [32]byte
	hex.Encode(x[:], b[:])
	return string(x[:])
}

// isRequestID reports whether a client's X-Request-Id may be the trace
// id: 1 to 128 of A-Z a-z 0-9 . _ : - (^[A-Za-z0-9._:-]{1,128}$, without
// a regexp's cost on every request).
func isRequestID(id string) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// reqCtx is a request's context as the tool API's middleware makes it:
// its parent's, with the trace id, the connection's id when the server
// gave none (its remote address; see conn.go) and, once requireRole authenticated the
// request, its principal — in one allocation, with the request's
// statusWriter and X-Request-Id header value, instead of a context and a
// copy of the request for each.
type reqCtx struct {
	context.Context
	trace string
	conn  string // "" when the parent names the connection
	hdr   [1]string
	sw    statusWriter
	hasP  bool
	p     Principal
}

// Value implements context.Context.
func (c *reqCtx) Value(key any) any {
	switch key.(type) {
	case traceKey:
		return &c.trace
	case connIDKey:
		if c.conn != "" {
			return &c.conn
		}
	case principalKey:
		if c.hasP {
			return &c.p
		}
	}
	return c.Context.Value(key)
}

// traced gives every request its trace id and logs it once it is done:
// at debug level when it succeeded, at info when it failed (4xx, 5xx).
// The log line has no query string and no headers, so no token can leak
// into it. It also makes sure the request's context names its
// connection: the id ConnContext gave it, or else its remote address,
// unique among the connections open at one time.
func (s *Server) traced(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := &reqCtx{Context: r.Context(), trace: traceIDOf(r)}
		id := rc.trace
		if _, ok := ConnIDFromContext(rc.Context); !ok && r.RemoteAddr != "" {
			rc.conn = "addr " + r.RemoteAddr
		}
		// One value, shared by the request's and the response's header;
		// cap 1, so an Add to either makes its own.
		rc.hdr[0] = id
		r.Header["X-Request-Id"] = rc.hdr[:1:1]
		w.Header()["X-Request-Id"] = rc.hdr[:1:1]
		start := time.Now()
		sw := &rc.sw
		sw.ResponseWriter = w
		h.ServeHTTP(sw, r.WithContext(rc))
		code := sw.status()
		lvl := slog.LevelDebug
		if code >= 400 {
			lvl = slog.LevelInfo
		}
		if s.log.Enabled(r.Context(), lvl) {
			attrs := []any{"method", r.Method, "path", r.URL.Path, "status", code, "duration", time.Since(start), "trace_id", id}
			if p, ok := PrincipalFromContext(rc); ok {
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

// attemptKey finds the counter of a state tool's read attempts in its
// context (stateCtx).
type attemptKey struct{}

// countAttempt counts one try of a read in ctx's counter, if it has one.
func countAttempt(ctx context.Context) {
	if n, ok := ctx.Value(attemptKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
}
