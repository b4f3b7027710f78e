package approval

import (
	"strconv"
	"strings"
	"time"
)

// The words of the approval service that reach an agent or an operator
// (refusals, pending and decision errors, a grant's end) use these, so a
// model reads a time of day or a wait, never a Go value.

// clockTime writes a moment as its time of day in UTC, to the second:
// "12:05:00 UTC". The moments it names (a grant's expiry or revocation)
// are minutes or hours from now, never days.
func clockTime(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// waitWords writes a wait for a reader: "45 s" under two minutes, then
// whole minutes ("12 min").
func waitWords(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	if d < 2*time.Minute {
		return strconv.FormatInt(int64(d/time.Second), 10) + " s"
	}
	return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
}

// ttlWords writes a grant's lifetime the way an operator types one in
// ttl ("10m", "1h30m", "45s"), without Go's zero units ("2h0m0s").
func ttlWords(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// operatorName names the operator who decided, without doubling the word
// when the credential itself is called "operator".
func operatorName(by string) string {
	switch by {
	case "":
		return "an operator"
	case "operator":
		return "the operator"
	}
	return "operator " + by
}

// capFirst starts a sentence that begins with a plain word with a capital.
func capFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// quoteReason puts an operator's reason, verbatim, between double quotes,
// or says none was given.
func quoteReason(r string) string {
	if strings.TrimSpace(r) == "" {
		return "none given"
	}
	return `"` + r + `"`
}
