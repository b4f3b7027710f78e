package grpcapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Tokens of the tests (toolapi wants at least 16 characters).
const (
	agentToken    = "agent-token-for-grpcapi-tests"
	operatorToken = "operator-token-for-grpcapi-tests"
)

var testTokens = toolapi.Tokens{Agent: agentToken, Operator: operatorToken}

// testRegistry is the default robot's tool registry.
func testRegistry(t *testing.T) *toolapi.Registry {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	reg, err := toolapi.NewRegistry(cfg)
	require.NoError(t, err)
	return reg
}

// recordedCall is one call the fake tool API received.
type recordedCall struct {
	P   toolapi.Principal
	Req toolapi.CallRequest
}

// fakeTools is a hand-written Tools: CallFn answers (nil: an ok envelope
// naming the tool), and every call is recorded.
type fakeTools struct {
	reg    *toolapi.Registry
	CallFn func(ctx context.Context, p toolapi.Principal, req toolapi.CallRequest) toolapi.Envelope

	mu    sync.Mutex
	calls []recordedCall
}

var _ Tools = (*fakeTools)(nil)

func (f *fakeTools) Call(ctx context.Context, p toolapi.Principal, req toolapi.CallRequest) toolapi.Envelope {
	f.mu.Lock()
	f.calls = append(f.calls, recordedCall{P: p, Req: req})
	f.mu.Unlock()
	if f.CallFn != nil {
		return f.CallFn(ctx, p, req)
	}
	return toolapi.Envelope{OK: true, Tool: req.Tool, Robot: "idle", Data: map[string]any{"echo": req.Arguments}}
}

func (f *fakeTools) Registry() *toolapi.Registry { return f.reg }

func (f *fakeTools) recorded() []recordedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedCall(nil), f.calls...)
}

// fakeTasks is a hand-written TaskReader: GetFn answers (nil: NOT_FOUND).
type fakeTasks struct {
	GetFn func(id string) (actions.TaskView, error)
}

var _ TaskReader = (*fakeTasks)(nil)

func (f *fakeTasks) Get(id string) (actions.TaskView, error) {
	if f.GetFn != nil {
		return f.GetFn(id)
	}
	return actions.TaskView{}, toolerr.New(toolerr.NotFound, "no task %q", id)
}

// authFunc adapts a function to Authenticator.
type authFunc func(h http.Header) (toolapi.Principal, error)

func (f authFunc) Authenticate(h http.Header) (toolapi.Principal, error) { return f(h) }

// testServer is a Service on a loopback httptest server speaking HTTP/1.1
// and h2c, with a client per protocol.
type testServer struct {
	tools *fakeTools
	tasks *fakeTasks
	bus   *events.Bus
	srv   *httptest.Server
	url   string
	h2c   *http.Client
	h1    *http.Client
}

// wrap, when set, wraps the service's handler (to act as the HTTP
// middleware that authenticates before it).
func startService(t *testing.T, edit func(*Conf), wrap func(http.Handler) http.Handler) *testServer {
	t.Helper()
	ft := &fakeTools{reg: testRegistry(t)}
	tasks, bus := &fakeTasks{}, events.New(16)
	conf := Conf{Tools: ft, Auth: testTokens, Tasks: tasks, Events: bus, Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&conf)
	}
	svc, err := New(conf)
	require.NoError(t, err)
	path, h := svc.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv, h2c, h1 := serveH2C(t, mux)
	return &testServer{tools: ft, tasks: tasks, bus: bus, srv: srv, url: srv.URL, h2c: h2c, h1: h1}
}

// serveH2C serves h on a loopback httptest server speaking HTTP/1.1 and
// h2c, and returns a client for each.
func serveH2C(t *testing.T, h http.Handler) (*httptest.Server, *http.Client, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	tr1 := &http.Transport{}
	t.Cleanup(tr1.CloseIdleConnections)
	return srv, &http.Client{Transport: tr}, &http.Client{Transport: tr1}
}

// protocols are the wire protocols every behaviour is checked over.
var protocols = []string{"grpc", "connect"}

func (s *testServer) client(protocol string) robotbridgev1connect.ToolServiceClient {
	if protocol == "grpc" {
		return robotbridgev1connect.NewToolServiceClient(s.h2c, s.url, connect.WithGRPC())
	}
	return robotbridgev1connect.NewToolServiceClient(s.h1, s.url)
}

// request wraps msg with a bearer token ("" for none).
func request[T any](msg *T, token string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if token != "" {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	return r
}
