package grpcapi

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robot-bridge/robot-bridge/approval"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/safety"
)

// timestamp is t in protobuf; a zero time is absent, as omitzero leaves it
// out of the HTTP API's JSON.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timestampPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamp(*t)
}

// ApprovalToProto converts an approval request as the operator API lists
// it. It fails only when the arguments hold something no JSON encoder
// could write.
func ApprovalToProto(a approval.Approval) (*robotbridgev1.Approval, error) {
	args, err := structOf(a.Arguments)
	if err != nil {
		return nil, fmt.Errorf("approval %s: arguments: %w", a.ID, err)
	}
	out := &robotbridgev1.Approval{
		Id: a.ID, TaskId: a.TaskID, Tool: a.Tool, Arguments: args, ArgsHash: a.ArgsHash, RobotId: a.RobotID,
		Preview: a.Preview, RobotState: a.RobotState, Status: string(a.Status), RequestedBy: a.RequestedBy,
		SessionId: a.SessionID, CreatedAt: timestamp(a.CreatedAt), ExpiresAt: timestamp(a.ExpiresAt),
		DecidedAt: timestampPtr(a.DecidedAt), DecidedBy: a.DecidedBy, Reason: a.Reason, GrantId: a.GrantID,
		ScopedGrantId: a.ScopedGrantID,
	}
	if t := a.Target; t != nil {
		out.Target = &robotbridgev1.Pose2D{X: t.X, Y: t.Y, Theta: t.Theta}
	}
	return out, nil
}

// GrantToProto converts a grant as the operator API lists it.
func GrantToProto(g approval.Grant) *robotbridgev1.Grant {
	return &robotbridgev1.Grant{
		Id: g.ID, Kind: string(g.Kind), Tool: g.Tool, RobotId: g.RobotID, ArgsHash: g.ArgsHash, ApprovalId: g.ApprovalID,
		Scope: ScopeToProto(g.Scope), TaskId: g.TaskID, Status: string(g.Status), CreatedBy: g.CreatedBy,
		CreatedAt: timestamp(g.CreatedAt), ExpiresAt: timestamp(g.ExpiresAt), RevokedAt: timestampPtr(g.RevokedAt),
		RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason, Description: g.Description,
	}
}

// ScopeToProto converts a grant's bounds; nil stays nil. A region vertex
// the approval service normalised is always a pair.
func ScopeToProto(sc *approval.Scope) *robotbridgev1.Scope {
	if sc == nil {
		return nil
	}
	out := &robotbridgev1.Scope{Tool: sc.Tool, Poses: sc.Poses, Objects: sc.Objects, Labels: sc.Labels}
	for _, v := range sc.Region {
		p := &robotbridgev1.Point2{}
		if len(v) > 0 {
			p.X = v[0]
		}
		if len(v) > 1 {
			p.Y = v[1]
		}
		out.Region = append(out.Region, p)
	}
	if r := sc.Rect; r != nil {
		out.Rect = &robotbridgev1.Rect{MinX: r.MinX, MinY: r.MinY, MaxX: r.MaxX, MaxY: r.MaxY}
	}
	return out
}

// ScopeFromProto converts bounds an operator sent, as the HTTP API's JSON
// decoder would: the approval service validates them against the robot.
func ScopeFromProto(sc *robotbridgev1.Scope) approval.Scope {
	out := approval.Scope{Tool: sc.GetTool(), Poses: sc.GetPoses(), Objects: sc.GetObjects(), Labels: sc.GetLabels()}
	for _, p := range sc.GetRegion() {
		out.Region = append(out.Region, []float64{p.GetX(), p.GetY()})
	}
	if r := sc.GetRect(); r != nil {
		out.Rect = &approval.Rect{MinX: r.GetMinX(), MinY: r.GetMinY(), MaxX: r.GetMaxX(), MaxY: r.GetMaxY()}
	}
	return out
}

func estopToProto(e safety.EStopStatus) *robotbridgev1.EStopStatus {
	return &robotbridgev1.EStopStatus{Active: new(e.Active), By: e.By, Reason: e.Reason, Since: timestamp(e.Since)}
}

func faultToProto(f safety.FaultStatus) *robotbridgev1.FaultStatus {
	return &robotbridgev1.FaultStatus{
		Latched: new(f.Latched), Reason: f.Reason, TaskId: f.TaskID, Since: timestamp(f.Since),
		What: f.What, RobotDid: f.RobotDid, Check: f.Check,
	}
}
