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

// OpenAIConf configures an OpenAI-compatible chat completions backend.
type OpenAIConf struct {
	// BaseURL is the API's base, the part before /chat/completions
	// (required): https://api.openai.com/v1, or a local server's
	// http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:8000/v1
	// (vLLM), http://127.0.0.1:11434/v1 (Ollama).
	BaseURL string
	// Model is the model name (required; local servers often ignore it).
	Model string
	// APIKey is sent as a bearer token (optional; local servers need
	// none). It is never logged.
	APIKey string
	// Retry bounds the retries of a model call (optional).
	Retry Retry
	// HTTPClient (optional) defaults to a client with a 5m timeout.
	HTTPClient *http.Client
	// Logger (optional). It defaults to a discarding logger.
	Logger *slog.Logger
}

// OpenAI is a Model behind an OpenAI-compatible /v1/chat/completions.
type OpenAI struct {
	model string
	http  *httpModel
}

var _ Model = (*OpenAI)(nil)

// NewOpenAI checks conf and returns the backend.
func NewOpenAI(conf OpenAIConf) (*OpenAI, error) {
	if err := checkBaseURL("OpenAIConf.BaseURL", conf.BaseURL); err != nil {
		return nil, err
	}
	if strings.TrimSpace(conf.Model) == "" {
		return nil, errors.New("agent: OpenAIConf.Model is required (local servers take any name, e.g. local)")
	}
	h := http.Header{}
	if conf.APIKey != "" {
		h.Set("Authorization", "Bearer "+conf.APIKey)
	}
	log := conf.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	url := strings.TrimSuffix(conf.BaseURL, "/") + "/chat/completions"
	return &OpenAI{model: conf.Model, http: newHTTPModel(url, h, conf.HTTPClient, conf.Retry, log.With("component", "agent.openai"))}, nil
}

// Format implements Model.
func (*OpenAI) Format() string { return "openai" }

// Complete implements Model.
func (o *OpenAI) Complete(ctx context.Context, req Request) (Reply, error) {
	body := map[string]any{"model": o.model, "messages": openAIMessages(req)}
	if len(req.Tools) > 0 && !bytes.Equal(bytes.TrimSpace(req.Tools), []byte("[]")) {
		body["tools"] = req.Tools
	}
	raw, err := o.http.post(ctx, body)
	if err != nil {
		return Reply{}, err
	}
	reply, err := DecodeChatCompletion(raw)
	if err != nil {
		return Reply{}, &ModelError{Status: http.StatusOK, Message: err.Error(), Err: err}
	}
	return reply, nil
}

type oaiMessage struct {
	Role       string        `json:"role"`
	Content    *string       `json:"content"`
	ToolCalls  []oaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
}

type oaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func openAIMessages(req Request) []oaiMessage {
	out := make([]oaiMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		s := req.System
		out = append(out, oaiMessage{Role: "system", Content: &s})
	}
	for _, m := range req.Messages {
		om := oaiMessage{Role: string(m.Role), ToolCallID: m.ToolCallID}
		if m.Content != "" || m.Role != RoleAssistant || len(m.ToolCalls) == 0 {
			c := m.Content
			om.Content = &c
		}
		for _, tc := range m.ToolCalls {
			var w oaiToolCall
			w.ID, w.Type = tc.ID, "function"
			w.Function.Name, w.Function.Arguments = tc.Name, tc.Arguments
			om.ToolCalls = append(om.ToolCalls, w)
		}
		out = append(out, om)
	}
	return out
}

// DecodeChatCompletion reads a chat completions response: the first
// choice's message, its content (a string, null, or an array of text
// parts) and its tool calls, whose arguments are a JSON string (or, from
// some local servers, an object, kept as its JSON text). A response
// without a choice, or with an "error", is an error naming what is wrong.
func DecodeChatCompletion(raw []byte) (Reply, error) {
	var resp struct {
		Choices []struct {
			Message struct {
				Content   json.RawMessage `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return Reply{}, fmt.Errorf("the chat completion is not the API's JSON: %w", err)
	}
	if len(resp.Error) > 0 && string(resp.Error) != "null" {
		msg := errorMessage(raw)
		if msg == "" {
			msg = "no message"
		}
		return Reply{}, fmt.Errorf("the chat completion is an error: %s", msg)
	}
	if len(resp.Choices) == 0 {
		return Reply{}, errors.New("the chat completion has no choices")
	}
	m := resp.Choices[0].Message
	content, err := decodeContent(m.Content)
	if err != nil {
		return Reply{}, err
	}
	reply := Reply{Content: content}
	for i, tc := range m.ToolCalls {
		if strings.TrimSpace(tc.Function.Name) == "" {
			return Reply{}, fmt.Errorf("tool call %d of the chat completion has no function name", i)
		}
		args, err := decodeArguments(tc.Function.Arguments)
		if err != nil {
			return Reply{}, fmt.Errorf("tool call %d (%s): %w", i, tc.Function.Name, err)
		}
		reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return reply, nil
}

// decodeContent reads a message's content: a string, null, or an array of
// parts whose text parts are joined.
func decodeContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("the message content is neither a string, null, nor an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// decodeArguments reads a tool call's arguments as the text the model
// wrote: a JSON string's value (malformed JSON inside it is left for the
// bridge to repair or refuse), an object's JSON text, or "" for none.
func decodeArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return s, nil
	case '{':
		return string(raw), nil
	}
	return "", errors.New("arguments are neither a JSON string nor an object")
}

func checkBaseURL(field, u string) error {
	if u == "" {
		return fmt.Errorf("agent: %s is required", field)
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("agent: %s %q is not an http(s) URL", field, u)
	}
	return nil
}
