package toolapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// mcpHandler serves the same tools over MCP (streamable HTTP). Every MCP
// tool call goes through (*Server).Call, so auth (the /mcp route needs
// the agent role), validation, idempotency and the loop guard are the
// same as over HTTP. The result's text content is the Envelope as JSON and
// its structured content the Envelope itself; isError is !ok, so an agent
// sees tool failures as results it can act on, never as protocol errors.
// The MCP session id scopes the loop guard.
//
// What a host reads before the model acts comes with it: every tool's
// annotations (mcpTool), the server's instructions with the tool-error
// rules (mcp_instructions.go), the robot and the caller's tasks as
// subscribable resources (mcp_resources.go), and progress notifications
// while a call waits for its task (mcp_progress.go).
//
// An action that can move the robot is sent at most once per key
// (docs/DESIGN.md §4, invariant 7). MCP gives a call no key of its own that a
// retry would carry: a host that gives up on a tools/call (a timeout, a
// dropped connection) and tries again sends a new request with a new
// JSON-RPC id, often on a new session whose ids start again from 0. So:
//
//   - The key a retry carries is one the caller chose: the
//     "idempotency_key" argument every moving action's MCP input schema
//     advertises (the model can set it), or "idempotency_key" in the
//     call's _meta (a host can). It is scoped to the credential, not the
//     session, so it survives a reconnect, and it is the same key as an
//     idempotency_key of that value on /v1/tools/{name}/call.
//   - Without one, the call's JSON-RPC id on its MCP session is the key.
//     The protocol forbids reusing an id within a session, so the same id
//     again on the same session is the same request sent again (by a
//     gateway or a transport that lost the answer): it gets the first
//     answer and sends nothing. A retry with a new id is a new call.
func (s *Server) mcpHandler() http.Handler {
	// Every wait for a task (an action's wait_ms, get_task's long poll)
	// goes through progressTasks (every robot's Tasks is one, see
	// unit.fill), which sends MCP progress notifications when the call
	// that waits carries a progress token (mcp_progress.go).
	m := newMCPState(s)
	sdkLog := slog.New(sdkLogHandler{s.log.Handler()})
	srv := mcp.NewServer(&mcp.Implementation{Name: "robot-bridge", Title: "robot-bridge tools", Version: "0.1.0"},
		&mcp.ServerOptions{
			Instructions: mcpInstructions(s.conf.MaxWait) + s.fleetInstructions(),
			Logger:       sdkLog,
			// Resources are subscribable; updates come from the event bus
			// (mcp_resources.go).
			SubscribeHandler:   m.subscribe,
			UnsubscribeHandler: m.unsubscribe,
		})
	m.srv = srv
	// Every handler finds the caller in its context: the route's
	// middleware authenticated the HTTP request, and the SDK hands each
	// request's header along — but not to every handler (a 2026-07-28
	// subscriptions/listen subscribes without it), so the principal is
	// put in the context as the request arrives.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := s.mcpPrincipal(ctx, req.GetExtra()); ok {
				ctx = WithPrincipal(ctx, p)
			}
			// An unknown tool is answered as over HTTP and gRPC: an
			// UNKNOWN_TOOL envelope with the closest names (isError), not
			// the SDK's bare JSON-RPC "unknown tool" error.
			if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && cr.Params != nil {
				if _, known := s.reg.Lookup(cr.Params.Name); !known {
					return s.mcpCall(ctx, cr.Params.Name, cr), nil
				}
			}
			return next(ctx, method, req)
		}
	})
	for _, t := range s.reg.Tools() {
		name := t.Name
		srv.AddTool(s.mcpTool(t), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.mcpCall(ctx, name, req), nil
		})
	}
	m.addResources()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Logger: sdkLog})
	return s.mcpRequestIDs(m.closeOnShutdown(h))
}

// mcpKeyField is the argument (and the _meta field) that carries an MCP
// call's idempotency key.
const mcpKeyField = "idempotency_key"

// mcpRequestIDHeader carries the JSON-RPC id of a POSTed tools/call from
// mcpRequestIDs to the tool handler (the SDK hands the handler the HTTP
// request's header, not the id). Only the bridge sets it: a client's own
// value is removed.
const mcpRequestIDHeader = "X-Robot-Bridge-Mcp-Request-Id"

// onceByKey reports whether calls of t are sent at most once per key: every
// action that can move the robot. stop and cancel_task only ever stop
// motion and always run.
func onceByKey(t *Tool) bool { return t.Kind == KindAction && !neverRefused(t.Name) }

// mcpWaitField is the argument of a moving action's MCP call that makes
// the call wait for its task (the body's wait_ms over HTTP).
const mcpWaitField = "wait_ms"

// mcpTool is t as MCP lists it: a moving action's input schema gains the
// optional idempotency_key and wait_ms arguments, and the annotations tell
// a host what the tool does to the world: state tools only read (and may
// be repeated), motion tools move the robot (destructive: a host should
// ask before it lets a model call one), stop and cancel_task only ever
// end motion, and no tool reaches beyond this bridge and its robot.
func (s *Server) mcpTool(t *Tool) *mcp.Tool {
	params := t.OpenAI().Function.Parameters
	desc := t.Description
	motion := onceByKey(t)
	if motion {
		props := maps.Clone(params["properties"].(map[string]any))
		props[mcpKeyField] = map[string]any{
			"type": "string", "minLength": 1, "maxLength": maxIDLen,
			"description": "optional; a new unique string (e.g. a UUID) for every new action. If you get no answer " +
				"(timeout, disconnect), call again with the same key and the same arguments: you get the first call's task, " +
				"and the robot never moves twice. Never reuse a key for a different action.",
		}
		props[mcpWaitField] = map[string]any{
			"type": "integer", "minimum": 0, "maximum": s.conf.MaxWait.Milliseconds(),
			"description": fmt.Sprintf("optional; how long to wait for the task to end before answering, in milliseconds "+
				"(at most %d). Absent or 0: answer at once with the task, to follow with get_task. While the call waits, "+
				"a host that sent a progress token gets progress notifications.", s.conf.MaxWait.Milliseconds()),
		}
		params["properties"] = props
		desc += " Pass a fresh idempotency_key so that a retry after a lost answer never moves the robot twice."
	}
	readOnly := t.Kind == KindState && !t.Writes
	title := mcpTitle(t.Name)
	return &mcp.Tool{
		Name: t.Name, Title: title, Description: desc, InputSchema: params,
		Annotations: &mcp.ToolAnnotations{
			Title:           title,
			ReadOnlyHint:    readOnly,
			IdempotentHint:  readOnly || t.Idempotent,
			DestructiveHint: &motion,
			OpenWorldHint:   new(false),
		},
	}
}

// mcpTitles are the tools' human-readable titles, for a host's UI.
var mcpTitles = map[string]string{
	ToolGetRobotState:       "Get the robot's state",
	ToolDescribeScene:       "Describe the scene",
	ToolGetTask:             "Get a task",
	ToolListNamedPoses:      "List named locations and poses",
	ToolGetSafetyStatus:     "Get the safety status",
	ToolMoveBaseTo:          "Drive the base",
	ToolMoveArmTo:           "Move the arm",
	ToolGrasp:               "Grasp an object",
	ToolRelease:             "Release the held object",
	ToolReturnToSafePose:    "Return to the safe pose",
	ToolStop:                "Stop the robot",
	ToolCancelTask:          "Cancel a task",
	ToolRequestOperatorHelp: "Ask an operator for help",
	ToolListRobots:          "List the robots",
}

// mcpTitle is a tool's title: from mcpTitles, or its name in words.
func mcpTitle(name string) string {
	if t, ok := mcpTitles[name]; ok {
		return t
	}
	return eventUpperFirst(strings.ReplaceAll(name, "_", " "))
}

// mcpRequestIDs passes the JSON-RPC id of a tools/call POSTed on an MCP
// session to the tool handler in mcpRequestIDHeader. A batch (a JSON
// array, gone from the protocol since 2025-06-18) gets no id.
func (s *Server) mcpRequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(mcpRequestIDHeader)
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" && r.Body != nil {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.conf.MaxBodyBytes))
			if err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
					http.Error(w, fmt.Sprintf("request body larger than %d bytes", s.conf.MaxBodyBytes), http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "request body unreadable", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if id, ok := toolsCallID(body); ok {
				r.Header.Set(mcpRequestIDHeader, id)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// toolsCallID returns the id of a single JSON-RPC tools/call request, as
// compact JSON (7 and "7" are different ids).
func toolsCallID(body []byte) (string, bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" || len(m.ID) == 0 || string(m.ID) == "null" {
		return "", false
	}
	var b bytes.Buffer
	if json.Compact(&b, m.ID) != nil {
		return "", false
	}
	return b.String(), true
}

// mcpRequestKey is the idempotency key of an MCP request id on a session
// (before submitOnce scopes it to the credential). A long id is hashed.
func mcpRequestKey(sessionID, id string) string {
	if len(id) > 64 {
		sum := sha256.Sum256([]byte(id))
		id = "sha256:" + hex.EncodeToString(sum[:])
	}
	return "mcp_request " + strconv.QuoteToASCII(sessionID) + " " + id
}

// mcpPrincipal is the caller of an MCP request: the route's middleware
// authenticated its HTTP request, and the SDK hands the handler that
// request's header.
func (s *Server) mcpPrincipal(ctx context.Context, extra *mcp.RequestExtra) (Principal, bool) {
	if p, ok := PrincipalFromContext(ctx); ok {
		return p, true
	}
	if extra == nil || extra.Header == nil {
		return Principal{}, false
	}
	return s.conf.Tokens.authenticate(bearer(&http.Request{Header: extra.Header}))
}

func (s *Server) mcpCall(ctx context.Context, tool string, req *mcp.CallToolRequest) *mcp.CallToolResult {
	p, ok := s.mcpPrincipal(ctx, req.Extra)
	var env Envelope
	if !ok {
		env = Envelope{Tool: tool, Error: ErrorBodyOf(permissionDenied("no valid bearer token on the MCP request", RoleAgent))}
		return mcpResult(env)
	}
	creq := CallRequest{Tool: tool, Wait: s.conf.MCPWait, viaMCP: true}
	sessionID := ""
	if req.Session != nil {
		sessionID = req.Session.ID()
		creq.SessionID = "mcp:" + sessionID
	}
	var (
		raw  json.RawMessage
		meta map[string]any
	)
	if req.Params != nil {
		raw, meta = req.Params.Arguments, req.Params.Meta
	}
	args, argErr := decodeArguments(raw)
	if argErr != nil {
		return mcpResult(s.callWithArgError(ctx, p, creq, argErr))
	}
	if t, known := s.reg.Lookup(tool); !known || !onceByKey(t) {
		// stop and cancel_task always run and state tools only read: a
		// key they carry is not needed, and never keeps them from running.
		delete(args, mcpKeyField)
	} else {
		key, keyErr := mcpKeyOf(args, meta)
		wait, waitErr := mcpWaitOf(args)
		var id string
		if req.Extra != nil && req.Extra.Header != nil {
			id = req.Extra.Header.Get(mcpRequestIDHeader)
		}
		switch {
		case keyErr != nil:
			creq.Arguments = args
			return mcpResult(s.callWithArgError(ctx, p, creq, keyErr))
		case waitErr != nil:
			creq.Arguments = args
			return mcpResult(s.callWithArgError(ctx, p, creq, waitErr))
		case key != "":
			creq.IdempotencyKey = key
		case sessionID != "" && id != "":
			creq.IdempotencyKey, creq.mcpRequestID = mcpRequestKey(sessionID, id), id
		}
		if wait >= 0 {
			creq.Wait = wait
		}
	}
	if req.Params != nil && req.Session != nil {
		if tok := req.Params.GetProgressToken(); tok != nil {
			ctx = withProgress(ctx, &progressWatch{session: req.Session, token: tok, log: s.log})
		}
	}
	creq.Arguments = args
	return mcpResult(s.Call(ctx, p, creq))
}

// mcpWaitOf takes wait_ms out of a moving action's arguments: -1 when
// absent (the call waits Conf.MCPWait), else the wait it asks for (the
// call path caps it at Conf.MaxWait). A value that is not a whole number
// of milliseconds ≥ 0 is INVALID_PARAMS, and the call does not run.
func mcpWaitOf(args map[string]any) (time.Duration, *toolerr.Error) {
	v, ok := args[mcpWaitField]
	if !ok {
		return -1, nil
	}
	delete(args, mcpWaitField)
	ms, isNum := v.(float64)
	if !isNum || ms < 0 || ms != math.Trunc(ms) || ms > math.MaxInt32 {
		return 0, fieldError(mcpWaitField, v, "a whole number of milliseconds ≥ 0 (at most the bridge's maximum wait)")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// mcpKeyOf takes the idempotency key out of a call's arguments (where the
// input schema advertises it) and its _meta (where a host may put it). A
// key that is not a string of 1 to maxIDLen characters, or two different
// keys, is INVALID_PARAMS: the call runs with no key and could move twice
// otherwise.
func mcpKeyOf(args, meta map[string]any) (string, *toolerr.Error) {
	var argKey, metaKey string
	if v, ok := args[mcpKeyField]; ok {
		delete(args, mcpKeyField)
		k, te := keyValue(mcpKeyField, v)
		if te != nil {
			return "", te
		}
		argKey = k
	}
	if v, ok := meta[mcpKeyField]; ok {
		k, te := keyValue("_meta."+mcpKeyField, v)
		if te != nil {
			return "", te
		}
		metaKey = k
	}
	if argKey != "" && metaKey != "" && argKey != metaKey {
		te := toolerr.New(toolerr.InvalidParams,
			"the call carries two different idempotency keys, %q in its arguments and %q in _meta; nothing was run", argKey, metaKey)
		te.Suggestion = "pass one idempotency_key (the same value in both places, or only one of them) and call again"
		return "", te.With("field", mcpKeyField).With("received", argKey).With("allowed", "the same key as _meta."+mcpKeyField)
	}
	if argKey != "" {
		return argKey, nil
	}
	return metaKey, nil
}

func keyValue(field string, v any) (string, *toolerr.Error) {
	k, ok := v.(string)
	allowed := fmt.Sprintf("a string of 1 to %d characters", maxIDLen)
	switch {
	case !ok:
		return "", fieldError(field, v, allowed)
	case k == "":
		return "", fieldError(field, k, allowed)
	case len(k) > maxIDLen:
		return "", fieldError(field, k[:32]+"…", allowed)
	}
	return k, nil
}

func mcpResult(env Envelope) *mcp.CallToolResult {
	b, err := json.Marshal(env)
	if err != nil {
		env = Envelope{Tool: env.Tool, Robot: env.Robot, Error: ErrorBodyOf(toolerr.New(toolerr.Internal, "result could not be encoded"))}
		b, _ = json.Marshal(env)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: env, IsError: !env.OK}
}
