package toolapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Handler returns the HTTP handler of the tool API: /v1/… (token
// required), /healthz and /readyz (public), and whatever was mounted.
func (s *Server) Handler() http.Handler { return s.h }

// Mount serves h at pattern (a net/http ServeMux pattern such as
// "POST /v1/approvals/{id}/approve") behind the same authentication:
// RolePublic needs no token, RoleAgent any valid token, RoleOperator the
// operator token. Like ServeMux.Handle it panics on a conflicting pattern,
// which is a wiring bug.
func (s *Server) Mount(pattern string, h http.Handler, role Role) {
	s.mux.Handle(pattern, s.requireRole(role, h))
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.conf.Ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ready": true})
	})
	s.Mount("GET /v1/tools", http.HandlerFunc(s.handleTools), RoleAgent)
	s.Mount("POST /v1/tools/{name}/call", http.HandlerFunc(s.handleCall), RoleAgent)
	s.Mount("POST /v1/tool_calls", http.HandlerFunc(s.handleToolCalls), RoleAgent)
	s.Mount("GET /v1/tasks/{id}", http.HandlerFunc(s.handleGetTask), RoleAgent)
	s.Mount("POST /v1/tasks/{id}/cancel", http.HandlerFunc(s.handleCancelTask), RoleAgent)
	s.Mount("/mcp", s.mcpHandler(), RoleAgent)
	s.Mount("GET /v1/agent/events", http.HandlerFunc(s.handleAgentEvents), RoleAgent)
	// Anything else under /v1/ still needs a token, so an unauthenticated
	// caller cannot even learn which routes exist.
	s.Mount("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, toolerr.New(toolerr.NotFound, "no route %s %s; see GET /v1/tools", r.Method, r.URL.EscapedPath()))
	}), RoleAgent)
	s.h = s.traced(s.recoverer(s.mux))
}

// recoverer turns a panic in a handler into an INTERNAL error response,
// so an agent never sees a dropped connection or a stack trace.
func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				// http.ErrAbortHandler is a deliberate abort, not a
				// bug: let net/http drop the response as it intends.
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeHTTPError(w, http.StatusInternalServerError, toolerr.New(toolerr.Internal, "internal error"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"ok":false,"error":{"type":"INTERNAL","message":"response could not be encoded","retryable":true,"retry_after_ms":1000,"suggestion":"try again once"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// encodeJSON is v as every JSON response carries it: HTML characters not
// escaped, a newline after.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// httpError is the body of an HTTP-layer failure (bad body, no token): the
// envelope's error, without robot state, which an unauthenticated caller
// must not learn.
type httpError struct {
	OK    bool       `json:"ok"`
	Error *ErrorBody `json:"error"`
}

func writeHTTPError(w http.ResponseWriter, status int, te *toolerr.Error) {
	writeJSON(w, status, httpError{OK: false, Error: ErrorBodyOf(te)})
}

func permissionDenied(msg string, need Role) *toolerr.Error {
	te := toolerr.New(toolerr.PermissionDenied, "%s", msg)
	return te.With("required_role", string(need))
}

// handleTools serves GET /v1/tools in the format asked for (see
// formats.go): native by default, or the tools array of one model API.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	tools := s.reg.Tools()
	q := r.URL.Query()
	f := q.Get("format")
	strict, strictSet := false, q.Has("strict")
	if strictSet {
		switch v := q.Get("strict"); v {
		case "true":
			strict = true
		case "false":
		default:
			writeHTTPError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "strict=%q is not valid; allowed: true or false", v).
				With("field", "strict").With("received", v).With("allowed", "true, false"))
			return
		}
		if f != "openai" {
			writeHTTPError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams,
				"strict applies only to format=openai (OpenAI's structured outputs); remove it or use format=openai&strict=true").
				With("field", "strict").With("received", q.Get("strict")).With("allowed", "only with format=openai"))
			return
		}
	}
	switch f {
	case "", "native":
		infos := make([]ToolInfo, len(tools))
		for i, t := range tools {
			infos[i] = t.Info()
		}
		writeJSON(w, http.StatusOK, map[string]any{"tools": infos})
	case "openai":
		out := make([]OpenAITool, len(tools))
		for i, t := range tools {
			if strict {
				out[i] = t.OpenAIStrict()
			} else {
				out[i] = t.OpenAI()
			}
		}
		writeJSON(w, http.StatusOK, out)
	case "anthropic":
		out := make([]AnthropicTool, len(tools))
		for i, t := range tools {
			out[i] = t.Anthropic()
		}
		writeJSON(w, http.StatusOK, out)
	case "gemini":
		decl := make([]GeminiFunction, len(tools))
		for i, t := range tools {
			decl[i] = t.Gemini()
		}
		writeJSON(w, http.StatusOK, []GeminiTool{{FunctionDeclarations: decl}})
	default:
		allowed := strings.Join(Formats, ", ")
		te := toolerr.New(toolerr.InvalidParams, "unknown format %q; allowed: %s (openai also takes strict=true)", f, allowed).
			With("field", "format").With("received", f).With("allowed", allowed)
		writeHTTPError(w, http.StatusBadRequest, te)
	}
}

// callBody is the body of POST /v1/tools/{name}/call.
type callBody struct {
	Arguments      json.RawMessage `json:"arguments"`
	SessionID      string          `json:"session_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	WaitMS         int64           `json:"wait_ms"`
}

const maxIDLen = 256

// decodeCallBody parses a call body strictly: unknown fields, trailing
// data and bad types are body errors (HTTP 400). A problem with the
// arguments themselves is the tool-level argErr (HTTP 200, ok false), so
// the agent gets it in the envelope like any other INVALID_PARAMS.
func decodeCallBody(data []byte) (req CallRequest, argErr *toolerr.Error, bodyErr *toolerr.Error) {
	if req, ok := decodeCallBodyFast(data); ok {
		return req, nil, nil
	}
	return decodeCallBodyJSON(data)
}

// decodeCallBodyJSON is decodeCallBody with encoding/json, for any body.
func decodeCallBodyJSON(data []byte) (req CallRequest, argErr *toolerr.Error, bodyErr *toolerr.Error) {
	var b callBody
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			return req, nil, bodyError(err)
		}
		if dec.More() {
			return req, nil, bodyError(errors.New("extra data after the JSON object"))
		}
		if _, err := dec.Token(); err != io.EOF {
			return req, nil, bodyError(errors.New("extra data after the JSON object"))
		}
	}
	switch {
	case b.WaitMS < 0:
		return req, nil, fieldError("wait_ms", b.WaitMS, "an integer number of milliseconds ≥ 0")
	case len(b.SessionID) > maxIDLen:
		return req, nil, fieldError("session_id", b.SessionID[:32]+"…", fmt.Sprintf("a string of at most %d characters", maxIDLen))
	case len(b.IdempotencyKey) > maxIDLen:
		return req, nil, fieldError("idempotency_key", b.IdempotencyKey[:32]+"…", fmt.Sprintf("a string of at most %d characters", maxIDLen))
	}
	req = CallRequest{SessionID: b.SessionID, IdempotencyKey: b.IdempotencyKey, Wait: time.Duration(b.WaitMS) * time.Millisecond}
	req.Arguments, argErr = decodeArguments(b.Arguments)
	return req, argErr, nil
}

// decodeArguments accepts the arguments as a JSON object, as null/absent
// (no arguments) or as a string holding one (repaired like a model's
// tool_call arguments).
func decodeArguments(raw json.RawMessage) (map[string]any, *toolerr.Error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	switch t[0] {
	case '{':
		var m map[string]any
		if err := json.Unmarshal(t, &m); err != nil {
			return nil, argsError(string(t), "%s", jsonErrText(string(t), err))
		}
		if k := duplicateKey(t); k != "" {
			return nil, duplicateKeyError(string(t), k)
		}
		return m, nil
	case '"':
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, argsError(string(t), "%v", err)
		}
		m, _, err := ExtractArguments(s)
		if err != nil {
			return nil, toolerr.As(err)
		}
		return m, nil
	}
	var v any
	_ = json.Unmarshal(t, &v)
	return nil, argsError(string(t), "they are a JSON %s, not an object", jsonKind(v))
}

func bodyError(err error) *toolerr.Error {
	msg := err.Error()
	var se *json.SyntaxError
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		msg = fmt.Sprintf("the body is not valid JSON: %v at offset %d", se, se.Offset)
	case errors.As(err, &ute):
		return fieldError(ute.Field, ute.Value, "a "+ute.Type.String())
	case strings.HasPrefix(msg, "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		te := toolerr.New(toolerr.InvalidParams, "the body has an unknown field %q; allowed: arguments, session_id, idempotency_key, wait_ms", f)
		te.Suggestion = `put tool arguments inside "arguments": {"arguments": {...}, "session_id": "...", "idempotency_key": "...", "wait_ms": 0}`
		return te.With("field", f).With("allowed", "arguments, session_id, idempotency_key, wait_ms")
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "the body ends before the JSON object is complete"
	}
	te := toolerr.New(toolerr.InvalidParams, "%s", msg)
	te.Suggestion = `send a JSON object: {"arguments": {...}, "session_id": "...", "idempotency_key": "...", "wait_ms": 0}`
	return te.With("field", "body")
}

func fieldError(field string, received any, allowed string) *toolerr.Error {
	return toolerr.New(toolerr.InvalidParams, "%s=%v is not valid; allowed: %s", field, received, allowed).
		With("field", field).With("received", received).With("allowed", allowed)
}

// readBody reads at most the configured body size; a larger body is a
// 413 with an envelope-shaped error.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	var body io.Reader
	var data []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= s.conf.MaxBodyBytes {
		// The common case: a declared, small body is read in one go. One
		// byte past it is read to check nothing follows; below the limit
		// that byte is within it, so the body needs no MaxBytesReader.
		body = r.Body
		if n == s.conf.MaxBodyBytes {
			body = http.MaxBytesReader(w, r.Body, s.conf.MaxBodyBytes)
		}
		// The byte past the body is read into the buffer's spare one.
		data = make([]byte, n, n+1)
		_, err = io.ReadFull(body, data)
		if err == nil {
			if m, _ := body.Read(data[n : n+1]); m > 0 {
				err = errors.New("body longer than its Content-Length")
			}
		}
	} else {
		data, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.conf.MaxBodyBytes))
	}
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, toolerr.New(toolerr.InvalidParams,
				"the body is larger than %d bytes", s.conf.MaxBodyBytes).With("field", "body").With("allowed", fmt.Sprintf("at most %d bytes", s.conf.MaxBodyBytes)))
			return nil, false
		}
		writeHTTPError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "the body could not be read").With("field", "body"))
		return nil, false
	}
	return data, true
}

func principalOf(r *http.Request) Principal {
	if p, ok := PrincipalFromRequest(r); ok {
		return p
	}
	return Principal{Name: "anonymous"}
}

func (s *Server) handleCall(w http.ResponseWriter, r *http.Request) {
	data, ok := s.readBody(w, r)
	if !ok {
		return
	}
	req, argErr, bodyErr := decodeCallBody(data)
	if bodyErr != nil {
		writeHTTPError(w, http.StatusBadRequest, bodyErr)
		return
	}
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != h {
			writeHTTPError(w, http.StatusBadRequest, fieldError("idempotency_key", req.IdempotencyKey,
				"the same value as the Idempotency-Key header, or only one of them"))
			return
		}
		req.IdempotencyKey = h
	}
	req.Tool = r.PathValue("name")
	req.TraceID = r.Header.Get("X-Request-Id")
	if argErr != nil {
		writeJSON(w, http.StatusOK, s.callWithArgError(r.Context(), principalOf(r), req, argErr))
		return
	}
	s.writeReply(w, s.call(r.Context(), principalOf(r), req, nil))
}

// writeReply writes a call's envelope: get_robot_state's cached answer as
// its encoding with this call's state_age_ms, anything else encoded now.
// The bytes are the same either way.
func (s *Server) writeReply(w http.ResponseWriter, r reply) {
	if r.state != nil {
		writeStateAnswer(w, r.state, r.obs.Age().Milliseconds())
		return
	}
	writeJSON(w, http.StatusOK, r.envelope())
}

func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request) {
	args := map[string]any{"task_id": r.PathValue("id")}
	if v := r.URL.Query().Get("wait_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			writeHTTPError(w, http.StatusBadRequest, fieldError("wait_ms", v, "an integer number of milliseconds ≥ 0"))
			return
		}
		args["wait_ms"] = float64(min(ms, s.conf.MaxWait.Milliseconds()))
	}
	robotIDQuery(r, args)
	req := CallRequest{Tool: ToolGetTask, Arguments: args, SessionID: r.Header.Get("X-Session-Id"), TraceID: r.Header.Get("X-Request-Id")}
	writeJSON(w, http.StatusOK, s.Call(r.Context(), principalOf(r), req))
}

func (s *Server) handleCancelTask(w http.ResponseWriter, r *http.Request) {
	args := map[string]any{"task_id": r.PathValue("id")}
	robotIDQuery(r, args)
	req := CallRequest{
		Tool: ToolCancelTask, Arguments: args,
		SessionID: r.Header.Get("X-Session-Id"), TraceID: r.Header.Get("X-Request-Id"),
	}
	writeJSON(w, http.StatusOK, s.Call(r.Context(), principalOf(r), req))
}

// robotIDQuery passes a task route's ?robot_id= to the call: on a fleet a
// task id is its robot's runner's own, so the route needs the robot too.
func robotIDQuery(r *http.Request, args map[string]any) {
	if q := r.URL.Query(); q.Has(RobotIDArg) {
		args[RobotIDArg] = q.Get(RobotIDArg)
	}
}
