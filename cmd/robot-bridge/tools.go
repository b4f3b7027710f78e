package main

import (
	"encoding/json"
	"io"
	"slices"
	"strings"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// toolsCmd prints the tools a hw-config yields exactly as GET /v1/tools
// lists them in the same format: the bridge's own listing, or the tools
// array of one model API (see toolapi's formats).
func toolsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tools", stderr)
	configPath := fs.String("config", defaultConfig, "the robot's hw-config `FILE`")
	format := fs.String("format", "native", "`FORMAT` of the output, as GET /v1/tools?format= gives it: "+strings.Join(toolapi.Formats, ", "))
	strict := fs.Bool("strict", false, "with --format openai: OpenAI's strict mode (structured outputs), as ?format=openai&strict=true")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge tools: unexpected argument %q (tools takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	if !slices.Contains(toolapi.Formats, *format) {
		sayf(stderr, "robot-bridge tools: --format %q: allowed: %s\n", *format, strings.Join(toolapi.Formats, ", "))
		return 2
	}
	if *strict && *format != "openai" {
		sayln(stderr, "robot-bridge tools: --strict applies only to --format openai (OpenAI's structured outputs)")
		return 2
	}
	cfg, err := hwconfig.Load(*configPath)
	if err != nil {
		sayln(stderr, err)
		return 2
	}
	reg, err := toolapi.NewFleetRegistry(cfg, cfg.FleetIDs())
	if err != nil {
		sayln(stderr, "robot-bridge tools:", err)
		return 1
	}
	tools := reg.Tools()
	var out any
	switch *format {
	case "openai":
		list := make([]toolapi.OpenAITool, len(tools))
		for i, t := range tools {
			if *strict {
				list[i] = t.OpenAIStrict()
			} else {
				list[i] = t.OpenAI()
			}
		}
		out = list
	case "anthropic":
		list := make([]toolapi.AnthropicTool, len(tools))
		for i, t := range tools {
			list[i] = t.Anthropic()
		}
		out = list
	case "gemini":
		decl := make([]toolapi.GeminiFunction, len(tools))
		for i, t := range tools {
			decl[i] = t.Gemini()
		}
		out = []toolapi.GeminiTool{{FunctionDeclarations: decl}}
	default:
		list := make([]toolapi.ToolInfo, len(tools))
		for i, t := range tools {
			list[i] = t.Info()
		}
		out = map[string]any{"tools": list}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		sayln(stderr, "robot-bridge tools:", err)
		return 1
	}
	return 0
}
