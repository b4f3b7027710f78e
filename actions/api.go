package actions

import (
	"context"
	"time"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Request is one action-tool call whose arguments the tool API has already
// validated against the tool's JSON Schema.
type Request struct {
	Tool      string
	Arguments map[string]any
	// SessionID is the agent session that asked.
	SessionID string
	// Principal is who asked (the agent credential's name).
	Principal string
	// TraceID ties logs of one HTTP request together (optional).
	TraceID string
}

// Progress is how far a task has come: a fraction in [0, 1] and a short
// phrase without a full stop ("driving to table, 1.20 m to go"), which
// the tool API embeds in its own sentence.
type Progress struct {
	Fraction float64 `json:"fraction"`
	Text     string  `json:"text"`
}

// TaskView is a snapshot of one task, safe to hand out.
type TaskView struct {
	ID string `json:"id"`
	// RobotID is the robot the task is for (hw-config robot.id).
	RobotID   string         `json:"robot_id,omitempty"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	Status    fsm.State      `json:"status"`
	Progress  Progress       `json:"progress"`
	// Text says in words what happened so far, for the model: full
	// sentences, each ending with a full stop.
	Text string `json:"text"`
	// Result holds tool-specific output of a succeeded task.
	Result map[string]any `json:"result,omitempty"`
	// Error is set for every task that ended other than succeeded, and
	// says what recovery did and where the robot is now — except a task
	// whose cancel or stop someone asked for before the robot moved,
	// which is no failure: its Text says "cancelled before it moved" (a
	// grant revoked or run out before then keeps its APPROVAL_DENIED or
	// APPROVAL_EXPIRED error).
	Error *toolerr.Error `json:"-"`
	// Paused is set while an operator's pause holds the task (status
	// paused), nil otherwise.
	Paused *PauseView `json:"paused,omitempty"`
	// ApprovalID is the operator approval request, if one was made.
	ApprovalID string    `json:"approval_id,omitempty"`
	SessionID  string    `json:"session_id,omitempty"`
	Principal  string    `json:"requested_by,omitempty"`
	CreatedAt  time.Time `json:"created_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
}

// PauseView is an operator's pause of a task: who, why, since when, and
// when the pause limit (safety.max_pause) ends the task.
type PauseView struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	EndsAt time.Time `json:"ends_at"`
}

// Terminal reports whether the task has ended.
func (v TaskView) Terminal() bool { return v.Status.Terminal() }

// ApprovalRequest is what an operator is asked to decide.
type ApprovalRequest struct {
	TaskID    string
	Tool      string
	Arguments map[string]any
	ArgsHash  string
	RobotID   string
	// Preview says in words what will happen ("move the base 2.3 m to
	// (3.0, 1.0), about 6 s").
	Preview string
	// Target is the motion's goal in the room frame, for the console map
	// (nil when the motion has no base target).
	Target *robot.Pose2D
	// RobotState summarises the robot when the request was made.
	RobotState  string
	RequestedBy string
	SessionID   string
	// HoldRecord asks the approver to leave the record of a request that
	// a scoped grant covers when it is filed to the runner (the decision's
	// Held), which writes it in the one commit made before the task's
	// first command, with the task's creation, approval and start. The
	// runner sets it only when its Recorder is a BatchRecorder.
	HoldRecord bool
	// BeforeFile, when set, is called before the approver records a
	// request that waits for an operator, so the records the runner holds
	// (the task's creation) are on the disk before the request is.
	BeforeFile func()
}

// HeldRecord is an approval's record the approver left to the runner
// (ApprovalRequest.HoldRecord). Value rides on the task's approved
// transition (TransitionRecord.Approval) into the commit of its start;
// Save writes it alone, for a task that ended before it could start.
type HeldRecord struct {
	Value any
	Save  func(context.Context) error
}

// Decision is an operator's (or a scoped grant's) answer.
type Decision struct {
	Approved bool
	// Expired is set when no one decided before the request's TTL.
	Expired bool
	// Cancelled is set when the request was withdrawn (task cancelled).
	Cancelled bool
	// Reason is the operator's words on a denial, verbatim.
	Reason string
	// By names the operator.
	By string
	// GrantID is the grant that authorizes the task's motion commands.
	GrantID string
	// GrantScope and GrantExpires describe the scoped grant that covered
	// the call when it was made (what it allows, in words, and when it
	// ends), so the task can say by what it runs; empty otherwise.
	GrantScope   string
	GrantExpires time.Time
	// Held is the approval's record when the approver left it to the
	// runner (ApprovalRequest.HoldRecord); nil when it wrote it itself.
	Held *HeldRecord
}

// Approver asks operators to authorize motions. The approval service
// implements it.
type Approver interface {
	// Request files an approval request. If an active scoped grant already
	// covers it, the returned channel delivers an approved Decision at once.
	// The channel delivers exactly one Decision (approved, denied, expired
	// or cancelled) and is then closed.
	Request(ctx context.Context, r ApprovalRequest) (approvalID string, decision <-chan Decision, err error)
	// Withdraw cancels a pending request (the task was cancelled); the
	// request's channel then delivers a Cancelled decision.
	Withdraw(approvalID, reason string)
}

// BulkWithdrawer is an Approver that can withdraw every pending request at
// once. The runner uses it when the e-stop latches, so no request filed
// before the latch survives it to be approved after the reset.
type BulkWithdrawer interface {
	WithdrawAll(reason string) int
}

// StopReport is the answer to the stop tool: what was stopped and where
// the robot is now.
type StopReport struct {
	// Text says in words what happened, for the model.
	Text string `json:"text"`
	// Cancelled lists the ids of tasks the stop ended.
	Cancelled []string `json:"cancelled,omitempty"`
	// State is the robot's latest state right after the stop was sent
	// (possibly received before it).
	State robot.State `json:"state"`
	// Robot says in words what is known of the robot now: "stopped" only
	// from a state received after the stop, else "stop sent, not
	// confirmed; last seen …".
	Robot string `json:"robot"`
}

// ObjectInfo is what the grasp action needs to know of an object the robot
// has perceived.
type ObjectInfo struct {
	ID    string
	Label string
	// Position is the object's centre in the room frame.
	Position robot.Vec3
	// LastSeen is when a detection last confirmed it.
	LastSeen time.Time
	// Stale is true when the object was not seen recently enough to trust
	// its position.
	Stale bool
}

// Objects resolves object ids for grasp. The perception summarizer
// implements it; Lookup returns a *toolerr.Error of type NOT_FOUND for an
// unknown or stale id, suggesting describe_scene.
type Objects interface {
	Lookup(ctx context.Context, id string) (ObjectInfo, error)
}
