package actions_test

import (
	"encoding/json"
	"testing"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// FuzzSubmitArguments feeds arbitrary JSON arguments to every action tool.
// Whatever arrives, Submit must answer with a task or a *toolerr.Error of
// a valid type, never panic, and never send a command before approval.
func FuzzSubmitArguments(f *testing.F) {
	seeds := []struct{ tool, args string }{
		{"move_base_to", `{"x": 1.5, "y": -2}`},
		{"move_base_to", `{"x": 1e308, "y": -1e308}`},
		{"move_base_to", `{"location": "table"}`},
		{"move_base_to", `{"location": "", "theta_deg": "north"}`},
		{"move_arm_to", `{"pose": "ready"}`},
		{"move_arm_to", `{"joints": {"elbow": 2.7, "wrist": null}}`},
		{"move_arm_to", `{"joints": [1, 2, 3]}`},
		{"grasp", `{"object_id": "red_cup"}`},
		{"release", `{}`},
		{"return_to_safe_pose", `{"extra": true}`},
		{"cancel_task", `{"task_id": 7}`},
		{"stop", `{"reason": "fuzz"}`},
	}
	for _, s := range seeds {
		f.Add(s.tool, s.args)
	}
	f.Fuzz(func(t *testing.T, tool, raw string) {
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil {
			return
		}
		b := newBench(t, benchOpt{})
		v, err := b.submit(tool, args)
		if err != nil {
			te := toolerr.As(err)
			if !te.Type.Valid() || te.Message == "" {
				t.Fatalf("bad error for %s %s: %#v", tool, raw, te)
			}
		} else if tool != "stop" && tool != "cancel_task" && v.ID == "" {
			t.Fatalf("no task and no error for %s %s", tool, raw)
		}
		if n := len(b.bot.commands()); n != 0 {
			t.Fatalf("%d commands sent before any approval for %s %s", n, tool, raw)
		}
	})
}
