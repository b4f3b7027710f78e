package actions

import "math"

func sqrt(x float64) float64 { return math.Sqrt(x) }
func abs(x float64) float64  { return math.Abs(x) }
func clamp01(x float64) float64 {
	return math.Max(0, math.Min(1, x))
}
