package approval

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
)

// The operator API's body decoders and the scope compiler take outside
// input; whatever arrives, they return a value or an *InvalidError, never
// panic. Seeds live in testdata/fuzz/<FuzzName>/.

func requireInvalid(t *testing.T, err error) {
	t.Helper()
	var ie *InvalidError
	require.ErrorAs(t, err, &ie, "error is not an *InvalidError: %v", err)
	require.NotEmpty(t, ie.Error())
}

func FuzzDecodeApproveBody(f *testing.F) {
	f.Add([]byte(`{"grant":{"scope":{"tool":"move_arm_to","poses":["ready"]},"ttl":"10m"}}`))
	cfg := loadConfig(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		opts, err := decodeApproveBody(b)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		if opts.Grant == nil {
			return
		}
		require.Positive(t, opts.Grant.TTL)
		if opts.Grant.Scope.Tool == "" {
			opts.Grant.Scope.Tool = ToolMoveBase
		}
		checkScope(t, cfg, opts.Grant.Scope, "grant.scope")
	})
}

func FuzzDecodeDenyBody(f *testing.F) {
	f.Add([]byte(`{"reason":"not now"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reason, err := decodeDenyBody(b)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		require.NotEmpty(t, reason)
	})
}

func FuzzDecodeRevokeBody(f *testing.F) {
	f.Add([]byte(`{"reason":"a person is at the table"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reason, err := decodeRevokeBody(b)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		require.NoError(t, checkReason("reason", reason, false))
	})
}

func FuzzDecodeGrantBody(f *testing.F) {
	f.Add([]byte(`{"scope":{"tool":"move_base_to","rect":{"min_x":0,"min_y":0,"max_x":2,"max_y":2}},"ttl":"5m"}`))
	f.Add([]byte(`{"robot_id":"amr-7","scope":{"tool":"release"},"ttl":"5m"}`))
	cfg := loadConfig(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := decodeGrantBody(b)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		require.Positive(t, spec.TTL)
		checkScope(t, cfg, spec.Scope, "scope")
	})
}

// checkScope compiles a decoded scope and, when it is valid, checks a few
// calls against it: no panic, and a refusal always names its bound.
func checkScope(t *testing.T, cfg *hwconfig.Config, sc Scope, prefix string) {
	t.Helper()
	b, err := compileScope(cfg, sc, prefix)
	if err != nil {
		requireInvalid(t, err)
		return
	}
	for _, args := range []map[string]any{
		nil,
		{"pose": "ready"},
		{"joints": map[string]any{}},
		{"x": 1.0, "y": 1.0},
		{"location": "table"},
		{"object_id": "red_cup"},
		{"x": "1"},
	} {
		if r := b.contains(args, func(string) (string, bool) { return "cup", true }); r != nil {
			require.Equal(t, CauseOutsideBounds, r.Cause)
			require.NotEmpty(t, r.Bound)
		}
	}
}

// FuzzAuthorizeArgs feeds the gate arbitrary tool arguments (they come
// from the model) against grants of every bounded kind.
func FuzzAuthorizeArgs(f *testing.F) {
	f.Add("move_base_to", []byte(`{"x":1,"y":1}`))
	f.Add("move_arm_to", []byte(`{"pose":"ready"}`))
	f.Add("grasp", []byte(`{"object_id":"red_cup"}`))
	fx := newFixture(f)
	var grants []string
	for _, sc := range []Scope{
		{Tool: ToolMoveBase, Region: [][]float64{{0, 0}, {2, 0}, {1, 2}}},
		{Tool: ToolMoveArm, Poses: []string{"ready"}},
		{Tool: ToolGrasp, Objects: []string{"red_cup"}, Labels: []string{"bottle"}},
		{Tool: ToolRelease},
	} {
		g, err := fx.svc.CreateGrant(f.Context(), "alice", sc, time.Minute)
		require.NoError(f, err)
		grants = append(grants, g.ID)
	}
	f.Fuzz(func(t *testing.T, tool string, raw []byte) {
		var args map[string]any
		if json.Unmarshal(raw, &args) != nil {
			return
		}
		for _, g := range grants {
			u := fx.use(g, "task-1", tool, args)
			if err := fx.svc.Authorize(u); err != nil {
				require.ErrorIs(t, err, safety.ErrNotAuthorized)
			}
		}
	})
}
