package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
)

// answer is what the bridge said to one request, whatever the protocol,
// reduced to what an expectation checks.
type answer struct {
	// via names the protocol, for messages.
	via string
	// status is the HTTP status (0 for an RPC).
	status int
	// body is the answer's JSON: the envelope, the HTTP body or the RPC
	// response message in proto3 JSON (proto field names).
	body map[string]any
	// code is the RPC error's code ("" for none or for HTTP).
	code string
	// ok says the request succeeded: the envelope's ok, else HTTP 2xx or
	// an RPC without error.
	ok bool
	// errType is the refusal's type ("" when ok).
	errType string
	// text is the envelope's text, or the whole body otherwise.
	text string
	// err is a failure to get any answer (connection refused, timeout):
	// the bridge did not answer at all.
	err     error
	latency time.Duration
	// setCookies are the cookies an HTTP answer set.
	setCookies []*http.Cookie
}

// crashed says whether the answer shows the bridge broken rather than
// refusing: no answer, a 5xx other than 503 (UNAVAILABLE is an answer),
// or an INTERNAL error.
func (a answer) crashed() string {
	switch {
	case a.err != nil:
		return "no answer: " + a.err.Error()
	case a.status >= 500 && a.status != http.StatusServiceUnavailable && a.status != http.StatusGatewayTimeout:
		return fmt.Sprintf("HTTP %d: %s", a.status, trim(a.text, 300))
	case a.errType == "INTERNAL":
		return "INTERNAL: " + trim(a.text, 300)
	case a.code == connect.CodeInternal.String() || a.code == connect.CodeUnknown.String():
		return "RPC " + a.code + ": " + trim(a.text, 300)
	}
	return ""
}

func (a answer) String() string {
	if a.err != nil {
		return a.via + ": " + a.err.Error()
	}
	s := a.via
	if a.status != 0 {
		s += fmt.Sprintf(" HTTP %d", a.status)
	}
	if a.code != "" {
		s += " rpc " + a.code
	}
	if a.ok {
		s += " ok"
	} else {
		s += " refused " + a.errType
	}
	if st := lookup(a.body, "task.status"); st != nil {
		s += fmt.Sprintf(" task %v", st)
	}
	return s + ": " + trim(a.text, 240)
}

// clients speaks every protocol of one target.
type clients struct {
	base string
	hc   *http.Client // HTTP/1.1: JSON API, console, Connect
	h2c  *http.Client // HTTP/2 without TLS: gRPC
}

func newClients(base string) *clients {
	h1 := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	h2 := &http.Transport{Protocols: new(http.Protocols), IdleConnTimeout: 30 * time.Second}
	h2.Protocols.SetUnencryptedHTTP2(true)
	return &clients{
		base: base,
		hc:   &http.Client{Transport: h1, Timeout: 30 * time.Second},
		h2c:  &http.Client{Transport: h2, Timeout: 30 * time.Second},
	}
}

func (c *clients) close() {
	c.hc.CloseIdleConnections()
	c.h2c.CloseIdleConnections()
}

// http sends one request; body nil sends none.
func (c *clients) http(ctx context.Context, method, path, token string, headers map[string]string, body []byte, cookies string) answer {
	start := time.Now()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{via: "http", err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if cookies != "" {
		req.Header.Set("Cookie", cookies)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{via: "http", err: err, latency: time.Since(start)}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	a := answer{via: "http", status: resp.StatusCode, latency: time.Since(start), text: string(raw)}
	if err != nil {
		a.err = err
		return a
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		a.body = m
	}
	a.ok = resp.StatusCode < 400
	if v, has := m["ok"].(bool); has {
		a.ok = a.ok && v
	}
	if !a.ok {
		a.errType, _ = lookup(m, "error.type").(string)
		if a.errType == "" {
			a.errType = httpStatusType(resp.StatusCode)
		}
	}
	if t, is := m["text"].(string); is {
		a.text = t
	}
	a.text = withErrorMessage(a.text, m)
	a.setCookies = resp.Cookies()
	return a
}

// withErrorMessage adds the refusal's message and suggestion to the
// text an expectation reads, when they are not in it already.
func withErrorMessage(text string, m map[string]any) string {
	for _, k := range []string{"error.message", "error.suggestion"} {
		if msg, ok := lookup(m, k).(string); ok && msg != "" && !strings.Contains(text, msg) {
			text += " " + msg
		}
	}
	return text
}

// httpStatusType names a refusal that carried no error body by its
// status.
func httpStatusType(code int) string {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusMethodNotAllowed, http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge:
		return "INVALID_PARAMS"
	case http.StatusConflict:
		return "CONFLICT"
	case http.StatusTooManyRequests:
		return "RATE_LIMITED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return fmt.Sprintf("HTTP_%d", code)
}

// rpcFunc calls one unary RPC with its request in proto3 JSON.
type rpcFunc func(ctx context.Context, hc *http.Client, base, token string, grpc bool, body []byte) (proto.Message, error)

func unary[Req, Res any, PReq interface {
	*Req
	proto.Message
}, PRes interface {
	*Res
	proto.Message
}](procedure string) rpcFunc {
	return func(ctx context.Context, hc *http.Client, base, token string, grpc bool, body []byte) (proto.Message, error) {
		var opts []connect.ClientOption
		if grpc {
			opts = append(opts, connect.WithGRPC())
		}
		cl := connect.NewClient[Req, Res](hc, base+procedure, opts...)
		in := PReq(new(Req))
		if len(body) > 0 {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(body, in); err != nil {
				return nil, fmt.Errorf("the case's request body is not a valid %T: %w", in, err)
			}
		}
		req := connect.NewRequest((*Req)(in))
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		res, err := cl.CallUnary(ctx, req)
		if err != nil {
			return nil, err
		}
		return PRes(res.Msg), nil
	}
}

// rpcs are the RPCs a case may call, by "Service/Method".
var rpcs = map[string]rpcFunc{
	"ToolService/ListTools":  unary[robotbridgev1.ListToolsRequest, robotbridgev1.ListToolsResponse](robotbridgev1connect.ToolServiceListToolsProcedure),
	"ToolService/CallTool":   unary[robotbridgev1.CallToolRequest, robotbridgev1.CallToolResponse](robotbridgev1connect.ToolServiceCallToolProcedure),
	"ToolService/GetTask":    unary[robotbridgev1.GetTaskRequest, robotbridgev1.GetTaskResponse](robotbridgev1connect.ToolServiceGetTaskProcedure),
	"ToolService/CancelTask": unary[robotbridgev1.CancelTaskRequest, robotbridgev1.CancelTaskResponse](robotbridgev1connect.ToolServiceCancelTaskProcedure),

	"OperatorService/ListApprovals": unary[robotbridgev1.ListApprovalsRequest, robotbridgev1.ListApprovalsResponse](robotbridgev1connect.OperatorServiceListApprovalsProcedure),
	"OperatorService/Decide":        unary[robotbridgev1.DecideRequest, robotbridgev1.DecideResponse](robotbridgev1connect.OperatorServiceDecideProcedure),
	"OperatorService/ListGrants":    unary[robotbridgev1.ListGrantsRequest, robotbridgev1.ListGrantsResponse](robotbridgev1connect.OperatorServiceListGrantsProcedure),
	"OperatorService/CreateGrant":   unary[robotbridgev1.CreateGrantRequest, robotbridgev1.CreateGrantResponse](robotbridgev1connect.OperatorServiceCreateGrantProcedure),
	"OperatorService/RevokeGrant":   unary[robotbridgev1.RevokeGrantRequest, robotbridgev1.RevokeGrantResponse](robotbridgev1connect.OperatorServiceRevokeGrantProcedure),
	"OperatorService/EStop":         unary[robotbridgev1.EStopRequest, robotbridgev1.EStopResponse](robotbridgev1connect.OperatorServiceEStopProcedure),
	"OperatorService/ResetEStop":    unary[robotbridgev1.ResetEStopRequest, robotbridgev1.ResetEStopResponse](robotbridgev1connect.OperatorServiceResetEStopProcedure),
	"OperatorService/ClearFault":    unary[robotbridgev1.ClearFaultRequest, robotbridgev1.ClearFaultResponse](robotbridgev1connect.OperatorServiceClearFaultProcedure),
	"OperatorService/PauseTask":     unary[robotbridgev1.PauseTaskRequest, robotbridgev1.PauseTaskResponse](robotbridgev1connect.OperatorServicePauseTaskProcedure),
	"OperatorService/ResumeTask":    unary[robotbridgev1.ResumeTaskRequest, robotbridgev1.ResumeTaskResponse](robotbridgev1connect.OperatorServiceResumeTaskProcedure),
	"OperatorService/AbortTask":     unary[robotbridgev1.AbortTaskRequest, robotbridgev1.AbortTaskResponse](robotbridgev1connect.OperatorServiceAbortTaskProcedure),
}

// rpc calls method over gRPC (grpc true) or Connect.
func (c *clients) rpc(ctx context.Context, method, token string, grpc bool, body []byte) answer {
	via := "connect"
	hc := c.hc
	if grpc {
		via, hc = "grpc", c.h2c
	}
	f, ok := rpcs[method]
	if !ok {
		return answer{via: via, err: fmt.Errorf("the corpus names RPC %q, which the runner does not know", method)}
	}
	start := time.Now()
	msg, err := f(ctx, hc, c.base, token, grpc, body)
	a := answer{via: via, latency: time.Since(start)}
	if err != nil {
		var ce *connect.Error
		if !errors.As(err, &ce) || strings.HasPrefix(err.Error(), "the case's request") {
			a.err = err
			return a
		}
		a.code = ce.Code().String()
		a.text = ce.Message()
		a.errType = rpcErrorType(ce)
		if ce.Code() == connect.CodeUnavailable && errors.Is(err, context.DeadlineExceeded) {
			a.err = err
		}
		return a
	}
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		a.err = err
		return a
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	a.ok, a.text = true, string(raw)
	// A tool call's answer is its envelope.
	if env, is := m["envelope"].(map[string]any); is {
		m = env
		a.ok, _ = m["ok"].(bool)
		a.text, _ = m["text"].(string)
		a.text = withErrorMessage(a.text, m)
		if !a.ok {
			a.errType = strings.TrimPrefix(fmt.Sprint(lookup(m, "error.type")), "ERROR_TYPE_")
		}
	}
	a.body = m
	return a
}

// rpcErrorType is the robotbridge.v1.Error detail's type, else the
// type the code stands for.
func rpcErrorType(ce *connect.Error) string {
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if e, is := v.(*robotbridgev1.Error); is {
			return strings.TrimPrefix(e.GetType().String(), "ERROR_TYPE_")
		}
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return "PERMISSION_DENIED"
	case connect.CodeInvalidArgument:
		return "INVALID_PARAMS"
	case connect.CodeNotFound:
		return "NOT_FOUND"
	case connect.CodeFailedPrecondition, connect.CodeAlreadyExists, connect.CodeAborted:
		return "CONFLICT"
	case connect.CodeResourceExhausted:
		return "RATE_LIMITED"
	case connect.CodeUnavailable:
		return "UNAVAILABLE"
	case connect.CodeDeadlineExceeded:
		return "TIMEOUT"
	case connect.CodeUnimplemented:
		return "UNKNOWN_TOOL"
	}
	return "INTERNAL"
}

// mcpSession is one MCP client session (the official Go SDK) with a
// bearer token.
type mcpSession struct {
	cs *mcp.ClientSession
}

type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func (c *clients) mcpConnect(ctx context.Context, token string) (*mcpSession, error) {
	hc := &http.Client{Transport: bearerTransport{token: token, next: c.hc.Transport}, Timeout: 30 * time.Second}
	cl := mcp.NewClient(&mcp.Implementation{Name: "conformance-agent", Version: "0"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.base + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	return &mcpSession{cs: cs}, nil
}

func (s *mcpSession) close() { _ = s.cs.Close() }

// call calls a tool; its answer is the envelope in the structured
// content.
func (s *mcpSession) call(ctx context.Context, tool string, args map[string]any) answer {
	start := time.Now()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	a := answer{via: "mcp", latency: time.Since(start)}
	if err != nil {
		// A JSON-RPC error (an unknown tool, bad params) is the
		// protocol's refusal.
		var je interface{ Error() string }
		if errors.As(err, &je) && !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "connection") {
			a.text = err.Error()
			a.errType = mcpErrorType(err.Error())
			return a
		}
		a.err = err
		return a
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	a.body = m
	a.ok, _ = m["ok"].(bool)
	a.text, _ = m["text"].(string)
	a.text = withErrorMessage(a.text, m)
	if !a.ok {
		a.errType, _ = lookup(m, "error.type").(string)
		if m == nil {
			a.errType = "INVALID_PARAMS"
			for _, ct := range res.Content {
				if tc, is := ct.(*mcp.TextContent); is {
					a.text += tc.Text
				}
			}
		}
	}
	return a
}

func mcpErrorType(msg string) string {
	switch {
	case strings.Contains(msg, "unknown tool"), strings.Contains(msg, "not found"):
		return "UNKNOWN_TOOL"
	case strings.Contains(msg, "-32602"), strings.Contains(msg, "invalid"):
		return "INVALID_PARAMS"
	}
	return "MCP_ERROR"
}

// lookup reads a dotted path ("task.id", "approvals.0.id") of decoded
// JSON; nil when absent.
func lookup(v any, path string) any {
	if path == "" {
		return v
	}
	for p := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := 0
			if _, err := fmt.Sscanf(p, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
