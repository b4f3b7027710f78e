package perception

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on.
var (
	// ErrInvalidConfig is wrapped by every error New and NewCamera return
	// for a config the summarizer cannot work with.
	ErrInvalidConfig = errors.New("perception: invalid config")
	// ErrInvalidDetection is wrapped by every *DetectionError.
	ErrInvalidDetection = errors.New("invalid detection")
	// ErrTooManyDetections means one frame carried more detections than
	// the configured cap; nothing of the frame is used.
	ErrTooManyDetections = errors.New("too many detections in one frame")
	// ErrMalformedJSON means the input is not a JSON detection or array of
	// detections.
	ErrMalformedJSON = errors.New("malformed detections JSON")
)

// DetectionError says which detection of a frame is wrong and why. It
// wraps ErrInvalidDetection.
type DetectionError struct {
	// Index is the detection's position in the frame (0 for a single
	// object).
	Index int
	// Field is the offending JSON field: label, bbox, confidence, depth,
	// stamp, or an unknown field's name.
	Field string
	// Reason says what is wrong in words.
	Reason string
}

// Error implements error.
func (e *DetectionError) Error() string {
	return fmt.Sprintf("detection %d: %s: %s", e.Index, e.Field, e.Reason)
}

// Unwrap lets errors.Is match ErrInvalidDetection.
func (e *DetectionError) Unwrap() error { return ErrInvalidDetection }
