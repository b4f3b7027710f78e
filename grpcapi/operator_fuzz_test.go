package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/events"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// FuzzCreateGrantRequest feeds arbitrary bytes to CreateGrant, an
// operator's scope and TTL from the wire, against the real approval
// service: it never panics; a grant it creates is for this robot and a
// tool it grants, with a TTL in (0, max_grant_ttl]; anything else is refused with
// a robotbridge.v1.Error of the closed set and creates nothing. Corpus:
// testdata/fuzz/FuzzCreateGrantRequest.
func FuzzCreateGrantRequest(f *testing.F) {
	seeds := []*robotbridgev1.CreateGrantRequest{
		{Scope: &robotbridgev1.Scope{Tool: "move_arm_to", Poses: []string{"ready", "stowed"}}, Ttl: durationpb.New(10 * time.Minute)},
		{Scope: &robotbridgev1.Scope{Tool: "move_base_to", Rect: &robotbridgev1.Rect{MinX: -1, MinY: -1, MaxX: 1, MaxY: 1}}, Ttl: durationpb.New(time.Minute)},
		{Scope: &robotbridgev1.Scope{Tool: "move_base_to", Region: []*robotbridgev1.Point2{{X: math.NaN()}, {X: 1}, {Y: math.Inf(1)}}}, Ttl: durationpb.New(time.Minute)},
		{Scope: &robotbridgev1.Scope{Tool: "grasp", Labels: []string{"cup"}}, Ttl: &durationpb.Duration{Seconds: -5}},
		{Scope: &robotbridgev1.Scope{Tool: "grasp"}, Ttl: &durationpb.Duration{Seconds: math.MaxInt64, Nanos: -1}},
		{Ttl: durationpb.New(time.Minute)},
		{Scope: &robotbridgev1.Scope{Tool: "release"}, Ttl: durationpb.New(time.Minute), RobotId: "sim-1"},
		{Scope: &robotbridgev1.Scope{Tool: "release"}, Ttl: durationpb.New(time.Minute), RobotId: "amr-7"},
		{},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req robotbridgev1.CreateGrantRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		svc, err := approval.New(approval.Conf{Config: cfg, Clock: clockwork.NewFakeClockAt(t0), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = svc.Close() }()
		op, err := NewOperator(OperatorConf{
			Approvals: svc, Latches: &fakeLatches{}, Events: events.New(1), Auth: testTokens, Logger: slog.New(slog.DiscardHandler),
			Snapshot: func(context.Context) (any, error) { return nil, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := toolapi.WithPrincipal(context.Background(), toolapi.Principal{Name: "operator", Role: toolapi.RoleOperator})
		resp, err := op.CreateGrant(ctx, connect.NewRequest(&req))
		if err != nil {
			var ce *connect.Error
			if !errors.As(err, &ce) || len(ce.Details()) == 0 {
				t.Fatalf("a refusal without its error detail: %v", err)
			}
			v, derr := ce.Details()[0].Value()
			e, ok := v.(*robotbridgev1.Error)
			if derr != nil || !ok || !slices.Contains(toolerr.Types(), ErrorTypeFromProto(e.GetType())) {
				t.Fatalf("a refusal whose detail is not an Error of the closed set: %v (%v)", v, derr)
			}
			if n := len(svc.Grants()); n != 0 {
				t.Fatalf("a refused grant left %d grants", n)
			}
			return
		}
		g := resp.Msg.GetGrant()
		if g.GetRobotId() != cfg.Robot.ID {
			t.Fatalf("a grant for robot %q on the bridge of robot %q", g.GetRobotId(), cfg.Robot.ID)
		}
		ttl := g.GetExpiresAt().AsTime().Sub(g.GetCreatedAt().AsTime())
		if ttl <= 0 || ttl > cfg.Safety.MaxGrantTTL.D() {
			t.Fatalf("grant %s lasts %s", g.GetId(), ttl)
		}
		if ac, ok := cfg.Actions[g.GetTool()]; !ok || ac.Approval == hwconfig.ApprovalNever {
			t.Fatalf("a grant for %q, which this robot does not grant", g.GetTool())
		}
	})
}
