package perception

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robot-bridge/robot-bridge/robot"
)

// Decoder limits. They bound the work one frame from outside can cause.
const (
	// DefaultMaxDetections caps the detections of one frame: a real
	// detector emits tens, a few hundred at most; ten thousand is already
	// absurd and bounds memory and tracker work.
	DefaultMaxDetections = 10_000
	// DefaultMaxBytes caps the size of one encoded frame.
	DefaultMaxBytes = 4 << 20
	// MaxDepth is the largest depth accepted, in metres; larger values are
	// sensor garbage, not a distance in a room.
	MaxDepth = 1000.0
)

// Limits is what a detection must fit: the image it was taken from and the
// per-frame caps.
type Limits struct {
	// Width and Height are the image size in pixels (required, > 0).
	Width, Height int
	// MaxDetections caps one frame (optional). It defaults to
	// DefaultMaxDetections.
	MaxDetections int
	// MaxBytes caps one encoded frame (optional). It defaults to
	// DefaultMaxBytes.
	MaxBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDetections <= 0 {
		l.MaxDetections = DefaultMaxDetections
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// wireDetection is the JSON form. Pointers tell a missing field from a
// zero one, and bbox is a slice so that a box of 3 or 5 numbers is an
// error rather than silently padded or cut.
type wireDetection struct {
	Label      *string    `json:"label"`
	BBox       []float64  `json:"bbox"`
	Confidence *float64   `json:"confidence"`
	Depth      *float64   `json:"depth,omitempty"`
	Stamp      *time.Time `json:"stamp,omitempty"`
}

// DecodeDetections decodes one detection object or an array of them, as a
// vision model or a robot-side node sends them:
//
//	{"label":"cup","bbox":[412,220,468,301],"confidence":0.87}
//	[{"label":"cup","bbox":[412,220,468,301],"confidence":0.87,"depth":1.9}, ...]
//
// bbox is [xmin, ymin, xmax, ymax] in pixels of an image of lim's size;
// depth (optional, metres along the optical axis, 0 = unknown) and stamp
// (optional, RFC 3339) may be present. Unknown fields, missing required
// fields, NaN or infinite numbers, negative, inverted, empty or
// out-of-image boxes, confidences outside [0, 1], labels of which nothing
// meaningful is left (NormalizeLabel) and frames over lim's caps are
// rejected with an error naming the detection and the field (a
// *DetectionError, ErrTooManyDetections or ErrMalformedJSON). The whole
// frame is rejected when one detection is bad: a sender with a bug should
// hear about it, not see half its frame used.
//
// A label is content, not structure: it is returned normalised
// (NormalizeLabel) — markup, control and invisible characters removed,
// whitespace collapsed, cut to MaxLabelLen with a visible marker — rather
// than refused, so a hostile or sloppy label becomes a strange but harmless
// one.
func DecodeDetections(b []byte, lim Limits) ([]robot.Detection, error) {
	lim = lim.withDefaults()
	if lim.Width <= 0 || lim.Height <= 0 {
		return nil, fmt.Errorf("%w: image size %dx%d is not positive", ErrInvalidConfig, lim.Width, lim.Height)
	}
	if len(b) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: frame is %d bytes, more than the %d allowed", ErrTooManyDetections, len(b), lim.MaxBytes)
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: empty input (send a detection object or an array of them)", ErrMalformedJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var out []robot.Detection
	switch trimmed[0] {
	case '{':
		d, err := decodeOne(dec, 0, lim)
		if err != nil {
			return nil, err
		}
		out = []robot.Detection{d}
	case '[':
		if _, err := dec.Token(); err != nil {
			return nil, malformed(err)
		}
		for dec.More() {
			if len(out) >= lim.MaxDetections {
				return nil, fmt.Errorf("%w: more than %d detections (send at most %d per frame)", ErrTooManyDetections, lim.MaxDetections, lim.MaxDetections)
			}
			d, err := decodeOne(dec, len(out), lim)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		if _, err := dec.Token(); err != nil {
			return nil, malformed(err)
		}
		if out == nil {
			out = []robot.Detection{}
		}
	default:
		return nil, fmt.Errorf("%w: expected a detection object or an array of them, got %q", ErrMalformedJSON, firstRune(trimmed))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: unexpected data after the detections", ErrMalformedJSON)
	}
	return out, nil
}

func firstRune(b []byte) string {
	r, _ := utf8.DecodeRune(b)
	return string(r)
}

func malformed(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("%w: %s at byte %d", ErrMalformedJSON, se.Error(), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: input ends early", ErrMalformedJSON)
	}
	return fmt.Errorf("%w: %s", ErrMalformedJSON, err.Error())
}

func decodeOne(dec *json.Decoder, i int, lim Limits) (robot.Detection, error) {
	var w wireDetection
	if err := dec.Decode(&w); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			field := te.Field
			if field == "" {
				return robot.Detection{}, fmt.Errorf("%w: detection %d: expected an object, got %s", ErrMalformedJSON, i, te.Value)
			}
			return robot.Detection{}, &DetectionError{Index: i, Field: field, Reason: "wrong type: got " + te.Value}
		}
		if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
			name := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			return robot.Detection{}, &DetectionError{Index: i, Field: name, Reason: "unknown field (allowed: label, bbox, confidence, depth, stamp)"}
		}
		if _, ok := errors.AsType[*time.ParseError](err); ok {
			return robot.Detection{}, &DetectionError{Index: i, Field: "stamp", Reason: "not an RFC 3339 time"}
		}
		return robot.Detection{}, malformed(err)
	}
	if w.Label == nil {
		return robot.Detection{}, &DetectionError{Index: i, Field: "label", Reason: "missing"}
	}
	if w.BBox == nil {
		return robot.Detection{}, &DetectionError{Index: i, Field: "bbox", Reason: "missing"}
	}
	if len(w.BBox) != 4 {
		return robot.Detection{}, &DetectionError{Index: i, Field: "bbox", Reason: fmt.Sprintf("has %d numbers, want 4: [xmin, ymin, xmax, ymax]", len(w.BBox))}
	}
	if w.Confidence == nil {
		return robot.Detection{}, &DetectionError{Index: i, Field: "confidence", Reason: "missing"}
	}
	d := robot.Detection{Label: *w.Label, BBox: [4]float64(w.BBox), Confidence: *w.Confidence}
	if w.Depth != nil {
		d.Depth = *w.Depth
	}
	if w.Stamp != nil {
		d.Stamp = *w.Stamp
	}
	if err := checkDetection(i, &d, lim); err != nil {
		return robot.Detection{}, err
	}
	return d, nil
}

// ValidateDetection checks one detection against the image size in lim,
// with the same rules as DecodeDetections: its label must leave something
// meaningful once normalised (NormalizeLabel; DecodeDetections and the
// summarizer pass the normalised label on, never d.Label as it is), and
// every number must be in range. The summarizer runs the same checks on
// every detection it is given, so values from an in-process transport are
// held to the same standard as JSON from outside.
func ValidateDetection(d robot.Detection, lim Limits) error {
	return checkDetection(0, &d, lim)
}

// checkDetection normalises d's label in place and checks its numbers;
// i is the detection's index in its frame, for the error.
func checkDetection(i int, d *robot.Detection, lim Limits) error {
	label, err := NormalizeLabel(d.Label)
	if err != nil {
		return &DetectionError{Index: i, Field: "label", Reason: err.Error()}
	}
	d.Label = label
	bad := func(field, format string, args ...any) error {
		return &DetectionError{Index: i, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	for k, v := range d.BBox {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return bad("bbox", "element %d is %v; every coordinate must be a finite number of pixels", k, v)
		}
	}
	x0, y0, x1, y1 := d.BBox[0], d.BBox[1], d.BBox[2], d.BBox[3]
	w, h := float64(lim.Width), float64(lim.Height)
	switch {
	case x0 < 0 || y0 < 0 || x1 < 0 || y1 < 0:
		return bad("bbox", "negative coordinate in [%g, %g, %g, %g]; pixels start at 0", x0, y0, x1, y1)
	case x0 >= x1 || y0 >= y1:
		return bad("bbox", "[%g, %g, %g, %g] is inverted or empty; the order is [xmin, ymin, xmax, ymax]", x0, y0, x1, y1)
	case x1 > w || y1 > h:
		return bad("bbox", "[%g, %g, %g, %g] reaches outside the %dx%d image", x0, y0, x1, y1, lim.Width, lim.Height)
	}
	if c := d.Confidence; math.IsNaN(c) || c < 0 || c > 1 {
		return bad("confidence", "%v is outside [0, 1]", c)
	}
	if z := d.Depth; math.IsNaN(z) || math.IsInf(z, 0) || z < 0 || z > MaxDepth {
		return bad("depth", "%v is not a distance in [0, %g] m (0 means unknown)", z, MaxDepth)
	}
	return nil
}
