package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/robot-bridge/robot-bridge/bridge"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

const defaultConfig = "hw-configs/sim-mobile-manipulator.yaml"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes one subcommand and returns the process exit code: 0 on
// success, 1 on a runtime failure, 2 on bad usage or a bad config.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stdout, stderr)
	case "sim":
		return simCmd(args, stdout, stderr)
	case "check-config":
		return checkConfig(args, stdout, stderr)
	case "tools":
		return toolsCmd(args, stdout, stderr)
	case "lifecycle":
		return lifecycle(args, stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	sayf(stderr, "robot-bridge: unknown command %q\n", cmd)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	say(w, `usage: robot-bridge [command] [flags]

commands:
  serve         run the bridge (default)
  sim           run the bundled simulator as its own process
  check-config  FILE: validate a hw-config and explain every problem
  tools         print the tool schemas for a hw-config as JSON
  lifecycle     print the task lifecycle diagram (--write FILE updates it in place)

run 'robot-bridge COMMAND -h' for the flags of a command.
`)
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
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", defaultConfig, "hw-config file")
	listen := fs.String("listen", "127.0.0.1:8080", "address of the HTTP API, console and metrics")
	dataDir := fs.String("data-dir", "./var", "directory for the store and generated tokens")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 2
	}
	cfg, err := hwconfig.Load(*configPath)
	if err != nil {
		sayln(stderr, "robot-bridge:", err)
		return 2
	}
	b, err := bridge.New(bridge.Conf{
		Config:  cfg,
		Listen:  *listen,
		DataDir: *dataDir,
		Logger:  logger,
		Env:     os.Getenv,
		Out:     stdout,
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

func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		sayln(stderr, "usage: robot-bridge check-config FILE")
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
	fs := flag.NewFlagSet("lifecycle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	write := fs.String("write", "", "update the diagram between the markers in this Markdown file")
	if err := fs.Parse(args); err != nil {
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
