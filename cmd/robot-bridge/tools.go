package main

import (
	"encoding/json"
	"io"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// toolsCmd prints the tools a hw-config yields, as GET /v1/tools would
// list them (or as an OpenAI tools array with --format openai).
func toolsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tools", stderr)
	configPath := fs.String("config", defaultConfig, "the robot's hw-config `FILE`")
	format := fs.String("format", "bridge", "`FORMAT` of the output: bridge (as GET /v1/tools) or openai (the OpenAI tools array)")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge tools: unexpected argument %q (tools takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	if *format != "bridge" && *format != "openai" {
		sayf(stderr, "robot-bridge tools: --format %q: allowed: bridge, openai\n", *format)
		return 2
	}
	cfg, err := hwconfig.Load(*configPath)
	if err != nil {
		sayln(stderr, err)
		return 2
	}
	reg, err := toolapi.NewRegistry(cfg)
	if err != nil {
		sayln(stderr, "robot-bridge tools:", err)
		return 1
	}
	var out any
	if *format == "openai" {
		list := []toolapi.OpenAITool{}
		for _, t := range reg.Tools() {
			list = append(list, t.OpenAI())
		}
		out = list
	} else {
		list := []toolapi.ToolInfo{}
		for _, t := range reg.Tools() {
			list = append(list, t.Info())
		}
		out = map[string]any{"tools": list}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		sayln(stderr, "robot-bridge tools:", err)
		return 1
	}
	return 0
}
