package bridge

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// FuzzDecodePauseBody: the pause and abort routes' body parser never
// panics, and what it accepts is a trimmed, valid reason of at most 1000
// characters (present when required); what it refuses is INVALID_PARAMS
// naming the field.
func FuzzDecodePauseBody(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"reason":"a person walked into the aisle"}`, `{"reason":""}`, `{"reason":"   "}`,
		`{"reason":null}`, `{"reason":1}`, `{"reason":"x","why":"y"}`, `{"reason":"x"}{"reason":"y"}`,
		`{"reason":"` + strings.Repeat("é", 1001) + `"}`, `[`, `"reason"`, "{\"reason\":\"\xff\"}",
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, body string, required bool) {
		reason, te := decodePauseBody(strings.NewReader(body), required)
		if te != nil {
			require.Equal(t, toolerr.InvalidParams, te.Type)
			require.NotEmpty(t, te.Details["field"], "a refusal names the field")
			require.Empty(t, reason)
			return
		}
		require.True(t, utf8.ValidString(reason))
		require.LessOrEqual(t, utf8.RuneCountInString(reason), maxPauseReason)
		require.Equal(t, strings.TrimSpace(reason), reason)
		if required {
			require.NotEmpty(t, reason)
		}
	})
}
