package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runBinary runs the built robot-bridge with args and returns its exit
// code and output. The token variables are removed from its environment,
// so it behaves as on a fresh machine.
func runBinary(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROBOT_BRIDGE_") {
			env = append(env, kv)
		}
	}
	return runEnv(t, env, bin, args...)
}

// helpedCommands returns the command names in the "commands:" section of
// a top-level help text.
func helpedCommands(t *testing.T, help string) []string {
	t.Helper()
	_, list, ok := strings.Cut(help, "\ncommands:\n")
	require.True(t, ok, "the help has no commands: section:\n%s", help)
	var names []string
	for line := range strings.SplitSeq(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 2, "a command line without its summary: %q", line)
		names = append(names, f[0])
	}
	require.NotEmpty(t, names, "the commands: section is empty:\n%s", help)
	return names
}

// dispatchedCommands returns every command name run can dispatch: the
// commands table, and any string a switch in run (or a function of
// main.go) matches a command name against besides the help flags — so a
// command added to the dispatch by hand is caught too.
func dispatchedCommands(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	require.NoError(t, err)
	ast.Inspect(f, func(n ast.Node) bool {
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		for _, e := range cc.List {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			if !strings.HasPrefix(s, "-") && !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
		return true
	})
	return names
}

func TestHelp_ListsEveryDispatchedCommandAndExits0(t *testing.T) {
	// Given the built binary and every command it dispatches
	bin := buildBinary(t)
	dispatched := dispatchedCommands(t)
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// When the user asks for help
			code, out, errOut := runBinary(t, bin, args...)

			// Then it exits 0 with the list on stdout, every dispatched
			// command on it with a one-line summary
			require.Equal(t, 0, code, "stderr: %s", errOut)
			require.Empty(t, errOut)
			listed := helpedCommands(t, out)
			require.ElementsMatch(t, dispatched, listed, "the help must list exactly the commands run dispatches")
			require.Contains(t, out, "robot-bridge COMMAND --help")
		})
	}
}

func TestCommandHelp_NamesArgumentsAndFlagsAndExits0(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name      string
		usageLine string
		flags     []string // "-name PLACEHOLDER" as the help shows them
	}{
		{"serve", "usage: robot-bridge serve [flags]", []string{
			"-advertise URL", "-bridge-id ID", "-claim IDS", "-config FILE", "-data-dir DIR", "-failover POLICY", "-lease-ttl DURATION",
			"-listen HOST:PORT", "-log-level LEVEL", "-store ENGINE", "-store-dsn-file FILE",
		}},
		{"sim", "usage: robot-bridge sim [flags]", []string{"-broker URL", "-config FILE", "-listen HOST:PORT", "-log-level LEVEL", "-robots N", "-share-connection", "-transport KIND"}},
		{"check-config", "usage: robot-bridge check-config FILE", nil},
		{"tools", "usage: robot-bridge tools [flags]", []string{"-config FILE", "-format FORMAT", "-strict"}},
		{"init", "usage: robot-bridge init [flags]", []string{"-force", "-id ID", "-out FILE", "-ros-master URL", "-timeout DURATION", "-transport KIND"}},
		{"mcp-stdio", "usage: robot-bridge mcp-stdio [--url URL] [--token-file FILE]", []string{"-log-level LEVEL", "-token-file FILE", "-url URL"}},
		{"lifecycle", "usage: robot-bridge lifecycle [flags]", []string{"-write FILE"}},
		{"help", "usage: robot-bridge help [COMMAND]", nil},
	}
	// Every listed command has a case here, so a new one gets its help checked.
	_, top, _ := runBinary(t, bin, "--help")
	var cases []string
	for _, tc := range tests {
		cases = append(cases, tc.name)
	}
	require.ElementsMatch(t, helpedCommands(t, top), cases, "add a case for every command the help lists")

	flagLine := regexp.MustCompile(`(?m)^  (-\S+.*)$`)
	for _, tc := range tests {
		for _, form := range [][]string{{tc.name, "--help"}, {tc.name, "-h"}, {"help", tc.name}} {
			t.Run(strings.Join(form, " "), func(t *testing.T) {
				// When the user asks a command for its help
				code, out, errOut := runBinary(t, bin, form...)

				// Then it exits 0, its usage line names its positional
				// arguments, and it lists exactly its flags, each with a
				// placeholder naming its value
				require.Equal(t, 0, code, "stderr: %s", errOut)
				require.Empty(t, errOut)
				require.Equal(t, tc.usageLine, strings.SplitN(out, "\n", 2)[0])
				var got []string
				for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
					got = append(got, m[1])
				}
				require.Equal(t, tc.flags, got, "the flags and their placeholders:\n%s", out)
			})
		}
	}
}

func TestUnknownCommandOrFlag_PrintsUsageAndExits2(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{"unknown command", []string{"fly"}, []string{`unknown command "fly"`, "\ncommands:\n  serve "}},
		{"help of an unknown command", []string{"help", "fly"}, []string{`unknown command "fly"`, "\ncommands:\n  serve "}},
		{"unknown flag", []string{"serve", "--nope"}, []string{"-nope", "usage: robot-bridge serve [flags]", "-listen HOST:PORT"}},
		{"check-config without FILE", []string{"check-config"}, []string{"needs exactly one FILE", "usage: robot-bridge check-config FILE"}},
		{"serve with a stray argument", []string{"serve", "now"}, []string{`unexpected argument "now"`, "usage: robot-bridge serve [flags]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// When the user types something robot-bridge does not take
			code, out, errOut := runBinary(t, bin, tc.args...)

			// Then it exits 2 with the reason and the usage on stderr, and
			// nothing on stdout
			require.Equal(t, 2, code, "stdout: %s\nstderr: %s", out, errOut)
			require.Empty(t, out)
			for _, w := range tc.wantErr {
				require.Contains(t, errOut, w)
			}
		})
	}
}

func TestServe_BusyPortFailsBeforeWritingTokensOrADatabase(t *testing.T) {
	// Given a loopback port another process holds, and an empty data dir
	bin := buildBinary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	addr := busy.Addr().String()
	dataDir := t.TempDir()
	cfg, err := filepath.Abs(filepath.Join("..", "..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)

	// When serve is started on that port
	code, _, errOut := runBinary(t, bin, "serve", "--config", cfg, "--listen", addr, "--data-dir", dataDir, "--log-level", "warn")

	// Then it fails, naming the address and what to do
	require.NotEqual(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, errOut, "cannot listen on "+addr)
	require.Contains(t, errOut, "address already in use")
	require.Contains(t, errOut, "pass --listen with a free address")
	// And the data dir is as it was: no tokens.json, no robot-bridge.db
	entries, err := os.ReadDir(dataDir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "a serve that could not listen left files in its data dir")
}
