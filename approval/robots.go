package approval

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Robot is one robot the service decides for. A fleet bridge gives the
// service every robot of its hw-config (Conf.Robots); a one-robot bridge
// gives it none and the service builds the one robot from Conf.Config,
// Conf.Objects and Conf.Latched.
type Robot struct {
	// ID is the robot's id (optional). It defaults to Config.Robot.ID and,
	// when given, must be that id.
	ID string
	// Config is the robot's own hw-config (required): its approval TTL,
	// max grant TTL, the actions that need approval and the named
	// locations and poses its scopes are checked against. Robots of one
	// fleet share tools and names, but coordinates and limits may differ,
	// which is why each scope is compiled against its robot's config.
	Config *hwconfig.Config
	// Objects (optional) resolves the robot's object ids to labels, as
	// Conf.Objects does for one robot.
	Objects actions.Objects
	// Latched (optional) reports the robot's e-stop and fault latches, as
	// Conf.Latched does for one robot, with the same locking rules. Only
	// this robot's requests and approvals consult it: robot A's e-stop
	// does not stop an operator approving robot B's request.
	Latched func() error
}

// MaxListedRobots is how many robot ids an error lists before it says
// how many more there are: a message naming a thousand robots helps
// nobody.
const MaxListedRobots = 20

// JoinRobotIDs lists ids for an error message: at most MaxListedRobots of
// them, then "… and K more".
func JoinRobotIDs(ids []string) string {
	if len(ids) <= MaxListedRobots {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s … and %d more", strings.Join(ids[:MaxListedRobots], ", "), len(ids)-MaxListedRobots)
}

// robotState is one robot's settings, fixed at New.
type robotState struct {
	id          string
	cfg         *hwconfig.Config
	objects     actions.Objects
	simLabels   map[string]string
	latched     func() error
	approvalTTL time.Duration
	maxGrantTTL time.Duration
	onceTTL     time.Duration
}

// newRobotState validates one robot and fills its defaults; name says
// which robot in an error ("Conf.Robots[2]").
func newRobotState(name string, r Robot, onceTTL time.Duration) (*robotState, error) {
	if r.Config == nil {
		return nil, fmt.Errorf("approval: %s.Config is required", name)
	}
	id := r.Config.Robot.ID
	switch {
	case id == "":
		return nil, fmt.Errorf("approval: %s.Config.Robot.ID is empty", name)
	case r.ID != "" && r.ID != id:
		return nil, fmt.Errorf("approval: %s.ID is %q but its config is robot %q", name, r.ID, id)
	}
	rs := &robotState{
		id: id, cfg: r.Config, objects: r.Objects, simLabels: map[string]string{}, latched: r.Latched,
		approvalTTL: r.Config.Safety.ApprovalTTL.D(), maxGrantTTL: r.Config.Safety.MaxGrantTTL.D(), onceTTL: onceTTL,
	}
	switch {
	case rs.approvalTTL < 0:
		return nil, fmt.Errorf("approval: %sConfig.Safety.ApprovalTTL is negative (%s)", robotPrefix(name), rs.approvalTTL)
	case rs.approvalTTL == 0:
		rs.approvalTTL = DefaultApprovalTTL
	}
	switch {
	case rs.maxGrantTTL < 0:
		return nil, fmt.Errorf("approval: %sConfig.Safety.MaxGrantTTL is negative (%s)", robotPrefix(name), rs.maxGrantTTL)
	case rs.maxGrantTTL == 0:
		rs.maxGrantTTL = DefaultMaxGrantTTL
	}
	if rs.onceTTL == 0 {
		rs.onceTTL = rs.approvalTTL
	}
	if r.Config.Sim != nil {
		for _, o := range r.Config.Sim.Objects {
			rs.simLabels[o.ID] = o.Label
		}
	}
	return rs, nil
}

// robotPrefix keeps the one-robot errors worded as they always were
// ("Config.Safety…"), and names the robot in a fleet's.
func robotPrefix(name string) string {
	if name == "Conf" {
		return ""
	}
	return name + "."
}

// latchedLocked asks the robot's Latched. Caller holds decideMu.
func (r *robotState) latchedLocked() error {
	if r.latched == nil {
		return nil
	}
	return r.latched()
}

// labelOf resolves an object's label through the robot's Objects, then the
// simulator's objects in its config.
func (r *robotState) labelOf(id string) (string, bool) {
	if r.objects != nil {
		if info, err := r.objects.Lookup(context.Background(), id); err == nil && info.Label != "" {
			return info.Label, true
		}
	}
	l, ok := r.simLabels[id]
	return l, ok
}

func (r *robotState) expiryReason() string {
	return "no operator decided within " + robot.FormatAge(r.approvalTTL)
}

// Robots returns the ids of the robots the service decides for, in
// config order.
func (s *Service) Robots() []string {
	out := make([]string, len(s.robots))
	for i, r := range s.robots {
		out[i] = r.id
	}
	return out
}

// HasRobot reports whether id is one of the service's robots.
func (s *Service) HasRobot(id string) bool {
	_, ok := s.byID[id]
	return ok
}

// robotFor resolves the robot_id an operator sent: empty names the one
// robot of a one-robot service and is refused when there are several. An
// unknown or missing id is an *InvalidError on field that lists the ids.
func (s *Service) robotFor(field, id string) (*robotState, error) {
	if id == "" {
		if len(s.robots) == 1 {
			return s.robots[0], nil
		}
		return nil, invalid(field, "required: this bridge serves %d robots, so say which one (robots: %s)", len(s.robots), JoinRobotIDs(s.Robots()))
	}
	if r, ok := s.byID[id]; ok {
		return r, nil
	}
	return nil, invalid(field, "unknown robot %q (robots: %s)", id, JoinRobotIDs(s.Robots()))
}

// CheckRobotFilter validates a robot filter of a listing: empty (every
// robot) or one of the service's robots. A bad one is an *InvalidError on
// field that lists the ids.
func (s *Service) CheckRobotFilter(field, id string) error {
	if id == "" || s.HasRobot(id) {
		return nil
	}
	return invalid(field, "unknown robot %q (robots: %s)", id, JoinRobotIDs(s.Robots()))
}

// RobotApprover is the approval service as one robot's action runner uses
// it (Service.Robot): it implements actions.Approver and
// actions.BulkWithdrawer for that robot alone, so the runner's
// withdraw-everything on an e-stop withdraws only its robot's pending
// requests, and a request it files is always for its robot.
type RobotApprover struct {
	s *Service
	r *robotState
}

var (
	_ actions.Approver       = (*RobotApprover)(nil)
	_ actions.BulkWithdrawer = (*RobotApprover)(nil)
)

// Robot returns the approver of one robot, for that robot's action
// runner. An unknown id is an error listing the ids.
func (s *Service) Robot(id string) (*RobotApprover, error) {
	r, ok := s.byID[id]
	if !ok {
		return nil, fmt.Errorf("approval: unknown robot %q (robots: %s)", id, JoinRobotIDs(s.Robots()))
	}
	return &RobotApprover{s: s, r: r}, nil
}

// ID is the robot's id.
func (a *RobotApprover) ID() string { return a.r.id }

// Request implements actions.Approver: Service.Request for this robot. A
// request without a robot id is this robot's; one naming another robot is
// refused, because a runner files requests for its own robot only.
func (a *RobotApprover) Request(ctx context.Context, r actions.ApprovalRequest) (string, <-chan actions.Decision, error) {
	if r.RobotID == "" {
		r.RobotID = a.r.id
	}
	if r.RobotID != a.r.id {
		return "", nil, toolerr.New(toolerr.Internal, "approval request for robot %q sent to the approver of robot %q", r.RobotID, a.r.id).Wrap(ErrInvalid)
	}
	return a.s.Request(ctx, r)
}

// Withdraw implements actions.Approver: Service.Withdraw, for a request of
// this robot only. Another robot's request is left as it is (and logged):
// a runner withdraws its own tasks' requests, never its neighbour's.
func (a *RobotApprover) Withdraw(approvalID, reason string) {
	a.s.withdrawOf(a.r.id, approvalID, reason)
}

// WithdrawAll implements actions.BulkWithdrawer: every pending request of
// this robot is withdrawn (Service.WithdrawRobot), the other robots'
// stay pending.
func (a *RobotApprover) WithdrawAll(reason string) int { return a.s.WithdrawRobot(a.r.id, reason) }
