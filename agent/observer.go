package agent

// Observer is told what the loop does while a turn runs, for a terminal
// or a log. Its methods are called from the turn's goroutine, one at a
// time; they must not block.
type Observer interface {
	// ModelAsked is called before each model call (iteration counts from 1).
	ModelAsked(iteration int)
	// ToolCall is called for each tool call of the model before it is
	// sent; sent is false when the loop answers it itself (see gate.go).
	ToolCall(call ToolCall, sent bool)
	// ToolResult is called with each call's result as the model gets it.
	ToolResult(call ToolCall, r CallResult)
	// TaskUpdate is called when a task the loop waits on changes.
	TaskUpdate(t TaskStatus)
}

// CallResult is the part of a tool result the loop acts on, read from the
// envelope's typed fields.
type CallResult struct {
	Tool string
	OK   bool
	// ErrorType is error.type, "" when OK.
	ErrorType string
	// Retryable is error.retryable.
	Retryable bool
	// RetryAfterMS is error.retry_after_ms.
	RetryAfterMS int64
	// Message is error.message, the bridge's words.
	Message string
	// Text is the envelope's text.
	Text string
	// Robot is the envelope's robot: the robot's state in words.
	Robot string
	// TaskID and TaskStatus are the envelope's task, when it has one.
	TaskID     string
	TaskStatus string
	// NotSent is true when the loop answered the call without sending it.
	NotSent bool
	// Summarized is true when the result was over the size budget.
	Summarized bool
}

// TaskStatus is a task as the agent event stream last showed it.
type TaskStatus struct {
	ID     string
	Tool   string
	Status string
	// Fraction is the progress in [0, 1].
	Fraction float64
	// Text is the bridge's sentence about the task.
	Text string
	// ErrorType, ErrorMessage and Retryable describe how a task that
	// ended other than succeeded failed.
	ErrorType    string
	ErrorMessage string
	Retryable    bool
	Suggestion   string
}

type nopObserver struct{}

var _ Observer = nopObserver{}

func (nopObserver) ModelAsked(int)                  {}
func (nopObserver) ToolCall(ToolCall, bool)         {}
func (nopObserver) ToolResult(ToolCall, CallResult) {}
func (nopObserver) TaskUpdate(TaskStatus)           {}
