package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/bridge"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

const (
	stdioAgentToken    = "agent-token-for-mcp-stdio-0123"
	stdioOperatorToken = "operator-token-for-mcp-stdio-0123"
)

// startInProcessBridge runs a bridge on the simulator on a free loopback
// port and returns it with its base URL.
func startInProcessBridge(t *testing.T) (*bridge.Bridge, string) {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join(repoRoot, "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	cfg.Sim.FalsePositiveRate = 0
	b, err := bridge.New(bridge.Conf{
		Config: cfg, Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Env: func(k string) string {
			return map[string]string{toolapi.EnvAgentToken: stdioAgentToken, toolapi.EnvOperatorToken: stdioOperatorToken}[k]
		},
	})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Stop(ctx)
	})
	base := "http://" + b.Addr()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	return b, base
}

// hostOnProxy runs mcp-stdio against endpoint and connects an MCP host
// to its stdin/stdout; done yields runMCPStdio's result.
func hostOnProxy(t *testing.T, endpoint string, opts *mcp.ClientOptions) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	hostToProxy, proxyIn := io.Pipe()
	proxyToHost, hostIn := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runMCPStdio(context.Background(), mcpStdioConf{Endpoint: endpoint, Token: stdioAgentToken, In: hostToProxy, Out: hostIn})
		_ = hostIn.Close()
		done <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop-host", Version: "0"}, opts).
		Connect(context.Background(), &mcp.IOTransport{Reader: proxyToHost, Writer: proxyIn}, nil)
	require.NoError(t, err)
	return cs, done
}

func TestMCPStdio_AHostOnStdioUsesTheBridge(t *testing.T) {
	// Given a running bridge, and a host speaking MCP over stdio to
	// mcp-stdio
	_, base := startInProcessBridge(t)
	var (
		mu       sync.Mutex
		updates  []string
		progress []*mcp.ProgressNotificationParams
	)
	host, done := hostOnProxy(t, base+"/mcp", &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			defer mu.Unlock()
			updates = append(updates, r.Params.URI)
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			p := *r.Params
			progress = append(progress, &p)
		},
	})
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{stdioAgentToken, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer func() { _ = direct.Close() }()

	// Then the host sees the bridge: its name, instructions, tools with
	// their annotations, resources
	require.Equal(t, "robot-bridge", host.InitializeResult().ServerInfo.Name)
	require.Equal(t, direct.InitializeResult().Instructions, host.InitializeResult().Instructions)
	require.Contains(t, host.InitializeResult().Instructions, "After LOOP_DETECTED")
	viaProxy, err := host.ListTools(ctx, nil)
	require.NoError(t, err)
	want, err := direct.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, jsonOf(t, want.Tools), jsonOf(t, viaProxy.Tools))
	res, err := host.ListResources(ctx, nil)
	require.NoError(t, err)
	require.Len(t, res.Resources, 2)

	// When it reads the robot, subscribes, and drives 0.4 m waiting with
	// a progress token while the operator approves
	rr, err := host.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://state"})
	require.NoError(t, err)
	var env toolapi.Envelope
	require.NoError(t, json.Unmarshal([]byte(rr.Contents[0].Text), &env))
	require.True(t, env.OK, "%+v", env.Error)
	require.NoError(t, host.Subscribe(ctx, &mcp.SubscribeParams{URI: "robot://state"}))
	approved := make(chan error, 1)
	go func() { approved <- approvePending(base, "move_base_to") }()
	call, err := host.CallTool(ctx, &mcp.CallToolParams{
		Name: "move_base_to", Arguments: map[string]any{"x": 0.4, "y": 0.0, "wait_ms": 30000},
		Meta: mcp.Meta{"progressToken": 7},
	})
	require.NoError(t, err)
	require.NoError(t, <-approved)

	// Then it succeeded, the host heard progress under its own token and
	// the robot's updates
	require.False(t, call.IsError, "%v", call.StructuredContent)
	require.NoError(t, json.Unmarshal([]byte(call.Content[0].(*mcp.TextContent).Text), &env))
	require.Equal(t, "succeeded", string(env.Task.Status))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 2 && progress[len(progress)-1].Progress == 100 && len(updates) > 0
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	for _, p := range progress {
		require.EqualValues(t, 7, p.ProgressToken)
	}
	require.Contains(t, progress[0].Message, "awaiting_approval")
	require.Contains(t, updates, "robot://state")
	mu.Unlock()

	// And a refused call is isError with the bridge's error object, an
	// unknown task resource is not found
	call, err = host.CallTool(ctx, &mcp.CallToolParams{Name: "move_base_to", Arguments: map[string]any{"x": 4.8, "y": 0.0}})
	require.NoError(t, err)
	require.True(t, call.IsError)
	require.NoError(t, json.Unmarshal([]byte(call.Content[0].(*mcp.TextContent).Text), &env))
	require.Equal(t, "SAFETY_VIOLATION", string(env.Error.Type))
	_, err = host.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://tasks/none"})
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr, "%v", err)
	require.EqualValues(t, jsonrpc.CodeInvalidParams, rpcErr.Code)

	// When the host closes stdin, mcp-stdio ends cleanly
	require.NoError(t, host.Close())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("mcp-stdio did not end when the host closed its side")
	}
}

func TestMCPStdio_NoBridgeNoSession(t *testing.T) {
	// Given no bridge at the URL (a port nothing listens on)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	// When mcp-stdio starts, it fails at once and says why
	err = runMCPStdio(context.Background(), mcpStdioConf{
		Endpoint: base + "/mcp", Token: stdioAgentToken,
		In: io.NopCloser(strings.NewReader("")), Out: nopWriteCloser{io.Discard},
	})
	require.ErrorContains(t, err, "cannot open an MCP session with the bridge at "+base+"/mcp")
}

func TestMCPStdio_Arguments(t *testing.T) {
	// --help names the arguments
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"mcp-stdio", "--help"}, &out, &errOut))
	for _, s := range []string{"usage: robot-bridge mcp-stdio [--url URL] [--token-file FILE]", "-url URL", "-token-file FILE", "tokens.json"} {
		require.Contains(t, out.String(), s)
	}
	out.Reset()
	require.Equal(t, 0, run([]string{"--help"}, &out, &errOut))
	require.Contains(t, out.String(), "mcp-stdio")
	require.Equal(t, 2, run([]string{"mcp-stdio", "extra"}, &out, &errOut))
	require.Equal(t, 2, run([]string{"mcp-stdio", "--url", "ftp://x"}, &out, &errOut))

	// The endpoint is the bridge's /mcp
	for in, want := range map[string]string{
		"http://127.0.0.1:8080": "http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/": "http://127.0.0.1:8080/mcp",
		"https://robot.local/mcp": "https://robot.local/mcp", "http://h:1/bridge/": "http://h:1/bridge/mcp",
	} {
		got, err := mcpEndpoint(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://h/", "http://", "http://h/?x=1"} {
		_, err := mcpEndpoint(bad)
		require.Error(t, err, bad)
	}

	// The token comes from tokens.json's agent key, a bare token file or
	// the environment; never from a file others can read
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == toolapi.EnvAgentToken {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		name, file, env, want, err string
	}{
		{name: "tokens.json", file: write("tokens.json", `{"agent": "rba_1234567890abcdef", "operator": "rbo_x"}`, 0o600), want: "rba_1234567890abcdef"},
		{name: "bare token", file: write("agent.token", "rba_bare_token_123456\n", 0o600), want: "rba_bare_token_123456"},
		{name: "environment", env: " rba_from_env_1234567 ", want: "rba_from_env_1234567"},
		{name: "nothing", err: "no agent token: pass --token-file"},
		{name: "readable by others", file: write("open.json", `{"agent": "rba_1234567890abcdef"}`, 0o644), err: "must be readable by its owner only"},
		{name: "no agent key", file: write("op.json", `{"operator": "rbo_1234567890abcdef"}`, 0o600), err: `has no "agent" token`},
		{name: "two words", file: write("two.txt", "a b", 0o600), err: "must hold one token"},
		{name: "missing file", file: filepath.Join(dir, "absent"), err: "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := toolapi.ReadAgentToken(c.file, env(c.env))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// approvePending approves the pending approval of tool as the operator,
// waiting for it to be filed.
func approvePending(base, tool string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/approvals?status=pending", nil)
		req.Header.Set("Authorization", "Bearer "+stdioOperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var body struct {
			Approvals []struct {
				ID   string `json:"id"`
				Tool string `json:"tool"`
			} `json:"approvals"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		for _, a := range body.Approvals {
			if a.Tool == tool {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/approvals/"+a.ID+"/approve", strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+stdioOperatorToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return errors.New("approve: " + resp.Status)
				}
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("no pending approval for " + tool)
}
