package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// DefaultMaxBodyBytes bounds an operator API request body. A real body is a
// few hundred bytes; a polygon of maxScopeItems vertices fits easily.
const DefaultMaxBodyBytes = 64 << 10

// HTTPConf configures the operator API handler.
type HTTPConf struct {
	// Principal (optional) names the operator making a request; it is
	// recorded as who decided. The bridge's router, which authenticates
	// operators, supplies it. It defaults to the constant "operator".
	Principal func(*http.Request) string
	// Logger (optional). It defaults to slog.Default(); the handler adds
	// component=approval.http.
	Logger *slog.Logger
	// MaxBodyBytes (optional) bounds request bodies. It defaults to 64 KiB.
	MaxBodyBytes int64
}

type httpHandler struct {
	svc       *Service
	principal func(*http.Request) string
	log       *slog.Logger
	maxBody   int64
}

// NewHTTPHandler returns the operator API (see the package comment for the
// routes). It does not authenticate: mount it behind the router that only
// lets operators through.
func NewHTTPHandler(svc *Service, conf HTTPConf) http.Handler {
	h := &httpHandler{svc: svc, principal: conf.Principal, log: conf.Logger, maxBody: conf.MaxBodyBytes}
	if h.principal == nil {
		h.principal = func(*http.Request) string { return "operator" }
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.log = h.log.With("component", "approval.http")
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/approvals", h.list)
	mux.HandleFunc("GET /v1/approvals/{id}", h.get)
	mux.HandleFunc("POST /v1/approvals/{id}/approve", h.approve)
	mux.HandleFunc("POST /v1/approvals/{id}/deny", h.deny)
	mux.HandleFunc("GET /v1/grants", h.listGrants)
	mux.HandleFunc("POST /v1/grants", h.createGrant)
	mux.HandleFunc("DELETE /v1/grants/{id}", h.revoke)
	// The same paths without a method answer 405 in JSON (the mux's own
	// 405 is plain text), and anything else 404 in JSON.
	for path, allow := range map[string]string{
		"/v1/approvals":              "GET",
		"/v1/approvals/{id}":         "GET",
		"/v1/approvals/{id}/approve": "POST",
		"/v1/approvals/{id}/deny":    "POST",
		"/v1/grants":                 "GET, POST",
		"/v1/grants/{id}":            "DELETE",
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, toolerr.InvalidParams,
				fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, toolerr.NotFound, fmt.Sprintf("no operator API route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func (h *httpHandler) list(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status != "" && !Status(status).Valid() {
		writeError(w, http.StatusBadRequest, toolerr.InvalidParams,
			fmt.Sprintf("status: unknown status %q (allowed: pending, approved, denied, expired, cancelled, or none for all)", status))
		return
	}
	robotID, ok := h.robotFilter(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": h.svc.ListRobot(status, robotID)})
}

// robotFilter reads the optional ?robot= of a listing: one of the
// service's robots, or none for every robot. On false the error response
// is already written.
func (h *httpHandler) robotFilter(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query()
	if len(q["robot"]) > 1 {
		writeError(w, http.StatusBadRequest, toolerr.InvalidParams, "robot: give at most one robot id (robots: "+JoinRobotIDs(h.svc.Robots())+")")
		return "", false
	}
	id := q.Get("robot")
	if err := h.svc.CheckRobotFilter("robot", id); err != nil {
		h.fail(w, r, err)
		return "", false
	}
	return id, true
}

func (h *httpHandler) get(w http.ResponseWriter, r *http.Request) {
	a, err := h.svc.Get(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approval": a})
}

// decisionInput reads and strictly decodes a decision's body and names
// the deciding operator. On false the error response is already written.
func decisionInput[T any](h *httpHandler, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error)) (T, string, bool) {
	var zero T
	body, ok := h.body(w, r)
	if !ok {
		return zero, "", false
	}
	v, err := decode(body)
	if err != nil {
		h.fail(w, r, err)
		return zero, "", false
	}
	by, ok := h.who(w, r)
	if !ok {
		return zero, "", false
	}
	return v, by, true
}

func (h *httpHandler) approve(w http.ResponseWriter, r *http.Request) {
	opts, by, ok := decisionInput(h, w, r, decodeApproveBody)
	if !ok {
		return
	}
	a, err := h.svc.Approve(r.Context(), r.PathValue("id"), by, opts)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	resp := map[string]any{"approval": a}
	if a.ScopedGrantID != "" {
		if g, err := h.svc.Grant(a.ScopedGrantID); err == nil {
			resp["grant"] = g
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *httpHandler) deny(w http.ResponseWriter, r *http.Request) {
	reason, by, ok := decisionInput(h, w, r, decodeDenyBody)
	if !ok {
		return
	}
	a, err := h.svc.Deny(r.Context(), r.PathValue("id"), by, reason)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approval": a})
}

func (h *httpHandler) listGrants(w http.ResponseWriter, r *http.Request) {
	robotID, ok := h.robotFilter(w, r)
	if !ok {
		return
	}
	g := h.svc.GrantsRobot(robotID)
	if g == nil {
		g = []Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": g})
}

func (h *httpHandler) createGrant(w http.ResponseWriter, r *http.Request) {
	body, ok := h.body(w, r)
	if !ok {
		return
	}
	spec, err := decodeGrantBody(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	by, ok := h.who(w, r)
	if !ok {
		return
	}
	g, err := h.svc.CreateGrantFor(r.Context(), spec.RobotID, by, spec.Scope, spec.TTL)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"grant": g})
}

// revoke is DELETE /v1/grants/{id}: deleting a grant revokes it (see
// Service.RevokeWith), with an optional {"reason": "…"} body.
func (h *httpHandler) revoke(w http.ResponseWriter, r *http.Request) {
	reason, by, ok := decisionInput(h, w, r, decodeRevokeBody)
	if !ok {
		return
	}
	g, err := h.svc.RevokeWith(r.Context(), r.PathValue("id"), by, RevokeOptions{Reason: reason})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": g})
}

// who returns the operator's name, or answers 500 when the router in front
// did not identify one: a decision nobody can be held to is refused.
func (h *httpHandler) who(w http.ResponseWriter, r *http.Request) (string, bool) {
	by := h.principal(r)
	if strings.TrimSpace(by) == "" {
		h.log.Error("operator API request without an operator identity; check the router's Principal", "path", r.URL.Path)
		writeError(w, http.StatusInternalServerError, toolerr.Internal, "the request carries no operator identity, so the decision could not be recorded; nothing changed")
		return "", false
	}
	return by, true
}

// body reads a size-limited JSON body. A body must be sent as
// application/json (or without a Content-Type): that keeps a cross-site
// form post, which cannot set it, from deciding anything.
func (h *httpHandler) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, toolerr.InvalidParams, fmt.Sprintf("the request body is larger than %d bytes", h.maxBody))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, toolerr.InvalidParams, "could not read the request body")
		return nil, false
	}
	if len(bytes.TrimSpace(b)) > 0 {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, toolerr.InvalidParams,
					fmt.Sprintf("Content-Type %q is not accepted; send the body as application/json", ct))
				return nil, false
			}
		}
	}
	return b, true
}

// fail maps a service or decoding error to a status and the error body.
func (h *httpHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		inv *InvalidError
		nf  *NotFoundError
		np  *NotPendingError
		le  *LatchedError
	)
	switch {
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, toolerr.InvalidParams, inv.Error())
	case errors.As(err, &nf):
		writeError(w, http.StatusNotFound, toolerr.NotFound, nf.Error())
	case errors.As(err, &np):
		writeError(w, http.StatusConflict, toolerr.Conflict, np.Error()+"; nothing changed")
	case errors.As(err, &le):
		writeError(w, http.StatusConflict, toolerr.Conflict, le.Error())
	case errors.Is(err, ErrClosed):
		writeError(w, http.StatusServiceUnavailable, toolerr.Unavailable, "the approval service is shutting down")
	default:
		h.log.Error("operator API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, toolerr.Internal, "the decision could not be recorded; nothing changed, try again")
	}
}

type errorBody struct {
	Error struct {
		Type    toolerr.Type `json:"type"`
		Message string       `json:"message"`
	} `json:"error"`
}

// writeError answers an operator API refusal; its message is a sentence,
// as every message of the bridge is.
func writeError(w http.ResponseWriter, code int, t toolerr.Type, msg string) {
	var b errorBody
	b.Error.Type, b.Error.Message = t, toolerr.Sentence(msg)
	writeJSON(w, code, b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"error":{"type":"INTERNAL","message":"could not encode the response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// Request bodies. Decoding is strict: unknown fields, trailing data and
// wrong types are errors naming the field.

type approveBody struct {
	Reason string     `json:"reason"`
	Grant  *grantBody `json:"grant"`
}

type grantBody struct {
	Scope *Scope `json:"scope"`
	TTL   string `json:"ttl"`
}

// createGrantBody is POST /v1/grants: a grant, and the robot it is for
// (required when the bridge has several). A grant made along with an
// approval is for the approval's robot, so its body has no robot_id.
type createGrantBody struct {
	grantBody
	RobotID string `json:"robot_id"`
}

// createGrantSpec is a decoded POST /v1/grants.
type createGrantSpec struct {
	GrantSpec
	RobotID string
}

type reasonBody struct {
	Reason *string `json:"reason"`
}

// decodeApproveBody decodes POST /v1/approvals/{id}/approve. An empty body
// approves once with no note; a grant without a scope is a tool-only scope
// for the request's tool.
func decodeApproveBody(b []byte) (ApproveOptions, error) {
	var body approveBody
	if len(bytes.TrimSpace(b)) > 0 {
		if err := decodeStrict(b, &body, "reason, grant"); err != nil {
			return ApproveOptions{}, err
		}
	}
	opts := ApproveOptions{Reason: body.Reason}
	if body.Grant != nil {
		spec, err := body.Grant.spec("grant.", false)
		if err != nil {
			return ApproveOptions{}, err
		}
		opts.Grant = &spec
	}
	return opts, nil
}

// decodeDenyBody decodes POST /v1/approvals/{id}/deny; the reason is
// required and returned verbatim.
func decodeDenyBody(b []byte) (string, error) {
	var body reasonBody
	if len(bytes.TrimSpace(b)) == 0 {
		return "", invalid("reason", "required: send {\"reason\": \"…\"} saying why, in words the agent can pass on to the user")
	}
	if err := decodeStrict(b, &body, "reason"); err != nil {
		return "", err
	}
	if body.Reason == nil || strings.TrimSpace(*body.Reason) == "" {
		return "", invalid("reason", "required: say why, in words the agent can pass on to the user")
	}
	return *body.Reason, nil
}

// decodeRevokeBody decodes DELETE /v1/grants/{id}: no body, or
// {"reason": "…"} (the reason is optional and returned verbatim).
func decodeRevokeBody(b []byte) (string, error) {
	var body reasonBody
	if len(bytes.TrimSpace(b)) == 0 {
		return "", nil
	}
	if err := decodeStrict(b, &body, "reason"); err != nil {
		return "", err
	}
	if body.Reason == nil {
		return "", nil
	}
	if err := checkReason("reason", *body.Reason, false); err != nil {
		return "", err
	}
	return *body.Reason, nil
}

// decodeGrantBody decodes POST /v1/grants. The robot_id is checked by the
// service, which knows the robots.
func decodeGrantBody(b []byte) (createGrantSpec, error) {
	var body createGrantBody
	if len(bytes.TrimSpace(b)) == 0 {
		return createGrantSpec{}, invalid("", "a body is required: {\"robot_id\": …, \"scope\": {\"tool\": …, bounds…}, \"ttl\": \"10m\"}")
	}
	if err := decodeStrict(b, &body, "robot_id, scope, ttl"); err != nil {
		return createGrantSpec{}, err
	}
	spec, err := body.spec("", true)
	if err != nil {
		return createGrantSpec{}, err
	}
	return createGrantSpec{GrantSpec: spec, RobotID: body.RobotID}, nil
}

func (g *grantBody) spec(prefix string, scopeRequired bool) (GrantSpec, error) {
	var spec GrantSpec
	switch {
	case g.Scope != nil:
		spec.Scope = *g.Scope
	case scopeRequired:
		return GrantSpec{}, invalid(prefix+"scope", "required: {\"tool\": …} plus the tool's bounds (poses, region or rect, objects or labels)")
	}
	if strings.TrimSpace(g.TTL) == "" {
		return GrantSpec{}, invalid(prefix+"ttl", "required: how long the grant lasts, like \"10m\"")
	}
	d, err := time.ParseDuration(strings.TrimSpace(g.TTL))
	if err != nil {
		return GrantSpec{}, invalid(prefix+"ttl", "%q is not a duration (write it like \"90s\", \"10m\" or \"1h\")", g.TTL)
	}
	if d <= 0 {
		return GrantSpec{}, invalid(prefix+"ttl", "must be positive, got %q", g.TTL)
	}
	spec.TTL = d
	return spec, nil
}

// decodeStrict decodes one JSON object into v: unknown fields, a second
// value after it, and type mismatches are *InvalidError naming the field.
func decodeStrict(b []byte, v any, allowed string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, allowed)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "the body must be one JSON object with nothing after it")
	}
	return nil
}

func jsonError(err error, allowed string) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		return invalid("", "the body is not valid JSON (at byte %d: %s)", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "the body is not valid JSON (it ends too early)")
	case errors.As(err, &te):
		if te.Field == "" {
			return invalid("", "the body must be a JSON object, got a JSON %s", te.Value)
		}
		return invalid(te.Field, "expected %s, got a JSON %s", jsonKind(te.Type.String()), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return invalid("", "unknown field %s (top-level fields: %s; scope fields: tool, poses, region, rect, objects, labels)", name, allowed)
	}
	return invalid("", "the body could not be decoded: %s", err.Error())
}

// jsonKind names a Go type the way an operator writing JSON thinks of it.
func jsonKind(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "float"), strings.Contains(goType, "int"):
		return "a number"
	default:
		return "an object"
	}
}
