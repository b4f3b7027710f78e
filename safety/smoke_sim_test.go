package safety_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSim_HappyPathEveryTool(t *testing.T) {
	r := newRig(t)
	steps := []struct {
		tool string
		args map[string]any
	}{
		{"move_base_to", map[string]any{"location": "table"}},
		{"move_arm_to", map[string]any{"pose": "ready"}},
		{"grasp", map[string]any{"object_id": "red_cup"}},
		{"move_base_to", map[string]any{"x": 0.5, "y": 0.5}},
		{"release", map[string]any{}},
		{"return_to_safe_pose", map[string]any{}},
	}
	for _, s := range steps {
		v := r.mustSubmit(s.tool, s.args)
		require.Equal(t, "awaiting_approval", string(v.Status))
		r.approve(v)
		v = r.waitTerminal(v.ID, 60*time.Second)
		t.Logf("%s: %s %s progress=%v err=%v", s.tool, v.Status, v.Text, v.Progress, v.Error)
		require.Equal(t, "succeeded", string(v.Status), "%s: %v", s.tool, v.Error)
	}
	require.NoError(t, r.checkEveryCommandAuthorized())
}
