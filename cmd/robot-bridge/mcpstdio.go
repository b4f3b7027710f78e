package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// mcpStdioCommand is "mcp-stdio": an MCP server on stdin/stdout for a
// local MCP host (Claude Desktop and the like start servers as
// processes), proxying a running bridge's /mcp over streamable HTTP.
func mcpStdioCommand() command {
	return command{
		name: "mcp-stdio", args: "[--url URL] [--token-file FILE]",
		summary: "serve MCP on stdin/stdout for a local host, proxying a running bridge's /mcp",
		about: "It connects to the bridge at --url as an MCP client with the agent token and\n" +
			"serves the bridge's tools, resources and instructions on stdin/stdout: tool\n" +
			"calls, resource reads and subscriptions go to the bridge, and the bridge's\n" +
			"resource updates and progress notifications come back to the host. Nothing is\n" +
			"decided here; the bridge authenticates, validates and supervises every call.\n" +
			"Logs go to stderr (stdout is the protocol). It exits 0 when the host closes\n" +
			"stdin and 1 when the bridge cannot be reached or ends the session.\n\n" +
			"The agent token comes from --token-file — the bridge's tokens.json (its\n" +
			"\"agent\" key only) or a file holding the token alone, readable by its owner\n" +
			"only — or, without it, from ROBOT_BRIDGE_AGENT_TOKEN.",
		run: mcpStdio,
	}
}

func mcpStdio(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcp-stdio", stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "`URL` of the running bridge (its /mcp endpoint, or the base it serves /mcp under)")
	tokenFile := fs.String("token-file", "", "`FILE` with the agent token: the bridge's tokens.json or the token alone (default: $"+toolapi.EnvAgentToken+")")
	logLevel := fs.String("log-level", "warn", "`LEVEL` of the JSON log on stderr: debug, info, warn or error")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge mcp-stdio: unexpected argument %q (mcp-stdio takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		sayln(stderr, "robot-bridge mcp-stdio:", err)
		return 2
	}
	endpoint, err := mcpEndpoint(*base)
	if err != nil {
		sayln(stderr, "robot-bridge mcp-stdio:", err)
		return 2
	}
	token, err := toolapi.ReadAgentToken(*tokenFile, os.Getenv)
	if err != nil {
		sayln(stderr, "robot-bridge mcp-stdio:", err)
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	err = runMCPStdio(ctx, mcpStdioConf{Endpoint: endpoint, Token: token, In: os.Stdin, Out: nopWriteCloser{stdout}, Logger: logger})
	if err != nil {
		sayln(stderr, "robot-bridge mcp-stdio:", err)
		return 1
	}
	return 0
}

// mcpEndpoint is the /mcp endpoint of the bridge at raw: a base URL
// (http://127.0.0.1:8080) gains /mcp, one that names it stays as it is.
func mcpEndpoint(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q is not an http:// or https:// URL of a bridge (e.g. http://127.0.0.1:8080)", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--url %q: give the bridge's address without a query or fragment", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/mcp") {
		u.Path += "/mcp"
	}
	return u.String(), nil
}

// mcpStdioConf configures runMCPStdio.
type mcpStdioConf struct {
	// Endpoint is the bridge's /mcp URL.
	Endpoint string
	// Token is the agent's bearer token.
	Token string
	// In and Out are the host's side: the protocol's stdin and stdout.
	In  io.ReadCloser
	Out io.WriteCloser
	// Logger receives the proxy's logs (never the protocol).
	Logger *slog.Logger
	// HTTPClient (optional) reaches the bridge; it defaults to one with
	// no overall timeout (notification streams stay open).
	HTTPClient *http.Client
}

// bearer adds the agent token to every request to the bridge.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// stdioProxy is one mcp-stdio run: a client session to the bridge and a
// server session to the host.
type stdioProxy struct {
	remote *mcp.ClientSession
	local  *mcp.Server
	log    *slog.Logger

	next     atomic.Uint64
	mu       sync.Mutex
	progress map[string]progressRoute // guarded by mu; the bridge's token → the host's
	subs     map[string]int           // guarded by mu; URI → local subscriptions
}

// progressRouteGrace is how long a finished call's progress route stays,
// for a notification the client delivers after the call's result.
const progressRouteGrace = 5 * time.Second

// progressRoute is where a progress notification from the bridge goes.
type progressRoute struct {
	session *mcp.ServerSession
	token   any
}

// runMCPStdio proxies the host on conf.In/conf.Out to the bridge until
// the host closes its side (nil), ctx ends (nil), or the bridge cannot be
// reached or ends the session (an error).
func runMCPStdio(ctx context.Context, conf mcpStdioConf) error {
	log := conf.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "mcp-stdio")
	hc := conf.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc = &http.Client{Transport: bearer{conf.Token, rt}, Jar: hc.Jar, CheckRedirect: hc.CheckRedirect}
	p := &stdioProxy{log: log, progress: map[string]progressRoute{}, subs: map[string]int{}}

	client := mcp.NewClient(&mcp.Implementation{Name: "robot-bridge-mcp-stdio", Version: "0.1.0"}, &mcp.ClientOptions{
		Logger:                      log,
		ResourceUpdatedHandler:      p.resourceUpdated,
		ProgressNotificationHandler: p.progressFromBridge,
	})
	connectCtx, cancelConnect := context.WithTimeout(ctx, 30*time.Second)
	// Sessions (2025-11-25) keep the bridge's per-session guarantees: one
	// loop guard per host, and a notification stream that outlives calls.
	remote, err := client.Connect(connectCtx, &mcp.StreamableClientTransport{Endpoint: conf.Endpoint, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	cancelConnect()
	if err != nil {
		return fmt.Errorf("cannot open an MCP session with the bridge at %s: %w (is it running, and is the token the agent's?)", conf.Endpoint, err)
	}
	p.remote = remote
	defer func() { _ = remote.Close() }()

	init := remote.InitializeResult()
	info := *init.ServerInfo
	opts := &mcp.ServerOptions{Instructions: init.Instructions, Logger: log}
	if caps := init.Capabilities; caps != nil && caps.Resources != nil && caps.Resources.Subscribe {
		opts.SubscribeHandler, opts.UnsubscribeHandler = p.subscribe, p.unsubscribe
	}
	p.local = mcp.NewServer(&info, opts)
	if err := p.mirror(ctx); err != nil {
		return err
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var bridgeGone atomic.Bool
	go func() {
		_ = remote.Wait()
		bridgeGone.Store(true)
		stopRun()
	}()
	err = p.local.Run(runCtx, &mcp.IOTransport{Reader: conf.In, Writer: conf.Out})
	if bridgeGone.Load() {
		return fmt.Errorf("the bridge at %s ended the MCP session", conf.Endpoint)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return fmt.Errorf("serving the host: %w", err)
	}
	return nil
}

// mirror serves the bridge's tools, resources and resource templates
// locally, each forwarded to the bridge.
func (p *stdioProxy) mirror(ctx context.Context) error {
	for t, err := range p.remote.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing the bridge's tools: %w", err)
		}
		if m, ok := t.InputSchema.(map[string]any); !ok || m["type"] != "object" {
			p.log.Warn("tool skipped: its input schema is not a JSON object schema", "tool", t.Name)
			continue
		}
		p.local.AddTool(t, p.callTool)
	}
	caps := p.remote.InitializeResult().Capabilities
	if caps == nil || caps.Resources == nil {
		return nil
	}
	for r, err := range p.remote.Resources(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing the bridge's resources: %w", err)
		}
		if u, perr := url.Parse(r.URI); perr != nil || u.Scheme == "" {
			p.log.Warn("resource skipped: not an absolute URI", "uri", r.URI)
			continue
		}
		p.local.AddResource(r, p.readResource)
	}
	for rt, err := range p.remote.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing the bridge's resource templates: %w", err)
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					p.log.Warn("resource template skipped: not a valid URI template", "template", rt.URITemplate)
				}
			}()
			p.local.AddResourceTemplate(rt, p.readResource)
		}()
	}
	return nil
}

// callTool forwards a tools/call. A progress token of the host's is
// replaced by one of the proxy's, so the bridge's progress notifications
// find their way back. When the bridge cannot be reached the host gets
// an UNAVAILABLE envelope that says so — and that whether the call ran
// is unknown — rather than a protocol error the model never sees.
func (p *stdioProxy) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: req.Params.Name}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	for k, v := range req.Params.Meta {
		// The protocol's own keys (the host's protocol version, client
		// info) describe the host's session, not the proxy's session
		// with the bridge; anything else (an idempotency_key) goes on.
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken" {
			continue
		}
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta[k] = v
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		mine := "mcp-stdio-" + strconv.FormatUint(p.next.Add(1), 10)
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta["progressToken"] = mine
		p.mu.Lock()
		p.progress[mine] = progressRoute{session: req.Session, token: tok}
		p.mu.Unlock()
		defer func() {
			// The bridge sends a call's last progress before its result,
			// but the client may hand the result over before it has run
			// the notification's handler: keep the route a little longer
			// so that last notification is still forwarded.
			time.AfterFunc(progressRouteGrace, func() {
				p.mu.Lock()
				delete(p.progress, mine)
				p.mu.Unlock()
			})
		}()
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	res, err := p.remote.CallTool(ctx, params)
	if err == nil {
		return res, nil
	}
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		return nil, err
	}
	p.log.Warn("tool call did not reach the bridge", "tool", params.Name, "err", err)
	return unreachable(params.Name, err), nil
}

// unreachable is the envelope of a call the bridge did not answer.
func unreachable(tool string, err error) *mcp.CallToolResult {
	te := toolerr.New(toolerr.Unavailable, "the bridge did not answer (%v); whether the call ran is unknown", err)
	te.RetryAfter = 2 * time.Second
	te.Suggestion = "wait retry_after_ms; then read the robot with get_robot_state and, for an action, follow its task with get_task " +
		"or repeat the call with the same idempotency_key — never call an action again without one"
	env := toolapi.Envelope{Tool: tool, Error: toolapi.ErrorBodyOf(te), Robot: "unknown: the bridge did not answer"}
	b, _ := json.Marshal(env)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: env, IsError: true}
}

func (p *stdioProxy) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	return p.remote.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI})
}

// detached is a context for a request to the bridge made on behalf of a
// host's request: cancelled with ctx, but carrying none of its values.
// The SDK keeps per-request protocol state in the context (the host's
// protocol version among it), which must not reach the other session.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	return out, func() {
		stop()
		cancel()
	}
}

// subscribe subscribes the bridge to uri the first time a host does.
func (p *stdioProxy) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	ctx, cancel := detached(ctx)
	defer cancel()
	p.mu.Lock()
	first := p.subs[uri] == 0
	p.mu.Unlock()
	if first {
		if err := p.remote.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.subs[uri]++
	p.mu.Unlock()
	return nil
}

// unsubscribe unsubscribes the bridge from uri when no host listens.
func (p *stdioProxy) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	p.mu.Lock()
	if p.subs[uri] == 0 {
		p.mu.Unlock()
		return nil
	}
	p.subs[uri]--
	last := p.subs[uri] == 0
	if last {
		delete(p.subs, uri)
	}
	p.mu.Unlock()
	if last {
		ctx, cancel := detached(ctx)
		defer cancel()
		return p.remote.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	}
	return nil
}

func (p *stdioProxy) resourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if p.local == nil {
		return
	}
	_ = p.local.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: req.Params.URI})
}

func (p *stdioProxy) progressFromBridge(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, _ := req.Params.ProgressToken.(string)
	p.mu.Lock()
	route, ok := p.progress[tok]
	p.mu.Unlock()
	if !ok {
		return
	}
	n := *req.Params
	n.ProgressToken = route.token
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := route.session.NotifyProgress(ctx, &n); err != nil {
		p.log.Debug("progress not forwarded", "err", err)
	}
}
