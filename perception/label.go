package perception

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	unorm "golang.org/x/text/unicode/norm"
)

// Labels are scene text: whatever a detector, a robot-side node or a
// future OCR or vision-language step calls an object. They reach the model
// that drives the robot, so they are data, never instructions (invariant
// 12, docs/DESIGN.md §4): every label is normalised where it enters the
// bridge (DecodeDetections, and the summarizer for every frame), quoted
// wherever the scene's text names it, and the envelope marks the fields
// that hold it as untrusted (toolapi).
const (
	// MaxLabelLen caps a label's length in bytes, its truncation marker
	// included.
	MaxLabelLen = 64
	// LabelTruncated ends a label that was cut: one longer than
	// MaxLabelLen, or one that came ending with it (cut before, by a bridge
	// or by its sender). Anywhere else in a label NFKC turns "…" into
	// "...", so it never shows where nothing was cut off.
	LabelTruncated = "…"
	// maxLabelInput is how much of a raw label is read at all; the rest
	// is cut unread, so a hostile sender's megabyte label costs what a
	// kilobyte does.
	maxLabelInput = 16 * MaxLabelLen
	// maxMarks is how many combining marks one letter keeps; the rest of
	// a run ("Zalgo" text) is dropped.
	maxMarks = 4
)

// Why NormalizeLabel refuses a label; a detection with such a label is
// refused with a DetectionError (Field "label") giving it as the Reason.
var (
	errLabelEmpty   = errors.New(`empty (name what was detected, e.g. "cup")`)
	errLabelNothing = errors.New(`has no letter or digit once markup, control and invisible characters are removed ` +
		`(name what was detected, e.g. "cup")`)
)

// NormalizeLabel returns a label as the bridge passes it on, or an error
// saying why nothing meaningful is left of it. The result:
//
//   - holds only letters (with at most four combining marks each), digits,
//     single spaces and the punctuation - _ . , ' ( ) / & + %, with '_' only
//     between letters or digits (coffee_mug) and '&' only before a space or
//     at the end (salt & pepper); it never holds a quote mark, so a label
//     cannot close the quotes the scene's text puts around it;
//   - has no control, format, bidirectional, zero-width or other invisible
//     character, no private-use or unassigned code point, and no invalid
//     UTF-8;
//   - has no markup: HTML and XML tags (with their attributes) and
//     character references are removed, and so are Markdown's code fences,
//     backticks, emphasis, headings and link targets ([text](url) keeps
//     text);
//   - is in Unicode NFKC, so full-width and other compatibility forms read
//     as the plain letters they look like (＜ is <, and is removed);
//   - has its whitespace collapsed to single spaces and trimmed, with none
//     before ',' '.' ')' or after '(', and at least one letter or digit;
//   - is at most MaxLabelLen bytes: a longer label is cut (between words
//     when it can be) and ends with LabelTruncated.
//
// Only the first 1 KiB of raw is read. NormalizeLabel is idempotent, and a
// plain label ("cup", "Coffee Mug", "coffee_mug") is returned as it is,
// without allocating.
func NormalizeLabel(raw string) (string, error) {
	if isNormalASCII(raw) {
		return raw, nil
	}
	if strings.TrimSpace(raw) == "" {
		return "", errLabelEmpty
	}
	return normalizeLabel(raw)
}

// asciiAllowed are the ASCII punctuation characters a label keeps, besides
// letters, digits and single spaces.
const asciiAllowed = "-_.,'()/&+%"

// asciiClass is, per ASCII byte: 1 letter or digit, 2 allowed punctuation
// or space, 0 anything else.
var asciiClass = func() (c [128]uint8) {
	for b := byte('a'); b <= 'z'; b++ {
		c[b], c[b-'a'+'A'] = 1, 1
	}
	for b := byte('0'); b <= '9'; b++ {
		c[b] = 1
	}
	for i := range len(asciiAllowed) {
		c[asciiAllowed[i]] = 2
	}
	c[' '] = 2
	return c
}()

// isNormalASCII reports whether s is already a normalised ASCII label, the
// fast path every plain detector label takes.
func isNormalASCII(s string) bool {
	if len(s) == 0 || len(s) > MaxLabelLen || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	alnum := false
	for i := range len(s) {
		b := s[i]
		if b >= utf8.RuneSelf {
			return false
		}
		switch asciiClass[b] {
		case 0:
			return false
		case 1:
			alnum = true
		}
		switch b {
		case ' ':
			if c := s[i+1]; c == ' ' || c == ',' || c == '.' || c == ')' {
				return false
			}
		case '(':
			if i+1 < len(s) && s[i+1] == ' ' {
				return false
			}
		case '&':
			if i+1 < len(s) && s[i+1] != ' ' {
				return false
			}
		case '_':
			if i == 0 || i == len(s)-1 || !asciiAlnum(s[i-1]) || !asciiAlnum(s[i+1]) {
				return false
			}
		}
	}
	return alnum
}

func asciiAlnum(b byte) bool { return b < utf8.RuneSelf && asciiClass[b] == 1 }

// normalizeLabel is NormalizeLabel's slow path, for a label that is not
// plain ASCII already.
func normalizeLabel(raw string) (string, error) {
	cut := false
	if len(raw) > maxLabelInput {
		raw, cut = raw[:maxLabelInput], true // a rune cut in two is invalid UTF-8, dropped below
	}
	// A label that ends with the marker was cut before (by this function,
	// or by its sender): it stays marked. Any other "…" becomes "..." under
	// NFKC, so only a cut label ends with one.
	if t := strings.TrimRightFunc(raw, unicode.IsSpace); strings.HasSuffix(t, LabelTruncated) {
		raw, cut = strings.TrimSuffix(t, LabelTruncated), true
	}

	// Pass 1: drop what is invisible (before NFKC, so a zero-width
	// character cannot hide a tag or split a letter from its accent) and
	// turn every kind of whitespace into a space.
	var b strings.Builder
	b.Grow(len(raw))
	ascii := true
	for _, r := range raw {
		switch {
		case r < utf8.RuneSelf:
			switch {
			case r == ' ' || ('\t' <= r && r <= '\r'):
				b.WriteByte(' ')
			case r >= ' ' && r != 0x7f:
				b.WriteByte(byte(r))
			}
		case r == utf8.RuneError:
			// Invalid UTF-8, or the replacement character a decoder put
			// in its place: nothing of the sender's label.
		case unicode.IsSpace(r) || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp):
			b.WriteByte(' ')
		case invisible(r):
		default:
			if r >= utf8.RuneSelf {
				ascii = false
			}
			b.WriteRune(r)
		}
	}
	s := b.String()
	if !ascii {
		s = unorm.NFKC.String(s)
	}

	// Pass 2: markup out, allowed characters in, whitespace collapsed.
	rs := []rune(s)
	out := make([]rune, 0, len(rs))
	space := func() {
		if len(out) > 0 && out[len(out)-1] != ' ' && out[len(out)-1] != '(' {
			out = append(out, ' ')
		}
	}
	marks := 0 // combining marks since the last letter
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r >= utf8.RuneSelf && unicode.Is(unicode.M, r) {
			// A mark belongs to the letter before it, and one letter
			// carries only a few.
			if marks < maxMarks && len(out) > 0 && (marks > 0 || unicode.IsLetter(out[len(out)-1])) {
				out = append(out, r)
				marks++
			}
			continue
		}
		marks = 0
		switch {
		case r == '<':
			if end := tagEnd(rs, i); end > 0 {
				i = end
			}
			space()
		case r == '&':
			// A character reference is markup; a lone '&' ("salt &
			// pepper") is a word, and one before anything else ("&lt")
			// could read as a reference.
			if end := entityEnd(rs, i); end > 0 {
				i = end
				space()
			} else if i+1 == len(rs) || rs[i+1] == ' ' {
				out = append(out, r)
			} else {
				space()
			}
		case r == ']':
			// A Markdown link or image: [text](target) keeps text.
			if i+1 < len(rs) && rs[i+1] == '(' {
				if end := indexRune(rs, i+2, ')'); end > 0 {
					i = end
				}
			}
			space()
		case r == '_':
			if len(out) > 0 && isAlnum(out[len(out)-1]) && i+1 < len(rs) && isAlnum(rs[i+1]) {
				out = append(out, r)
			} else {
				space()
			}
		case r == ' ':
			space()
		case r < utf8.RuneSelf:
			switch {
			case asciiClass[r] == 0:
				space()
			case (r == ',' || r == '.' || r == ')') && len(out) > 1 && out[len(out)-1] == ' ' && out[len(out)-2] != '&':
				// No space before a comma, a full stop or a closing
				// parenthesis (but after an '&', which a space must follow).
				out[len(out)-1] = r
			default:
				out = append(out, r)
			}
		case r == '\u2018' || r == '\u2019':
			out = append(out, '\'') // typographic apostrophes
		case unicode.Is(unicode.Pd, r):
			out = append(out, '-')
		case invisible(r):
			// NFKC made it; nothing does, but a label must not hold one.
		case unicode.IsLetter(r) || unicode.IsNumber(r):
			out = append(out, r)
		default:
			// Other punctuation and symbols, quote marks of every kind
			// included: a word boundary.
			space()
		}
	}
	for len(out) > 0 && out[len(out)-1] == ' ' {
		out = out[:len(out)-1]
	}

	s = string(out)
	if cut || len(s) > MaxLabelLen {
		s = truncateLabel(s, MaxLabelLen-len(LabelTruncated)) + LabelTruncated
	}
	if strings.IndexFunc(s, isAlnum) < 0 {
		return "", errLabelNothing
	}
	return s, nil
}

// invisible reports whether r is a character a reader cannot see or that
// changes how others are shown: controls other than whitespace, format
// characters (bidirectional controls, zero-width spaces and joiners, the
// soft hyphen, tag characters), other default-ignorable code points and
// variation selectors, private-use and unassigned code points.
func invisible(r rune) bool {
	switch {
	case unicode.IsControl(r), unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs):
		return true
	case unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector, unicode.Noncharacter_Code_Point):
		return true
	}
	// Unassigned: in no general category.
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// tagEnd returns the index of the '>' that closes an HTML or XML tag,
// comment, declaration or processing instruction starting at rs[i] == '<',
// or 0 when rs[i] does not start one.
func tagEnd(rs []rune, i int) int {
	j := i + 1
	if j < len(rs) && (rs[j] == '/' || rs[j] == '!' || rs[j] == '?') {
		j++
	}
	if j >= len(rs) || (!unicode.IsLetter(rs[j]) && rs[j] != '-' && rs[j] != '[') {
		return 0
	}
	for k := j; k < len(rs); k++ {
		switch rs[k] {
		case '>':
			return k
		case '<':
			return 0 // not a tag: a '<' before any '>'
		}
	}
	return 0
}

// entityEnd returns the index of the ';' that ends a character reference
// (&amp; &#60; &#x3c;) starting at rs[i] == '&', or 0.
func entityEnd(rs []rune, i int) int {
	j := i + 1
	if j < len(rs) && rs[j] == '#' {
		j++
	}
	for k := j; k < len(rs) && k-j <= 32; k++ {
		switch r := rs[k]; {
		case r == ';':
			if k > j {
				return k
			}
			return 0
		case r < utf8.RuneSelf && asciiClass[r] == 1:
		default:
			return 0
		}
	}
	return 0
}

func indexRune(rs []rune, from int, r rune) int {
	for k := from; k < len(rs); k++ {
		if rs[k] == r {
			return k
		}
	}
	return -1
}

// truncateLabel cuts a normalised label to at most n bytes: at a character
// boundary, never between a letter and its marks, between words when a
// space is within 16 bytes of the cut, and never leaving a space or an '_'
// (which must be followed by a letter) at the end.
func truncateLabel(s string, n int) string {
	if len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		for i > 0 {
			r, _ := utf8.DecodeRuneInString(s[i:])
			if !unicode.Is(unicode.M, r) {
				break
			}
			// s[i] is a mark: cut before its letter too.
			_, size := utf8.DecodeLastRuneInString(s[:i])
			i -= size
		}
		// Cut between words when a word boundary is near.
		if s[i] != ' ' {
			if j := strings.LastIndexByte(s[:i], ' '); j > 0 && i-j <= 16 {
				i = j
			}
		}
		s = s[:i]
	}
	return strings.TrimRight(s, " _")
}
