package bridge

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/escalation"
)

// FuzzDecodeAnswer feeds an operator's answer body (outside input) to
// its decoder: it either refuses it with an error or returns a text of 1
// to 2000 characters without control characters.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{`{"text":"go to the kitchen"}`, `{"text":""}`, `{"text":"a","x":1}`, `{"text":"\u0000"}`, `[]`, `{"text":"a"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeAnswer(raw)
		if err != nil {
			require.Empty(t, got)
			return
		}
		require.NotEmpty(t, got)
		require.LessOrEqual(t, utf8.RuneCountInString(got), escalation.MaxTextLen)
		require.Equal(t, strings.TrimSpace(got), got)
		for _, r := range got {
			require.False(t, unicode.IsControl(r), "control character %q kept", r)
		}
	})
}

func TestDecodeAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, body, want, err string
	}{
		{name: "plain", body: `{"text":"Drive to the kitchen."}`, want: "Drive to the kitchen."},
		{name: "control characters removed", body: `{"text":"left\u0007\nthen right"}`, want: "left then right"},
		{name: "unknown field", body: `{"text":"a","by":"me"}`, err: `unknown field "by"`},
		{name: "two objects", body: `{"text":"a"}{"text":"b"}`, err: "one JSON object"},
		{name: "empty text", body: `{"text":"  "}`, err: "text is empty"},
		{name: "too long", body: `{"text":"` + strings.Repeat("a", 2001) + `"}`, err: "2001 characters, more than the 2000"},
		{name: "not JSON", body: `text=hi`, err: `body must be {"text": "..."}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAnswer([]byte(tc.body))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
