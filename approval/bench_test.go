package approval

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
)

// BenchmarkAuthorize is the gate's cost per motion command. The baseline
// sub-benchmark is safety.ArgsHash alone, which the supervisor pays per
// command anyway; "hash_in_authorize" is a Use without ArgsHash, so the
// service computes it.
func BenchmarkAuthorize(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	args := moveBase(1, 1)

	id, ch := f.request(b, "task-1", ToolMoveBase, args)
	if _, err := f.svc.Approve(ctx, id, "alice", ApproveOptions{}); err != nil {
		b.Fatal(err)
	}
	once := (<-ch).GrantID
	region, err := f.svc.CreateGrant(ctx, "alice", Scope{Tool: ToolMoveBase, Region: [][]float64{{0, 0}, {2, 0}, {2, 2}, {1, 3}, {0, 2}}}, 30*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	poses, err := f.svc.CreateGrant(ctx, "alice", Scope{Tool: ToolMoveArm, Poses: []string{"ready", "stowed"}}, 30*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	// Some dead weight: other grants in the map.
	for range 100 {
		if _, err := f.svc.CreateGrant(ctx, "alice", Scope{Tool: ToolRelease}, time.Minute); err != nil {
			b.Fatal(err)
		}
	}

	cases := []struct {
		name string
		u    safety.Use
		ok   bool
	}{
		{"once_bound", f.use(once, "task-1", ToolMoveBase, args), true},
		{"scoped_region", f.use(region.ID, "task-1", ToolMoveBase, args), true},
		{"scoped_poses", f.use(poses.ID, "task-1", ToolMoveArm, map[string]any{"pose": "ready"}), true},
		{"refused_outside", f.use(region.ID, "task-1", ToolMoveBase, moveBase(5, 5)), false},
		{"refused_other_task", f.use(once, "task-9", ToolMoveBase, args), false},
	}
	b.Run("baseline_argshash", func(b *testing.B) {
		for b.Loop() {
			_ = safety.ArgsHash(ToolMoveBase, args)
		}
	})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f.svc.Authorize(tc.u); (err == nil) != tc.ok {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("hash_in_authorize", func(b *testing.B) {
		u := f.use(once, "task-1", ToolMoveBase, args)
		u.ArgsHash = ""
		for b.Loop() {
			if err := f.svc.Authorize(u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("once_bound_parallel", func(b *testing.B) {
		u := cases[0].u
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := f.svc.Authorize(u); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkRequestToEvent measures the time from Request being called to
// the approval.created event arriving at a subscriber on another
// goroutine, as the console's SSE stream receives it; it reports p50 and
// p99 next to ns/op.
func BenchmarkRequestToEvent(b *testing.B) {
	f := newFixture(b, func(c *Conf) { c.History = 64 })
	events, stop := f.svc.Subscribe()
	defer stop()
	got := make(chan time.Time, 1)
	go func() {
		for ev := range events {
			if ev.Type == EventApprovalCreated {
				got <- time.Now()
			}
		}
	}()
	req := actions.ApprovalRequest{
		TaskID: "task-1", Tool: ToolMoveBase, Arguments: moveBase(1, 2),
		Preview: "move the base 2.2 m to (1.0, 2.0)", RequestedBy: "agent",
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		id, _, err := f.svc.Request(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(start))
		f.svc.Withdraw(id, "")
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
}
