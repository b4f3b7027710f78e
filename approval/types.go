package approval

import (
	"slices"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
)

// Status is where an approval request is in its life: pending until exactly
// one of the four final statuses replaces it.
type Status string

// The statuses of an approval request.
const (
	StatusPending   Status = "pending"
	StatusApproved  Status = "approved"
	StatusDenied    Status = "denied"
	StatusExpired   Status = "expired"
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusPending, StatusApproved, StatusDenied, StatusExpired, StatusCancelled}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	return slices.Contains(Statuses, s)
}

// String implements fmt.Stringer.
func (s Status) String() string { return string(s) }

// Approval is one approval request as the operator sees it: what the agent
// asked, why it needs deciding, and — once decided — who decided, when and
// why. Values handed out are snapshots; Arguments is shared with the
// service and must not be modified.
type Approval struct {
	ID     string `json:"id"`
	TaskID string `json:"task_id,omitempty"`
	Tool   string `json:"tool"`
	// Arguments are the tool call's arguments as the agent sent them (after
	// schema validation).
	Arguments map[string]any `json:"arguments"`
	// ArgsHash is safety.ArgsHash(Tool, Arguments): what an approve-once
	// grant binds to.
	ArgsHash string `json:"args_hash"`
	RobotID  string `json:"robot_id"`
	// Preview says in words what will happen.
	Preview string `json:"preview"`
	// Target is the base goal in the room frame, for the console map.
	Target *robot.Pose2D `json:"target,omitempty"`
	// RobotState summarises the robot when the request was made.
	RobotState  string    `json:"robot_state,omitempty"`
	Status      Status    `json:"status"`
	RequestedBy string    `json:"requested_by"`
	SessionID   string    `json:"session_id,omitempty"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	// DecidedAt, DecidedBy and Reason record the decision: the operator (or
	// "system" for an expiry, the requester for a withdrawal), and their
	// words — verbatim for a denial.
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	DecidedBy string     `json:"decided_by,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	// GrantID is the grant that authorizes the task's motion: the
	// approve-once grant made by the approval, or the scoped grant that
	// covered the request.
	GrantID string `json:"grant_id,omitempty"`
	// ScopedGrantID is the scoped grant the operator created along with
	// the approval, if any.
	ScopedGrantID string `json:"scoped_grant_id,omitempty"`
}

// Pending reports whether the request still waits for a decision.
func (a Approval) Pending() bool { return a.Status == StatusPending }

// GrantKind tells approve-once grants from scoped ones.
type GrantKind string

// Grant kinds.
const (
	// GrantOnce authorizes exactly one tool call (tool + argument hash +
	// robot) for one task.
	GrantOnce GrantKind = "once"
	// GrantScoped authorizes any call of one tool inside its bounds until
	// it expires or is revoked.
	GrantScoped GrantKind = "scoped"
)

// GrantStatus is a grant's state at the time of a snapshot.
type GrantStatus string

// Grant statuses.
const (
	GrantActive  GrantStatus = "active"
	GrantExpired GrantStatus = "expired"
	GrantRevoked GrantStatus = "revoked"
	// GrantUsed is an approve-once grant whose task has started: it
	// authorizes nothing else and is no longer listed as active.
	GrantUsed GrantStatus = "used"
)

// Grant is a permission to move, as the operator sees it.
type Grant struct {
	ID      string    `json:"id"`
	Kind    GrantKind `json:"kind"`
	Tool    string    `json:"tool"`
	RobotID string    `json:"robot_id"`
	// ArgsHash is the one call an approve-once grant authorizes.
	ArgsHash string `json:"args_hash,omitempty"`
	// ApprovalID is the request whose approval made (or came with) it.
	ApprovalID string `json:"approval_id,omitempty"`
	// Scope holds a scoped grant's bounds.
	Scope *Scope `json:"scope,omitempty"`
	// TaskID is the task an approve-once grant is bound to.
	TaskID    string      `json:"task_id,omitempty"`
	Status    GrantStatus `json:"status"`
	CreatedBy string      `json:"created_by"`
	CreatedAt time.Time   `json:"created_at,omitzero"`
	ExpiresAt time.Time   `json:"expires_at,omitzero"`
	RevokedAt *time.Time  `json:"revoked_at,omitempty"`
	RevokedBy string      `json:"revoked_by,omitempty"`
	// RevokeReason is the operator's reason for revoking (or deleting) the
	// grant, if they gave one; it reaches the agent whose motion stopped.
	RevokeReason string `json:"revoke_reason,omitempty"`
	// Description says in words what the grant allows, for the console.
	Description string `json:"description"`
}

// Scope is the bounds of a scoped grant. Which bounds apply depends on the
// tool:
//
//   - move_arm_to: Poses, the named arm poses it may move to (required); a
//     call giving raw joints is outside such a scope.
//   - move_base_to: Region (a polygon of [x, y] vertices) or Rect, a
//     sub-region of the room frame the target must lie in (one of them
//     required); a location argument resolves through the hw-config's
//     named locations.
//   - grasp: Objects (object ids) and/or Labels (object labels, like
//     "cup"), optional; without them any object.
//   - any other tool: no bounds, the tool alone.
//
// A Rect is normalised to a Region when the grant is created.
type Scope struct {
	Tool    string      `json:"tool"`
	Poses   []string    `json:"poses,omitempty"`
	Region  [][]float64 `json:"region,omitempty"`
	Rect    *Rect       `json:"rect,omitempty"`
	Objects []string    `json:"objects,omitempty"`
	Labels  []string    `json:"labels,omitempty"`
}

// Rect is an axis-aligned rectangle in the room frame, metres.
type Rect struct {
	MinX float64 `json:"min_x"`
	MinY float64 `json:"min_y"`
	MaxX float64 `json:"max_x"`
	MaxY float64 `json:"max_y"`
}

// GrantEnd says that a grant stopped being usable, and why: what
// Conf.GrantEnded is told. RobotID is the grant's robot, whose supervisor
// must stop the motion running on it. By is the operator who revoked (or
// deleted) it and Reason their reason, if any; for an expiry By is
// SystemActor, Expired is set and Reason says when the time ran out.
type GrantEnd struct {
	GrantID string
	RobotID string
	By      string
	Reason  string
	Expired bool
}

// EventType names what happened.
type EventType string

// Event types, as the console's event stream names them.
const (
	EventApprovalCreated   EventType = "approval.created"
	EventApprovalApproved  EventType = "approval.approved"
	EventApprovalDenied    EventType = "approval.denied"
	EventApprovalExpired   EventType = "approval.expired"
	EventApprovalCancelled EventType = "approval.cancelled"
	EventGrantCreated      EventType = "grant.created"
	EventGrantRevoked      EventType = "grant.revoked"
	EventGrantExpired      EventType = "grant.expired"
	// EventGrantUsed: an approve-once grant's task started, so the grant
	// authorizes nothing new from now on (status used).
	EventGrantUsed EventType = "grant.used"
)

// String implements fmt.Stringer.
func (t EventType) String() string { return string(t) }

// Event is one change, with a snapshot of the approval or grant after it.
type Event struct {
	Type     EventType `json:"type"`
	Time     time.Time `json:"time,omitzero"`
	Approval *Approval `json:"approval,omitempty"`
	Grant    *Grant    `json:"grant,omitempty"`
}
