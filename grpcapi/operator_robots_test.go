package grpcapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// startFleetOperator is startOperator over an approval service of the
// robots ids, all on the default config.
func startFleetOperator(t *testing.T, ids ...string) *opServer {
	t.Helper()
	return startOperator(t, func(c *approval.Conf) {
		c.Robots = nil
		for _, id := range ids {
			rc := c.Config.Clone()
			rc.Robot.ID = id
			c.Robots = append(c.Robots, approval.Robot{Config: rc})
		}
		c.Config, c.Latched = nil, nil
	}, nil)
}

// requireRobotRefusal checks an INVALID_ARGUMENT (INVALID_PARAMS) refusal
// of robot_id with msg, and that no latch was touched.
func requireRobotRefusal(t *testing.T, s *opServer, err error, msg string) {
	t.Helper()
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "err: %v", err)
	e, _ := errorDetail(t, err)
	require.Equal(t, robotbridgev1.ErrorType_INVALID_PARAMS, e.GetType())
	require.Equal(t, msg, e.GetMessage())
	require.NotEmpty(t, e.GetSuggestion())
	require.Empty(t, s.latches.recorded(), "a refused robot_id reached the latches")
}

func TestOperatorService_EStopOfAFleet(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto+"/without robot_id every robot is pressed", func(t *testing.T) {
			// Given a bridge of two robots
			s := startFleetOperator(t, "amr-a", "amr-b")
			// When the operator presses the e-stop naming no robot
			resp, err := s.client(proto).EStop(context.Background(), request(&robotbridgev1.EStopRequest{Reason: "a person on the floor"}, operatorToken))
			require.NoError(t, err)
			// Then every robot's e-stop is pressed, in one call
			require.Equal(t, []string{AllRobots}, s.latches.recordedTargets())
			require.Equal(t, []string{"estop by operator: a person on the floor"}, s.latches.recorded())
			// And the answer is per robot, with a sentence over all
			robots := resp.Msg.GetRobots()
			require.Len(t, robots, 2)
			for i, id := range []string{"amr-a", "amr-b"} {
				require.Equal(t, id, robots[i].GetRobotId())
				require.True(t, robots[i].GetEstop().GetActive())
				require.Equal(t, "operator", robots[i].GetEstop().GetBy())
				require.Contains(t, robots[i].GetText(), "LATCHED")
			}
			require.Nil(t, resp.Msg.GetEstop(), "several robots have no one latch")
			require.Empty(t, resp.Msg.GetRobotId())
			require.Equal(t, "2 of 2 robots changed.", resp.Msg.GetText())
			require.Empty(t, resp.Msg.GetWarning())
		})
	}
	t.Run("* is every robot too", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		resp, err := s.client("grpc").EStop(context.Background(), request(&robotbridgev1.EStopRequest{RobotId: "*"}, operatorToken))
		require.NoError(t, err)
		require.Equal(t, []string{AllRobots}, s.latches.recordedTargets())
		require.Len(t, resp.Msg.GetRobots(), 2)
	})
	t.Run("one robot's e-stop is that robot's", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		resp, err := s.client("grpc").EStop(context.Background(), request(&robotbridgev1.EStopRequest{RobotId: "amr-b"}, operatorToken))
		require.NoError(t, err)
		require.Equal(t, []string{"amr-b"}, s.latches.recordedTargets())
		require.Equal(t, "amr-b", resp.Msg.GetRobotId())
		require.True(t, resp.Msg.GetEstop().GetActive())
		require.Empty(t, resp.Msg.GetRobots())
	})
	t.Run("a robot nobody can place stops every robot", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		resp, err := s.client("grpc").EStop(context.Background(), request(&robotbridgev1.EStopRequest{RobotId: "amr-7"}, operatorToken))
		require.NoError(t, err, "an e-stop is never refused")
		require.Equal(t, []string{AllRobots}, s.latches.recordedTargets())
		require.Equal(t, []string{`estop by operator: e-stop pressed (robot_id "amr-7" is not served here: every robot is stopped)`}, s.latches.recorded())
		require.Len(t, resp.Msg.GetRobots(), 2)
	})
	t.Run("a one-robot bridge answers as it always did", func(t *testing.T) {
		s := startOperator(t, nil, nil)
		resp, err := s.client("grpc").EStop(context.Background(), request(&robotbridgev1.EStopRequest{}, operatorToken))
		require.NoError(t, err)
		require.Equal(t, []string{AllRobots}, s.latches.recordedTargets())
		require.True(t, resp.Msg.GetEstop().GetActive())
		require.Empty(t, resp.Msg.GetRobotId())
		require.Empty(t, resp.Msg.GetRobots())
	})
	t.Run("a stop not delivered and a latch not recorded are said per robot", func(t *testing.T) {
		// Given robot B's stop command cannot be sent, and its latch not
		// recorded
		s := startFleetOperator(t, "amr-a", "amr-b")
		s.latches.EStopFn = func(id, by, reason string) LatchResult {
			r := LatchResult{Status: safety.Status{RobotID: id, EStop: safety.EStopStatus{Active: true, By: by, Reason: reason}}, Text: "e-stop LATCHED."}
			if id == "amr-b" {
				r.StopWarning = "the stop command could not be sent: link down"
				r.NotRecorded = toolerr.New(toolerr.Unavailable, "the e-stop is latched and in force, but it is not recorded: disk full")
			}
			return r
		}
		// When every robot is pressed
		_, err := s.client("grpc").EStop(context.Background(), request(&robotbridgev1.EStopRequest{}, operatorToken))
		// Then it is UNAVAILABLE with the bridge's words, and the
		// answer rides along saying which robot was not sent the stop
		require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
		e, more := errorDetail(t, err)
		require.Contains(t, e.GetMessage(), "not recorded: disk full")
		require.Len(t, more, 1)
		out, ok := more[0].(*robotbridgev1.EStopResponse)
		require.True(t, ok, "detail: %T", more[0])
		require.Equal(t, "The stop command could not be delivered to 1 robots (amr-b); their e-stop is latched all the same.", out.GetWarning())
		require.Contains(t, out.GetText(), out.GetWarning())
		require.Equal(t, "the stop command could not be sent: link down", out.GetRobots()[1].GetWarning())
		require.True(t, out.GetRobots()[1].GetEstop().GetActive())
	})
}

func TestOperatorService_ResetAndClearOfAFleet(t *testing.T) {
	reset := func(ctx context.Context, c opClient, id string) error {
		_, err := c.ResetEStop(ctx, request(&robotbridgev1.ResetEStopRequest{RobotId: id}, operatorToken))
		return err
	}
	clearFault := func(ctx context.Context, c opClient, id string) error {
		_, err := c.ClearFault(ctx, request(&robotbridgev1.ClearFaultRequest{RobotId: id}, operatorToken))
		return err
	}
	for _, proto := range protocols {
		for name, tc := range map[string]struct {
			call func(context.Context, opClient, string) error
			what string
		}{"reset": {reset, "e-stop reset"}, "clear": {clearFault, "fault clear"}} {
			t.Run(proto+"/"+name+" without robot_id is refused, listing the robots", func(t *testing.T) {
				s := startFleetOperator(t, "amr-a", "amr-b")
				err := tc.call(context.Background(), s.client(proto), "")
				requireRobotRefusal(t, s, err, "robot_id: required for the "+tc.what+": this bridge serves 2 robots, so say which one (robots: amr-a, amr-b).")
			})
			t.Run(proto+"/"+name+" of an unknown robot is refused", func(t *testing.T) {
				s := startFleetOperator(t, "amr-a", "amr-b")
				err := tc.call(context.Background(), s.client(proto), "amr-7")
				requireRobotRefusal(t, s, err, `robot_id: unknown robot "amr-7" (robots: amr-a, amr-b).`)
			})
			t.Run(proto+"/"+name+" of one robot reaches that robot", func(t *testing.T) {
				s := startFleetOperator(t, "amr-a", "amr-b")
				require.NoError(t, tc.call(context.Background(), s.client(proto), "amr-b"))
				require.Equal(t, []string{"amr-b"}, s.latches.recordedTargets())
			})
			t.Run(proto+"/"+name+" of * reaches every robot", func(t *testing.T) {
				s := startFleetOperator(t, "amr-a", "amr-b")
				require.NoError(t, tc.call(context.Background(), s.client(proto), AllRobots))
				require.Equal(t, []string{AllRobots}, s.latches.recordedTargets())
			})
			t.Run(proto+"/"+name+" on a one-robot bridge needs no robot_id", func(t *testing.T) {
				s := startOperator(t, nil, nil)
				require.NoError(t, tc.call(context.Background(), s.client(proto), ""))
				require.Equal(t, []string{s.cfg.Robot.ID}, s.latches.recordedTargets())
			})
		}
	}

	t.Run("a reset of one robot answers with its latch and id", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		resp, err := s.client("grpc").ResetEStop(context.Background(), request(&robotbridgev1.ResetEStopRequest{RobotId: "amr-a"}, operatorToken))
		require.NoError(t, err)
		require.Equal(t, "amr-a", resp.Msg.GetRobotId())
		require.NotNil(t, resp.Msg.GetEstop().Active)
		require.False(t, resp.Msg.GetEstop().GetActive())
		require.Equal(t, "e-stop not active.", resp.Msg.GetText())
	})
	t.Run("a clear of every robot answers per robot", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		resp, err := s.client("grpc").ClearFault(context.Background(), request(&robotbridgev1.ClearFaultRequest{RobotId: "*"}, operatorToken))
		require.NoError(t, err)
		require.Nil(t, resp.Msg.GetFault())
		require.Equal(t, "2 of 2 robots changed.", resp.Msg.GetText())
		require.Len(t, resp.Msg.GetRobots(), 2)
		require.Equal(t, "amr-b", resp.Msg.GetRobots()[1].GetRobotId())
		require.False(t, resp.Msg.GetRobots()[1].GetFault().GetLatched())
	})
	t.Run("a reset of every robot that one refuses is never OK", func(t *testing.T) {
		// Given robot B's own e-stop is still engaged
		s := startFleetOperator(t, "amr-a", "amr-b")
		s.latches.ResetEStopFn = func(id, _ string) (LatchResult, error) {
			if id == "amr-b" {
				return LatchResult{}, toolerr.New(toolerr.EStopActive, "the robot's own e-stop is still engaged; release it on the robot before resetting")
			}
			return LatchResult{Status: safety.Status{RobotID: id}, Text: "e-stop not active."}, nil
		}
		// When the operator resets every robot
		_, err := s.client("grpc").ResetEStop(context.Background(), request(&robotbridgev1.ResetEStopRequest{RobotId: "*"}, operatorToken))
		// Then it is FAILED_PRECONDITION (CONFLICT), and the answer says
		// robot A was reset and why robot B was not
		require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
		e, more := errorDetail(t, err)
		require.Equal(t, robotbridgev1.ErrorType_CONFLICT, e.GetType())
		require.Equal(t, "1 of 2 robots refused the e-stop reset; each refusal says why, and those robots are as they were.", e.GetMessage())
		require.Len(t, more, 1)
		out, ok := more[0].(*robotbridgev1.ResetEStopResponse)
		require.True(t, ok, "detail: %T", more[0])
		require.Equal(t, "1 of 2 robots changed. 1 refused; each refusal says why, and those robots are as they were.", out.GetText())
		require.Equal(t, "amr-a", out.GetRobots()[0].GetRobotId())
		require.Nil(t, out.GetRobots()[0].GetError())
		require.Equal(t, "amr-b", out.GetRobots()[1].GetRobotId())
		require.Equal(t, robotbridgev1.ErrorType_ESTOP_ACTIVE, out.GetRobots()[1].GetError().GetType())
		require.Contains(t, out.GetRobots()[1].GetError().GetMessage(), "release it on the robot")
	})
	t.Run("one robot's refusal is its own error", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		s.latches.ClearFaultFn = func(string, string) (LatchResult, error) {
			return LatchResult{}, toolerr.New(toolerr.Conflict, "the fault cannot be cleared while the robot is unreachable")
		}
		_, err := s.client("grpc").ClearFault(context.Background(), request(&robotbridgev1.ClearFaultRequest{RobotId: "amr-a"}, operatorToken))
		require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
		e, _ := errorDetail(t, err)
		require.Equal(t, "the fault cannot be cleared while the robot is unreachable.", e.GetMessage())
	})
	t.Run("a change that reached no robot is not a success", func(t *testing.T) {
		s := startFleetOperator(t, "amr-a", "amr-b")
		s.latches.mu.Lock()
		s.latches.robots = nil // "*" reaches nobody: a bridge bug
		s.latches.mu.Unlock()
		_, err := s.client("grpc").ResetEStop(context.Background(), request(&robotbridgev1.ResetEStopRequest{RobotId: "*"}, operatorToken))
		require.Equal(t, connect.CodeInternal, connect.CodeOf(err))
		_, err = s.client("grpc").EStop(context.Background(), request(&robotbridgev1.EStopRequest{}, operatorToken))
		require.Equal(t, connect.CodeInternal, connect.CodeOf(err))
	})
}

// opClient is the operator's client, for tables of calls.
type opClient = interface {
	ResetEStop(context.Context, *connect.Request[robotbridgev1.ResetEStopRequest]) (*connect.Response[robotbridgev1.ResetEStopResponse], error)
	ClearFault(context.Context, *connect.Request[robotbridgev1.ClearFaultRequest]) (*connect.Response[robotbridgev1.ClearFaultResponse], error)
}

func TestOperatorService_ManyRobotsAreListedTwentyAtMost(t *testing.T) {
	var ids []string
	for i := range 23 {
		ids = append(ids, fmt.Sprintf("amr-%02d", i))
	}
	s := startFleetOperator(t, ids...)
	_, err := s.client("grpc").ResetEStop(context.Background(), request(&robotbridgev1.ResetEStopRequest{}, operatorToken))
	requireRobotRefusal(t, s, err, "robot_id: required for the e-stop reset: this bridge serves 23 robots, so say which one (robots: "+
		strings.Join(ids[:20], ", ")+" … and 3 more).")
}

func TestOperatorService_GrantsAndListsOfAFleet(t *testing.T) {
	s := startFleetOperator(t, "amr-a", "amr-b")
	c := s.client("grpc")
	ctx := context.Background()
	scope := &robotbridgev1.Scope{Tool: "move_arm_to", Poses: []string{"ready"}}

	// A grant names its robot: without one it is refused, listing them
	_, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{Scope: scope, Ttl: durationpb.New(time.Minute)}, operatorToken))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	e, _ := errorDetail(t, err)
	require.Equal(t, "robot_id: required: this bridge serves 2 robots, so say which one (robots: amr-a, amr-b).", e.GetMessage())
	require.Empty(t, s.svc.Grants())

	// With one it is that robot's, and authorizes no other
	resp, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{Scope: scope, Ttl: durationpb.New(time.Minute), RobotId: "amr-b"}, operatorToken))
	require.NoError(t, err)
	g := resp.Msg.GetGrant()
	require.Equal(t, "amr-b", g.GetRobotId())
	args := map[string]any{"pose": "ready"}
	use := safety.Use{GrantID: g.GetId(), TaskID: "t-a", Tool: "move_arm_to", Args: args, ArgsHash: safety.ArgsHash("move_arm_to", args), RobotID: "amr-a", Now: t0}
	require.ErrorIs(t, s.svc.Authorize(use), safety.ErrNotAuthorized)
	use.RobotID = "amr-b"
	require.NoError(t, s.svc.Authorize(use))

	// The lists show every robot, or the one asked for
	for _, id := range []string{"amr-a", "amr-b"} {
		_, _, err := s.svc.Request(ctx, actions.ApprovalRequest{TaskID: "t-" + id, Tool: "release", RobotID: id, RequestedBy: "agent"})
		require.NoError(t, err)
	}
	all, err := c.ListApprovals(ctx, request(&robotbridgev1.ListApprovalsRequest{}, operatorToken))
	require.NoError(t, err)
	require.Len(t, all.Msg.GetApprovals(), 2)
	one, err := c.ListApprovals(ctx, request(&robotbridgev1.ListApprovalsRequest{Status: "pending", RobotId: "amr-a"}, operatorToken))
	require.NoError(t, err)
	require.Len(t, one.Msg.GetApprovals(), 1)
	require.Equal(t, "amr-a", one.Msg.GetApprovals()[0].GetRobotId())
	grants, err := c.ListGrants(ctx, request(&robotbridgev1.ListGrantsRequest{RobotId: "amr-a"}, operatorToken))
	require.NoError(t, err)
	require.Empty(t, grants.Msg.GetGrants())
	grants, err = c.ListGrants(ctx, request(&robotbridgev1.ListGrantsRequest{RobotId: "amr-b"}, operatorToken))
	require.NoError(t, err)
	require.Len(t, grants.Msg.GetGrants(), 1)

	// And an unknown robot is refused, naming the robots
	_, err = c.ListApprovals(ctx, request(&robotbridgev1.ListApprovalsRequest{RobotId: "amr-7"}, operatorToken))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	e, _ = errorDetail(t, err)
	require.Equal(t, `robot_id: unknown robot "amr-7" (robots: amr-a, amr-b).`, e.GetMessage())
	_, err = c.ListGrants(ctx, request(&robotbridgev1.ListGrantsRequest{RobotId: "amr-7"}, operatorToken))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
}
