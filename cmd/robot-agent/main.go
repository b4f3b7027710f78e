package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/robot-bridge/robot-bridge/agent"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)) }

// Exit codes.
const (
	exitOK = 0
	// exitError: the bridge or the model could not be used, or the
	// request was interrupted.
	exitError = 1
	// exitUsage: bad flags or arguments.
	exitUsage = 2
	// exitLimit: a limit ended the turn (the answer is the loop's own).
	exitLimit = 3
)

const usage = `robot-agent is the reference agent loop of robot-bridge: a language model
behind an OpenAI-compatible /v1/chat/completions endpoint (or Anthropic's
Messages API) operates the robot through a running bridge's tools.

Usage:
  robot-agent chat [flags]            interactive: one line per request, "exit" or EOF ends
  robot-agent run [flags] PROMPT      one request; the answer goes to stdout
  robot-agent --help

Exit codes (run): 0 the model answered; 3 a limit ended the turn (the
answer is the loop's own: what worked, what could not be done, why it
stopped); 1 the bridge or the model could not be used, or the request
was interrupted; 2 bad usage.

Environment: ROBOT_AGENT_BRIDGE_URL (--bridge), ROBOT_BRIDGE_AGENT_TOKEN
(without --token-file), ROBOT_AGENT_MODEL (--model); for --backend openai
OPENAI_BASE_URL (--base-url) and OPENAI_API_KEY; for --backend anthropic
ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY. API keys are read from the
environment only and are never printed or logged.

Flags:
`

// options are the parsed flags.
type options struct {
	bridge, tokenFile, backend, model, baseURL, session, instructions string
	limits                                                            agent.Limits
	verbose, strict                                                   bool
}

func newFlags(stderr io.Writer, env func(string) string) (*flag.FlagSet, *options) {
	o := &options{}
	fs := flag.NewFlagSet("robot-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := func(name, fallback string) string {
		if v := strings.TrimSpace(env(name)); v != "" {
			return v
		}
		return fallback
	}
	fs.StringVar(&o.bridge, "bridge", def("ROBOT_AGENT_BRIDGE_URL", "http://127.0.0.1:8080"), "the bridge's base `URL` ($ROBOT_AGENT_BRIDGE_URL)")
	fs.StringVar(&o.tokenFile, "token-file", "", "`FILE` with the agent token: the bridge's tokens.json or the token alone (default: $ROBOT_BRIDGE_AGENT_TOKEN)")
	fs.StringVar(&o.backend, "backend", "openai", "the model API: openai (any OpenAI-compatible server) or anthropic")
	fs.StringVar(&o.model, "model", def("ROBOT_AGENT_MODEL", ""), "the model `NAME` ($ROBOT_AGENT_MODEL; a local server takes any name)")
	fs.StringVar(&o.baseURL, "base-url", "", "the model API's base `URL` (default $OPENAI_BASE_URL or https://api.openai.com/v1; for anthropic $ANTHROPIC_BASE_URL or https://api.anthropic.com)")
	fs.StringVar(&o.session, "session", "", "the conversation's session `ID` at the bridge (default: a new random one)")
	fs.StringVar(&o.instructions, "instructions", "", "`TEXT` added to the system prompt after the tool-error rules")
	fs.IntVar(&o.limits.MaxIterations, "max-iterations", agent.DefaultMaxIterations, "model calls per request, at most")
	fs.IntVar(&o.limits.MaxSameFailure, "max-same-failure", agent.DefaultMaxSameFailure, "the same call (tool and arguments) failing this many times in a row ends the request")
	fs.DurationVar(&o.limits.TurnTimeout, "turn-timeout", agent.DefaultTurnTimeout, "wall-clock budget of one request, waits for approval and tasks included")
	fs.IntVar(&o.limits.MaxResultBytes, "max-result-bytes", agent.DefaultMaxResultBytes, fmt.Sprintf("bytes of one tool result fed to the model; a longer one is summarized (at least %d)", agent.MinResultBytes))
	fs.BoolVar(&o.strict, "strict", false, "openai backend: tools in OpenAI's strict form (structured outputs); many local servers do not take it")
	fs.BoolVar(&o.verbose, "verbose", false, "log what the loop does to stderr")
	fs.Usage = func() {
		_, _ = io.WriteString(stderr, usage)
		fs.PrintDefaults()
	}
	return fs, o
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, "robot-agent: name a command: chat or run \"PROMPT\" (see robot-agent --help)\n")
		return exitUsage
	}
	cmd := args[0]
	fs, o := newFlags(stderr, env)
	switch cmd {
	case "-h", "-help", "--help", "help":
		fs.SetOutput(stdout)
		fs.Usage = func() { _, _ = io.WriteString(stdout, usage); fs.PrintDefaults() }
		fs.Usage()
		return exitOK
	case "chat", "run":
	default:
		_, _ = fmt.Fprintf(stderr, "robot-agent: unknown command %q; allowed: chat, run (see robot-agent --help)\n", cmd)
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	var prompt string
	switch {
	case cmd == "run" && fs.NArg() != 1:
		_, _ = fmt.Fprintf(stderr, "robot-agent run: give the request as one argument, e.g. robot-agent run \"bring the red cup to the dock\" (got %d arguments)\n", fs.NArg())
		return exitUsage
	case cmd == "run":
		prompt = fs.Arg(0)
	case fs.NArg() != 0:
		_, _ = fmt.Fprintf(stderr, "robot-agent chat: takes no arguments (got %q); type requests once it runs\n", fs.Args())
		return exitUsage
	}

	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	tr := &terminal{out: stdout}
	a, err := build(o, env, logger, tr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "robot-agent: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == "run" {
		return turn(ctx, a, tr, prompt)
	}
	return chat(ctx, a, tr, stdin)
}

// build makes the model backend and the agent from the flags.
func build(o *options, env func(string) string, logger *slog.Logger, obs agent.Observer) (*agent.Agent, error) {
	token, err := toolapi.ReadAgentToken(o.tokenFile, env)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.model) == "" {
		return nil, errors.New("--model is required (or ROBOT_AGENT_MODEL); a local server takes any name, e.g. --model local")
	}
	var model agent.Model
	switch o.backend {
	case "openai":
		base := o.baseURL
		if base == "" {
			base = strings.TrimSpace(env("OPENAI_BASE_URL"))
		}
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		model, err = agent.NewOpenAI(agent.OpenAIConf{BaseURL: base, Model: o.model, APIKey: strings.TrimSpace(env("OPENAI_API_KEY")), Logger: logger})
	case "anthropic":
		base := o.baseURL
		if base == "" {
			base = strings.TrimSpace(env("ANTHROPIC_BASE_URL"))
		}
		key := strings.TrimSpace(env("ANTHROPIC_API_KEY"))
		if key == "" {
			return nil, errors.New("--backend anthropic needs ANTHROPIC_API_KEY")
		}
		model, err = agent.NewAnthropic(agent.AnthropicConf{BaseURL: base, Model: o.model, APIKey: key, Logger: logger})
	default:
		return nil, fmt.Errorf("--backend %q is not a backend; allowed: openai, anthropic", o.backend)
	}
	if err != nil {
		return nil, err
	}
	return agent.New(agent.Conf{
		BridgeURL: o.bridge, Token: token, Model: model, SessionID: o.session, Limits: o.limits,
		Instructions: o.instructions, Observer: obs, Logger: logger, StrictTools: o.strict,
	})
}

// turn runs one request and prints its answer; the exit code says how it
// ended.
func turn(ctx context.Context, a *agent.Agent, tr *terminal, prompt string) int {
	res, err := a.Turn(ctx, prompt)
	if err != nil {
		tr.line("robot-agent: " + err.Error())
		return exitUsage
	}
	tr.answer(res)
	switch res.End {
	case agent.EndAnswered:
		return exitOK
	case agent.EndBridgeError, agent.EndModelError, agent.EndCancelled:
		return exitError
	}
	return exitLimit
}

// chat reads one request per line until "exit", "quit" or EOF.
func chat(ctx context.Context, a *agent.Agent, tr *terminal, in io.Reader) int {
	tr.line(fmt.Sprintf("robot-agent: session %s. Type a request; \"exit\" or Ctrl-D ends.", a.SessionID()))
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for {
		tr.prompt()
		if !sc.Scan() {
			tr.line("")
			return exitOK
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
			continue
		case "exit", "quit":
			return exitOK
		}
		start := time.Now()
		res, err := a.Turn(ctx, line)
		if err != nil {
			tr.line("robot-agent: " + err.Error())
			continue
		}
		tr.answer(res)
		tr.line(fmt.Sprintf("(%s, %d model calls, %d tool calls, %s)", res.End, res.Iterations, len(res.Calls), time.Since(start).Round(100*time.Millisecond)))
		if ctx.Err() != nil {
			return exitOK
		}
	}
}
