package agent

import (
	"context"
	"encoding/json"
)

// Role is who speaks a message.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool is the answer to one tool call, with its ToolCallID.
	RoleTool Role = "tool"
)

// Message is one message of a conversation, in a form every backend maps
// to its own API. The system prompt is not a message: it goes in
// Request.System.
type Message struct {
	Role Role `json:"role"`
	// Content is the text (for a tool message, the envelope's JSON).
	Content string `json:"content,omitempty"`
	// ToolCalls are an assistant message's tool calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the id of the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a tool message whose result has ok false (Anthropic's
	// tool_result is_error).
	IsError bool `json:"is_error,omitempty"`
}

// ToolCall is one tool call of the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments are the arguments exactly as the model wrote them: a JSON
	// object in text, possibly malformed (the bridge repairs or refuses).
	Arguments string `json:"arguments"`
}

// Request is one call of a model.
type Request struct {
	// System is the system prompt.
	System   string
	Messages []Message
	// Tools is the bridge's tools array in the backend's Format, passed
	// to the model as it is.
	Tools json.RawMessage
}

// Reply is the model's answer: text, tool calls, or both.
type Reply struct {
	Content   string
	ToolCalls []ToolCall
}

// Model is a language model the loop talks to. OpenAI and Anthropic
// implement it.
type Model interface {
	// Format is the value of GET /v1/tools?format= whose tools array the
	// model takes ("openai" or "anthropic").
	Format() string
	// Complete asks the model for its next message. It may retry the
	// model call itself; it never sees a tool call run.
	Complete(ctx context.Context, req Request) (Reply, error)
}
