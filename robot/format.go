package robot

import (
	"math"
	"strconv"
	"strings"
)

// The number formats of every text the bridge says about the robot. They
// round as a reader expects and never write a negative zero: a value that
// rounds to zero from below ("-0.0001 rad") reads "0°", not "-0°".

// Fixed writes v with prec digits after the point, without a minus sign
// when the digits written are all zero, so -0.0004 at 2 digits is "0.00".
// A value that is not a finite number is written "unknown".
func Fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "unknown"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.HasPrefix(s, "-") && strings.Trim(s[1:], "0.") == "" {
		s = s[1:]
	}
	return s
}

// Heading writes an angle in radians as whole degrees in (-180°, 180°]:
// "90°", "-45°", never "-0°" and never "-180°".
func Heading(rad float64) string {
	d := math.Round(Degrees(rad))
	if d <= -180 {
		d += 360
	}
	return Fixed(d, 0) + "°"
}

// FormatPose writes a planar pose as "(x, y) facing θ°", metres to the
// centimetre and the heading in whole degrees.
func FormatPose(p Pose2D) string {
	return "(" + Fixed(p.X, 2) + ", " + Fixed(p.Y, 2) + ") facing " + Heading(p.Theta)
}

// FormatPoint writes a planar point as "(x, y)", metres to the centimetre.
func FormatPoint(x, y float64) string {
	return "(" + Fixed(x, 2) + ", " + Fixed(y, 2) + ")"
}
