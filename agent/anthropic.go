package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// AnthropicConf configures an Anthropic Messages API backend.
type AnthropicConf struct {
	// BaseURL is the API's base, the part before /v1/messages (optional).
	// It defaults to https://api.anthropic.com.
	BaseURL string
	// Model is the model name (required).
	Model string
	// APIKey is sent as x-api-key (required by Anthropic's API). It is
	// never logged.
	APIKey string
	// MaxTokens bounds one answer (optional). It defaults to 4096.
	MaxTokens int
	// Retry bounds the retries of a model call (optional).
	Retry Retry
	// HTTPClient (optional) defaults to a client with a 5m timeout.
	HTTPClient *http.Client
	// Logger (optional). It defaults to a discarding logger.
	Logger *slog.Logger
}

// Anthropic is a Model behind Anthropic's Messages API: the bridge's
// tools in format=anthropic, tool_use blocks as tool calls (their input
// as the arguments' JSON), and each run of tool messages as one user
// message of tool_result blocks (is_error for ok false), followed by the
// loop's task update as a text block of the same message.
type Anthropic struct {
	model     string
	maxTokens int
	http      *httpModel
}

var _ Model = (*Anthropic)(nil)

// NewAnthropic checks conf and returns the backend.
func NewAnthropic(conf AnthropicConf) (*Anthropic, error) {
	if conf.BaseURL == "" {
		conf.BaseURL = "https://api.anthropic.com"
	}
	if err := checkBaseURL("AnthropicConf.BaseURL", conf.BaseURL); err != nil {
		return nil, err
	}
	if strings.TrimSpace(conf.Model) == "" {
		return nil, errors.New("agent: AnthropicConf.Model is required")
	}
	if conf.MaxTokens == 0 {
		conf.MaxTokens = 4096
	}
	if conf.MaxTokens < 1 {
		return nil, fmt.Errorf("agent: AnthropicConf.MaxTokens is %d; it must be positive", conf.MaxTokens)
	}
	h := http.Header{}
	h.Set("anthropic-version", "2023-06-01")
	if conf.APIKey != "" {
		h.Set("x-api-key", conf.APIKey)
	}
	log := conf.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	url := strings.TrimSuffix(conf.BaseURL, "/") + "/v1/messages"
	return &Anthropic{model: conf.Model, maxTokens: conf.MaxTokens, http: newHTTPModel(url, h, conf.HTTPClient, conf.Retry, log.With("component", "agent.anthropic"))}, nil
}

// Format implements Model.
func (*Anthropic) Format() string { return "anthropic" }

type antBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type antMessage struct {
	Role    string     `json:"role"`
	Content []antBlock `json:"content"`
}

// anthropicMessages maps the transcript: consecutive tool and user
// messages become one user message (the API alternates roles).
func anthropicMessages(msgs []Message) []antMessage {
	var out []antMessage
	add := func(role string, b antBlock) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, b)
			return
		}
		out = append(out, antMessage{Role: role, Content: []antBlock{b}})
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			if m.Content != "" || len(m.ToolCalls) == 0 {
				add("assistant", antBlock{Type: "text", Text: nonEmpty(m.Content)})
			}
			for _, tc := range m.ToolCalls {
				add("assistant", antBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
		case RoleTool:
			add("user", antBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError})
		default:
			add("user", antBlock{Type: "text", Text: nonEmpty(m.Content)})
		}
	}
	return out
}

// toolInput is a tool_use block's input: the arguments when they are a
// JSON object, else an empty object (the bridge got, and answered, the
// text as the model wrote it).
func toolInput(args string) json.RawMessage {
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return json.RawMessage(args)
	}
	return json.RawMessage("{}")
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no text)"
	}
	return s
}

// Complete implements Model.
func (a *Anthropic) Complete(ctx context.Context, req Request) (Reply, error) {
	body := map[string]any{"model": a.model, "max_tokens": a.maxTokens, "messages": anthropicMessages(req.Messages)}
	if req.System != "" {
		body["system"] = req.System
	}
	if len(req.Tools) > 0 && !bytes.Equal(bytes.TrimSpace(req.Tools), []byte("[]")) {
		body["tools"] = req.Tools
	}
	raw, err := a.http.post(ctx, body)
	if err != nil {
		return Reply{}, err
	}
	reply, err := DecodeAnthropicMessage(raw)
	if err != nil {
		return Reply{}, &ModelError{Status: http.StatusOK, Message: err.Error(), Err: err}
	}
	return reply, nil
}

// DecodeAnthropicMessage reads a Messages API response: text blocks
// joined, tool_use blocks as tool calls with their input's JSON as the
// arguments. An error response, or a tool_use without a name or an
// object input, is an error naming what is wrong.
func DecodeAnthropicMessage(raw []byte) (Reply, error) {
	var resp struct {
		Type    string `json:"type"`
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return Reply{}, fmt.Errorf("the message is not the API's JSON: %w", err)
	}
	if resp.Type == "error" {
		msg := errorMessage(raw)
		if msg == "" {
			msg = "no message"
		}
		return Reply{}, fmt.Errorf("the message is an error: %s", msg)
	}
	var reply Reply
	var text strings.Builder
	for i, b := range resp.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			in := bytes.TrimSpace(b.Input)
			if strings.TrimSpace(b.Name) == "" {
				return Reply{}, fmt.Errorf("content block %d: a tool_use without a name", i)
			}
			if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
				return Reply{}, fmt.Errorf("content block %d (%s): the input is not a JSON object", i, b.Name)
			}
			reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: string(in)})
		}
	}
	reply.Content = text.String()
	return reply, nil
}
