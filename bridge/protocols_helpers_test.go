package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
)

// The agent's four front ends as a client outside the bridge speaks them:
// HTTP JSON (POST /v1/tools/{name}/call), gRPC (connect-go with
// connect.WithGRPC over h2c), Connect (connect-go's own protocol over
// HTTP/1.1) and MCP (the official Go SDK's client over streamable HTTP at
// /mcp). Each answer is turned into the envelope as JSON with the HTTP
// API's field names, so scenarios and benchmarks treat them alike.

// agentProtocol names one front end an agent can use.
type agentProtocol string

const (
	overHTTP    agentProtocol = "http"
	overGRPC    agentProtocol = "grpc"
	overConnect agentProtocol = "connect"
	overMCP     agentProtocol = "mcp"
)

// agentProtocols are every front end, HTTP (the reference) first.
var agentProtocols = []agentProtocol{overHTTP, overGRPC, overConnect, overMCP}

// toolCallSpec is one tool call, whatever protocol carries it.
type toolCallSpec struct {
	Tool string
	Args map[string]any
	// Session is the session_id over HTTP, gRPC and Connect. MCP has no
	// such field: there the MCP session is the session (the bridge scopes
	// the loop guard and the rate limit by it).
	Session string
	// Key is the idempotency key: the body's idempotency_key over HTTP,
	// the request's over gRPC and Connect, the idempotency_key argument a
	// moving action's MCP schema advertises.
	Key string
	// WaitMS is how long an action call waits for its task: the body's
	// wait_ms, the request's, the wait_ms argument over MCP.
	WaitMS int
}

// protoAgent is one agent client of one bridge over one protocol.
type protoAgent struct {
	proto agentProtocol
	base  string
	token string
	httpc *http.Client
	rpc   robotbridgev1connect.ToolServiceClient
	mcp   *mcp.ClientSession
}

// h2cTransport speaks unencrypted HTTP/2 with prior knowledge, as a gRPC
// client does to a plaintext server.
func h2cTransport() *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

// bearerTransport adds the bearer token to every request, the way an MCP
// host configured with a token sends it.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// dialMCP opens an MCP session on the bridge at base with the official Go
// SDK client, closed when tb ends.
func dialMCP(tb testing.TB, base, token string, tr *http.Transport) *mcp.ClientSession {
	tb.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "scenario-agent", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearerTransport{token, tr}},
	}, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// newProtoAgent returns an agent client of the bridge at base (an
// "http://host:port" URL) over p, with its own connections.
func newProtoAgent(tb testing.TB, base, token string, p agentProtocol) *protoAgent {
	tb.Helper()
	a := &protoAgent{proto: p, base: base, token: token}
	var tr *http.Transport
	switch p {
	case overHTTP:
		tr = &http.Transport{}
		a.httpc = &http.Client{Transport: tr, Timeout: 90 * time.Second}
	case overGRPC:
		tr = h2cTransport()
		a.rpc = robotbridgev1connect.NewToolServiceClient(&http.Client{Transport: tr}, base, connect.WithGRPC())
	case overConnect:
		tr = &http.Transport{}
		a.rpc = robotbridgev1connect.NewToolServiceClient(&http.Client{Transport: tr}, base)
	case overMCP:
		tr = &http.Transport{}
		a.mcp = dialMCP(tb, base, token, tr)
	default:
		tb.Fatalf("unknown protocol %q", p)
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return a
}

// call makes one tool call and returns its envelope as a JSON object with
// the HTTP API's field names. It never calls require, so a goroutine may
// use it: an error is a transport failure, or an answer that is not an
// envelope (an HTTP status other than 200, an MCP protocol error, an MCP
// result whose text and structured content disagree).
func (a *protoAgent) call(ctx context.Context, c toolCallSpec) (map[string]any, error) {
	switch a.proto {
	case overHTTP:
		return a.callHTTP(ctx, c)
	case overGRPC, overConnect:
		return a.callRPC(ctx, c)
	case overMCP:
		return a.callMCP(ctx, c)
	}
	return nil, fmt.Errorf("unknown protocol %q", a.proto)
}

// mustCall is call for the test's own goroutine.
func (a *protoAgent) mustCall(t *testing.T, c toolCallSpec) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, err := a.call(ctx, c)
	require.NoError(t, err, "%s call of %s", a.proto, c.Tool)
	return env
}

func (a *protoAgent) callHTTP(ctx context.Context, c toolCallSpec) (map[string]any, error) {
	body := map[string]any{"arguments": orEmpty(c.Args)}
	if c.Session != "" {
		body["session_id"] = c.Session
	}
	if c.Key != "" {
		body["idempotency_key"] = c.Key
	}
	if c.WaitMS > 0 {
		body["wait_ms"] = c.WaitMS
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/v1/tools/"+c.Tool+"/call", bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /v1/tools/%s/call: HTTP %d: %s", c.Tool, resp.StatusCode, out)
	}
	return decodeObject(out)
}

func (a *protoAgent) callRPC(ctx context.Context, c toolCallSpec) (map[string]any, error) {
	msg := &robotbridgev1.CallToolRequest{Tool: c.Tool, SessionId: c.Session, IdempotencyKey: c.Key, WaitMs: uint32(max(c.WaitMS, 0))}
	if len(c.Args) > 0 {
		s, err := structpb.NewStruct(c.Args)
		if err != nil {
			return nil, err
		}
		msg.Arguments = s
	}
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Bearer "+a.token)
	resp, err := a.rpc.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s CallTool(%s): %w", a.proto, c.Tool, err)
	}
	env := resp.Msg.GetEnvelope()
	if env == nil {
		return nil, fmt.Errorf("%s CallTool(%s): the response has no envelope", a.proto, c.Tool)
	}
	// The proto3 JSON form with the .proto's field names is what grpcurl,
	// buf curl and a Connect JSON client see: it must read like HTTP's.
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(env)
	if err != nil {
		return nil, err
	}
	return decodeObject(raw)
}

func (a *protoAgent) callMCP(ctx context.Context, c toolCallSpec) (map[string]any, error) {
	args := maps.Clone(orEmpty(c.Args))
	if c.Key != "" {
		args["idempotency_key"] = c.Key
	}
	if c.WaitMS > 0 {
		args["wait_ms"] = c.WaitMS
	}
	res, err := a.mcp.CallTool(ctx, &mcp.CallToolParams{Name: c.Tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("MCP tools/call %s: %w", c.Tool, err)
	}
	if len(res.Content) != 1 {
		return nil, fmt.Errorf("MCP tools/call %s: %d content items, want the envelope as one text", c.Tool, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return nil, fmt.Errorf("MCP tools/call %s: content is %T, want text", c.Tool, res.Content[0])
	}
	env, err := decodeObject([]byte(text.Text))
	if err != nil {
		return nil, err
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	senv, err := decodeObject(structured)
	if err != nil {
		return nil, fmt.Errorf("MCP tools/call %s: structured content: %w", c.Tool, err)
	}
	if !reflect.DeepEqual(env, senv) {
		return nil, fmt.Errorf("MCP tools/call %s: the structured content %s is not the text's envelope %s", c.Tool, structured, text.Text)
	}
	if okv, _ := env["ok"].(bool); res.IsError == okv {
		return nil, fmt.Errorf("MCP tools/call %s: isError %v with ok %v", c.Tool, res.IsError, env["ok"])
	}
	return env, nil
}

// waitTask follows a task through the same protocol, with get_task's long
// poll, until it is terminal, and returns that get_task envelope.
func (a *protoAgent) waitTask(t *testing.T, id, session string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		env := a.mustCall(t, toolCallSpec{Tool: "get_task", Args: map[string]any{"task_id": id, "wait_ms": 10000}, Session: session})
		require.Equal(t, true, env["ok"], "get_task over %s: %v", a.proto, env)
		if isTerminal(fmt.Sprint(taskData(env)["status"])) {
			return env
		}
		require.True(t, time.Now().Before(deadline), "task %s not terminal after 40 s: %v", id, env)
	}
}

// asyncCall is the answer of a call made in a goroutine.
type asyncCall struct {
	env map[string]any
	err error
}

// callAsync makes a call in a goroutine, for a call that waits while the
// operator decides.
func (a *protoAgent) callAsync(c toolCallSpec) <-chan asyncCall {
	done := make(chan asyncCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		env, err := a.call(ctx, c)
		done <- asyncCall{env, err}
	}()
	return done
}

// await returns what a call made with callAsync answered.
func await(t *testing.T, done <-chan asyncCall) map[string]any {
	t.Helper()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.env
	case <-time.After(70 * time.Second):
		t.Fatal("the call never answered")
		return nil
	}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func decodeObject(raw []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w: %s", err, raw)
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object: %s", raw)
	}
	return m, nil
}

// --- comparing envelopes across protocols ---------------------------------

// envelopeView is an envelope with only the fields that must differ
// between two runs of one scenario normalised: ids (tasks, approvals,
// grants) and numbers (positions the simulator reaches a millimetre apart,
// timestamps, durations) in texts; durations in *_ms fields reduced to
// whether they are positive. Everything else is kept as it is, so two
// protocols' views are equal exactly when their envelopes say the same.
type envelopeView struct {
	// OK is the envelope's ok as encoded: true, false, or nil when the
	// field is absent.
	OK   any
	Tool any
	// Text is the text's shape, "" when absent.
	Text string
	// Robot is the robot summary's shape.
	Robot string
	Task  *taskRefView
	Error *errorView
	// DataKeys are the key paths of data, sorted; nil when there is no data.
	DataKeys []string
}

type taskRefView struct {
	HasID  bool
	Status any
}

type errorView struct {
	Type      any
	Retryable any
	// RetryAfter is "positive", "zero" or "absent".
	RetryAfter    string
	Message       string
	HasSuggestion bool
	// Details are the error's details with the same normalisation.
	Details any
}

var (
	idShape     = regexp.MustCompile(`\b(task-[0-9a-f]{6,}|apr_[0-9A-Za-z]+|grt_[0-9A-Za-z]+)`)
	numberShape = regexp.MustCompile(`-?\d+(\.\d+)?`)
)

// shape is a text with its ids and numbers normalised.
func shape(v any) string {
	s, _ := v.(string)
	return numberShape.ReplaceAllString(idShape.ReplaceAllString(s, "<id>"), "#")
}

// msShape says whether a duration in milliseconds is positive; proto3 JSON
// writes an int64 as a string, so both spellings are read.
func msShape(v any) string {
	var n float64
	switch x := v.(type) {
	case nil:
		return "absent"
	case float64:
		n = x
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return "not a number: " + x
		}
		n = f
	default:
		return fmt.Sprintf("not a number: %T", v)
	}
	switch {
	case n > 0:
		return "positive"
	case n == 0:
		return "zero"
	}
	return "negative"
}

// normalised returns v with ids and numbers in strings normalised and
// every *_ms value reduced to msShape.
func normalised(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if len(k) > 3 && k[len(k)-3:] == "_ms" {
				out[k] = msShape(e)
				continue
			}
			out[k] = normalised(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalised(e)
		}
		return out
	case string:
		return shape(x)
	case float64:
		return "#"
	}
	return v
}

// keyPaths lists the key paths of a JSON value ("base.x", "joints[].name").
func keyPaths(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			keyPaths(e, p, out)
		}
	case []any:
		for _, e := range x {
			keyPaths(e, prefix+"[]", out)
		}
	}
}

func viewOf(env map[string]any) envelopeView {
	v := envelopeView{OK: env["ok"], Tool: env["tool"], Text: shape(env["text"]), Robot: shape(env["robot"])}
	if task, ok := env["task"].(map[string]any); ok {
		id, _ := task["id"].(string)
		v.Task = &taskRefView{HasID: id != "", Status: task["status"]}
	}
	if e, ok := env["error"].(map[string]any); ok {
		sugg, _ := e["suggestion"].(string)
		v.Error = &errorView{
			Type: e["type"], Retryable: e["retryable"], RetryAfter: msShape(e["retry_after_ms"]),
			Message: shape(e["message"]), HasSuggestion: sugg != "", Details: normalised(e["details"]),
		}
	}
	if d, ok := env["data"]; ok && d != nil {
		paths := map[string]bool{}
		keyPaths(d, "", paths)
		v.DataKeys = slices.Sorted(maps.Keys(paths))
		if v.DataKeys == nil {
			v.DataKeys = []string{}
		}
	}
	return v
}

// requireSameEnvelopes checks that every protocol got, step by step, the
// envelopes HTTP got, field by field after normalising only what must
// differ between two runs (see envelopeView).
func requireSameEnvelopes(t *testing.T, got map[agentProtocol][]map[string]any) {
	t.Helper()
	ref, ok := got[overHTTP]
	require.True(t, ok, "the HTTP run of the scenario failed: nothing to compare with")
	for _, p := range agentProtocols[1:] {
		envs, ok := got[p]
		if !ok {
			t.Errorf("%s: its run of the scenario failed (see its subtest), so its envelopes are not compared", p)
			continue
		}
		require.Len(t, envs, len(ref), "%s made another number of calls than HTTP", p)
		for i := range ref {
			require.Equal(t, viewOf(ref[i]), viewOf(envs[i]),
				"call %d of the scenario: %s's envelope differs from HTTP's\nHTTP: %v\n%s: %v", i+1, p, ref[i], p, envs[i])
		}
	}
}

// --- the operator's side, over the operator HTTP API -----------------------

// firstPendingApproval waits for an approval request to be pending and
// returns it (id and task_id), for a call still waiting for its answer.
func firstPendingApproval(h *harness) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list := pendingApprovals(h.t, h)
		if len(list) > 0 {
			return list[0].(map[string]any)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatal("no approval request became pending")
	return nil
}

// simLogMotions counts the motion commands the simulator acted on, read
// from its command log (GET /v1/sim/log) with the operator token; a
// repeated command id the simulator acknowledged without acting again is
// not a motion.
func simLogMotions(h *harness) int {
	h.t.Helper()
	code, body := h.do(http.MethodGet, "/v1/sim/log", h.operator, nil)
	require.Equal(h.t, http.StatusOK, code, "%v", body)
	entries, ok := body["entries"].([]any)
	require.True(h.t, ok, "%v", body)
	n := 0
	for _, e := range entries {
		m := e.(map[string]any)
		if m["op"] == "command" && m["accepted"] == true && m["duplicate"] != true {
			n++
		}
	}
	return n
}

// errorOf returns an envelope's error, failing when it has none.
func errorOf(t *testing.T, env map[string]any) map[string]any {
	t.Helper()
	e, ok := env["error"].(map[string]any)
	require.True(t, ok, "the envelope has no error: %v", env)
	return e
}

// requireEnvelopeError checks a failed envelope: ok false, the error's
// type and retry rule, a non-zero retry_after_ms exactly when retryable,
// a message, a suggestion, and the robot's state in words.
func requireEnvelopeError(t *testing.T, env map[string]any, typ string, retryable bool) map[string]any {
	t.Helper()
	require.Equal(t, false, env["ok"], "envelope: %v", env)
	e := errorOf(t, env)
	require.Equal(t, typ, e["type"], "envelope: %v", env)
	require.Equal(t, retryable, e["retryable"], "retryable of %s: %v", typ, env)
	want := "zero"
	if retryable {
		want = "positive"
	}
	require.Equal(t, want, msShape(e["retry_after_ms"]), "retry_after_ms of %s: %v", typ, env)
	require.NotEmpty(t, e["message"], "message of %s", typ)
	require.NotEmpty(t, e["suggestion"], "suggestion of %s", typ)
	require.NotEmpty(t, env["robot"], "every failure says where the robot is")
	return e
}

// requireTaskStatus checks an envelope's task: an id, and its status.
func requireTaskStatus(t *testing.T, env map[string]any, status string) string {
	t.Helper()
	task, ok := env["task"].(map[string]any)
	require.True(t, ok, "the envelope has no task: %v", env)
	require.Equal(t, status, task["status"], "envelope: %v", env)
	id, _ := task["id"].(string)
	require.NotEmpty(t, id, "envelope: %v", env)
	return id
}

// requireRobotAtRest checks the robot summary of a robot at rest: where it
// is, and which task holds it — heldBy ("task-… (move_arm_to)"), or no
// task at all when heldBy is "". It checks facts, not wording, which the
// texts' own tests proofread.
func requireRobotAtRest(t *testing.T, env map[string]any, heldBy string) {
	t.Helper()
	s, _ := env["robot"].(string)
	require.Regexp(t, `^stopped at \(-?\d+\.\d\d, -?\d+\.\d\d\) facing -?\d+°, `, s, "envelope: %v", env)
	if heldBy == "" {
		require.NotContains(t, s, "task-", "no task holds the robot: %q", s)
		return
	}
	require.Contains(t, s, ", task "+heldBy, "robot summary %q", s)
}
