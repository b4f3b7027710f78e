package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/robot-bridge/robot-bridge/bridge"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/store"
)

const defaultConfig = "hw-configs/sim-mobile-manipulator.yaml"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// command is one subcommand. The top-level help and the dispatch in run
// both come from commands, so a command cannot be run without being
// listed, nor listed without being run.
type command struct {
	name string
	// args names what follows the command name: positional arguments in
	// capitals, "[flags]" where it takes flags.
	args string
	// summary is the command's line in the top-level help.
	summary string
	// about (optional) is more for the command's own --help.
	about string
	run   func(args []string, stdout, stderr io.Writer) int
}

// commands lists every subcommand in the order the help shows them.
func commands() []command {
	return []command{
		{
			name: "serve", args: "[flags]",
			summary: "run the bridge (the default): tools, console and metrics",
			about: "One address serves the agent's tools over HTTP, MCP (/mcp) and gRPC/Connect,\n" +
				"the operator console (/console/) and Prometheus metrics (/metrics).\n\n" +
				"serve binds --listen first, so a busy address fails before anything is\n" +
				"written. Then it takes the API tokens from ROBOT_BRIDGE_AGENT_TOKEN and\n" +
				"ROBOT_BRIDGE_OPERATOR_TOKEN or from <data-dir>/tokens.json (its \"agent\" and\n" +
				"\"operator\" keys; generated with mode 0600 when the file is missing and the\n" +
				"two variables are not both set), opens the store (<data-dir>/robot-bridge.db;\n" +
				"with --store postgres, the PostgreSQL database ROBOT_BRIDGE_STORE_DSN or the\n" +
				"--store-dsn-file names), brings the robot link up and serves until SIGINT\n" +
				"or SIGTERM, when it stops the robot and shuts down.",
			run: serve,
		},
		{
			name: "sim", args: "[flags]",
			summary: "run the bundled simulator as its own process",
			about: "The simulator runs in real time with its command watchdog and serves its\n" +
				"fault-injection and ground-truth API under /v1/sim/ on --listen. With\n" +
				"--transport ros it is also a ROS1 node on the config's master\n" +
				"(transport.ros.master_uri or ROS_MASTER_URI) serving the topics and actions\n" +
				"the config names. With --transport mqtt it is an MQTT robot on --broker (or\n" +
				"the config's broker, or the bridge's embedded one at transport.mqtt.listen);\n" +
				"--robots N runs N of them with ids <robot.id>-1 ... <robot.id>-N.",
			run: simCmd,
		},
		{name: "init", args: "[flags]", summary: "write a starter hw-config from a running ROS robot, or the simulator's", about: initAbout, run: initCmd},
		{
			name: "check-config", args: "FILE",
			summary: "validate a hw-config FILE and explain every problem",
			about:   "It exits 0 when FILE is a valid hw-config and 2 when it is not.",
			run:     checkConfig,
		},
		{
			name: "tools", args: "[flags]",
			summary: "print the tools a hw-config yields, with their schemas, as JSON",
			run:     toolsCmd,
		},
		mcpStdioCommand(),
		{
			name: "lifecycle", args: "[flags]",
			summary: "print the task lifecycle diagram, or write it into a file",
			about: "The diagram is Mermaid, generated from the fsm transition table; `make\n" +
				"diagram` writes it into ARCHITECTURE.md.",
			run: lifecycle,
		},
		{
			name: "help", args: "[COMMAND]",
			summary: "list the commands, or show the arguments and flags of COMMAND",
			run:     helpCmd,
		},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run executes one subcommand and returns the process exit code: 0 on
// success, 1 on a runtime failure, 2 on bad usage or a bad config.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			usage(stdout)
			return 0
		}
	}
	name := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if c, ok := lookup(name); ok {
		return c.run(args, stdout, stderr)
	}
	sayf(stderr, "robot-bridge: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	say(w, `usage: robot-bridge [COMMAND] [ARGUMENTS]

robot-bridge lets an LLM agent operate a robot through tools, with a safety
supervisor in between. With no command it runs serve.

commands:
`)
	for _, c := range commands() {
		sayf(w, "  %-13s %s\n", c.name, c.summary)
	}
	say(w, "\nRun 'robot-bridge COMMAND --help' for the arguments and flags of a command.\n")
}

// helpCmd is "help [COMMAND]".
func helpCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("help", stderr)
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	switch fs.NArg() {
	case 0:
		usage(stdout)
		return 0
	case 1:
		c, ok := lookup(fs.Arg(0))
		if !ok {
			sayf(stderr, "robot-bridge help: unknown command %q\n\n", fs.Arg(0))
			usage(stderr)
			return 2
		}
		return c.run([]string{"--help"}, stdout, stderr)
	}
	sayln(stderr, "robot-bridge help: takes at most one COMMAND")
	say(stderr, "\n")
	commandUsage(fs, stderr)
	return 2
}

// newFlags returns the flag set of the named subcommand; parse prints its
// usage, which names the command's arguments and lists its flags.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// parse prints the usage itself, to stdout when it was asked for.
	fs.Usage = func() {}
	return fs
}

// parse parses a subcommand's arguments. When it returns false the command
// must end with the code: 0 after --help or -h (the usage went to stdout),
// 2 after a bad flag (the error and the usage went to stderr).
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		commandUsage(fs, stdout)
		return 0, false
	}
	say(stderr, "\n")
	commandUsage(fs, stderr)
	return 2, false
}

// commandUsage writes a subcommand's usage line, what it does, and its
// flags with their defaults.
func commandUsage(fs *flag.FlagSet, w io.Writer) {
	c, _ := lookup(fs.Name())
	sayf(w, "usage: robot-bridge %s %s\n\n%s.\n", c.name, c.args, upperFirst(c.summary))
	if c.about != "" {
		sayf(w, "\n%s\n", c.about)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	say(w, "\nflags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: allowed: debug, info, warn, error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// signalContext returns a context cancelled on SIGINT or SIGTERM. Only main
// touches OS signals.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", stderr)
	configPath := fs.String("config", defaultConfig, "the robot's hw-config `FILE`")
	listen := fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` of the HTTP API, MCP, gRPC, console and metrics (port 0 picks a free one)")
	dataDir := fs.String("data-dir", "./var", "`DIR` for the store (robot-bridge.db) and the generated tokens (tokens.json)")
	logLevel := fs.String("log-level", "info", "`LEVEL` of the JSON log on stderr: debug, info, warn or error")
	storeDriver := fs.String("store", "", "the store's `ENGINE`: sqlite (the default: <data-dir>/robot-bridge.db) or postgres "+
		"(the database "+bridge.EnvStoreDSN+" names; default $"+bridge.EnvStore+")")
	storeDSNFile := fs.String("store-dsn-file", "", "`FILE` whose first line is the PostgreSQL connection string, instead of "+
		bridge.EnvStoreDSN+" (default $"+bridge.EnvStoreDSNFile+")")
	bridgeID := fs.String("bridge-id", "", "this bridge's `ID` in a cluster of bridges in front of one fleet (needs --store postgres and an MQTT broker; "+
		"default $"+bridge.EnvBridgeID+"; none: a bridge on its own)")
	advertise := fs.String("advertise", "", "the `URL` other bridges' consoles and refusals name for this bridge (cluster; default $"+bridge.EnvAdvertise+")")
	claim := fs.String("claim", "", "comma-separated robot `IDS` this bridge takes whenever their lease is free (cluster; default $"+bridge.EnvClaim+", else every robot)")
	failover := fs.String("failover", "", "`POLICY` for the robots of a bridge that died: operator (take over when an operator confirms; the default) or auto (cluster; default $"+bridge.EnvFailover+")")
	leaseTTL := fs.Duration("lease-ttl", 0, "`DURATION` a robot lease lasts without renewal (cluster; default $"+bridge.EnvLeaseTTL+", else "+bridge.DefaultLeaseTTL.String()+")")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge serve: unexpected argument %q (serve takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 2
	}
	if *storeDriver != "" {
		if _, err := store.ParseDriver(*storeDriver); err != nil {
			sayln(stderr, "robot-bridge: --store:", err)
			return 2
		}
	}
	cfg, err := hwconfig.Load(*configPath)
	if err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 2
	}
	// The address is bound before anything is written: a busy port must
	// not leave tokens or a database behind in a data dir.
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		sayln(stderr, listenFailure(*listen, *dataDir, err))
		return 1
	}
	b, err := bridge.New(bridge.Conf{
		Config:   cfg,
		Listener: ln,
		DataDir:  *dataDir,
		Logger:   logger,
		Env:      os.Getenv,
		Out:      stdout,
		Store:    bridge.StoreConf{Driver: *storeDriver, DSNFile: *storeDSNFile},
		Cluster:  bridge.ClusterConf{BridgeID: *bridgeID, Advertise: *advertise, Claim: bridge.SplitIDs(*claim), Failover: *failover, LeaseTTL: *leaseTTL},
	})
	if err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 1
	}
	ctx, cancel := signalContext()
	defer cancel()
	if err := b.Start(ctx); err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 1
	}
	sayf(stdout, "robot-bridge %s on %s: API http://%s/v1/  console http://%s/console/  metrics http://%s/metrics\n",
		cfg.Robot.ID, cfg.Transport.Kind, b.Addr(), b.Addr(), b.Addr())
	<-ctx.Done()
	sayln(stdout, "robot-bridge: shutting down; stopping the robot")
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	if err := b.Stop(stopCtx); err != nil {
		sayln(stderr, "robot-bridge: shutdown:", err)
		return 1
	}
	return 0
}

// listenFailure explains why serve could not bind its address and what
// to do about it.
func listenFailure(addr, dataDir string, err error) string {
	what := "check the --listen address (HOST:PORT, e.g. 127.0.0.1:8080)"
	if errors.Is(err, syscall.EADDRINUSE) {
		what = "another process (perhaps another robot-bridge) is listening there: stop it, or pass --listen with a free address (e.g. --listen 127.0.0.1:0 picks one)"
	}
	return fmt.Sprintf("robot-bridge: cannot listen on %s: %v\n%s; nothing was written to %s", addr, err, what, dataDir)
}

func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check-config", stderr)
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		sayln(stderr, "robot-bridge check-config: needs exactly one FILE")
		say(stderr, "\n")
		commandUsage(fs, stderr)
		return 2
	}
	cfg, err := hwconfig.Load(fs.Arg(0))
	if err != nil {
		sayln(stderr, err)
		return 2
	}
	sayf(stdout, "%s: ok (robot %s, transport %s)\n", fs.Arg(0), cfg.Robot.ID, cfg.Transport.Kind)
	return 0
}

func lifecycle(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lifecycle", stderr)
	write := fs.String("write", "", "replace the diagram between the lifecycle markers in the Markdown `FILE` instead of printing it")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge lifecycle: unexpected argument %q (lifecycle takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	if *write == "" {
		say(stdout, fsm.Mermaid())
		return 0
	}
	doc, err := os.ReadFile(*write)
	if err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 1
	}
	out, err := fsm.ReplaceDiagram(string(doc))
	if err != nil {
		sayf(stderr, "robot-bridge: %s: %v\n", *write, err)
		return 1
	}
	if err := os.WriteFile(*write, []byte(out), 0o644); err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 1
	}
	return 0
}
