package console

import (
	"strings"
	"testing"
)

// FuzzParseSignIn: the sign-in body is outside input; it must parse or
// fail with an error, never panic, and a parsed token is never blank.
func FuzzParseSignIn(f *testing.F) {
	for _, s := range []string{`{"token":"abc"}`, `{}`, `{"token":1}`, `{"token":"a"} {}`, `[]`, `{"token":"a","x":1}`, ``, `{"token":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseSignIn(b)
		if err == nil && strings.TrimSpace(tok) == "" {
			t.Fatalf("blank token accepted from %q", b)
		}
		if err != nil && tok != "" {
			t.Fatalf("token returned with an error for %q", b)
		}
	})
}
