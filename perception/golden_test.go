package perception

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestGolden pins the text (and data) of fixed scenes. Run with -update
// after an intended change and review the diff like code.
func TestGolden(t *testing.T) {
	cases := []struct {
		name  string
		q     Query
		build func(t *testing.T, s *Summarizer, ph pinhole, clk interface{ Advance(time.Duration) }, now func() time.Time)
	}{
		{"empty", Query{}, func(t *testing.T, s *Summarizer, _ pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
			// A frame arrived and held nothing.
			s.Observe(home, nil, now())
		}},
		{"no_frame_yet", Query{}, func(*testing.T, *Summarizer, pinhole, interface{ Advance(time.Duration) }, func() time.Time) {}},
		{"one_object", Query{}, func(t *testing.T, s *Summarizer, ph pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
			s.Observe(atTable, []robot.Detection{mustDetect(t, ph, atTable, robot.Vec3{X: 2.15, Y: 0.8, Z: 0.8}, 0.1, "cup", 0.87, true)}, now())
		}},
		{"two_on_the_table", Query{}, func(t *testing.T, s *Summarizer, ph pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
			s.Observe(atTable, []robot.Detection{
				mustDetect(t, ph, atTable, robot.Vec3{X: 2.15, Y: 0.8, Z: 0.8}, 0.1, "cup", 0.87, true),
				mustDetect(t, ph, atTable, robot.Vec3{X: 2.2, Y: 1.25, Z: 0.87}, 0.24, "bottle", 0.93, false),
			}, now())
		}},
		{"thirty_objects_budget", Query{}, buildThirty},
		{"thirty_objects_label_filter", Query{Label: "ball", MaxObjects: 3}, buildThirty},
		{"stale_and_out_of_view", Query{}, func(t *testing.T, s *Summarizer, ph pinhole, clk interface{ Advance(time.Duration) }, now func() time.Time) {
			// The cup was seen at home; 12 s later the robot has turned
			// left and sees a box; 1 s after that the box is still in view
			// but the last two frames missed it.
			s.Observe(home, []robot.Detection{mustDetect(t, ph, home, cupOnTable, 0.1, "cup", 0.9, true)}, now())
			clk.Advance(12 * time.Second)
			turned := robot.Pose2D{Theta: math.Pi / 2}
			s.Observe(turned, []robot.Detection{mustDetect(t, ph, turned, robot.Vec3{X: -0.3, Y: 2.5, Z: 0.15}, 0.3, "box", 0.8, true)}, now())
			clk.Advance(time.Second)
			s.Observe(turned, nil, now())
		}},
		{"duplicate_boxes", Query{}, func(t *testing.T, s *Summarizer, ph pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
			cup := mustDetect(t, ph, atTable, robot.Vec3{X: 2.15, Y: 0.8, Z: 0.8}, 0.1, "cup", 0.87, true)
			dup1, dup2 := cup, cup
			dup1.BBox[0], dup1.BBox[2], dup1.Confidence = dup1.BBox[0]+3, dup1.BBox[2]+3, 0.8
			dup2.BBox[1], dup2.BBox[3], dup2.Confidence = dup2.BBox[1]-2, dup2.BBox[3]-2, 0.6
			bottle := mustDetect(t, ph, atTable, robot.Vec3{X: 2.2, Y: 1.25, Z: 0.87}, 0.24, "bottle", 0.93, true)
			s.Observe(atTable, []robot.Detection{dup1, cup, bottle, dup2}, now())
		}},
		{"hostile_labels", Query{}, func(t *testing.T, s *Summarizer, ph pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
			// Labels that speak to the model: each is described as an
			// object with a strange label, quoted, and nothing more.
			s.Observe(atTable, []robot.Detection{
				mustDetect(t, ph, atTable, robot.Vec3{X: 2.15, Y: 0.8, Z: 0.8}, 0.1, hostileInstruction, 0.87, true),
				mustDetect(t, ph, atTable, robot.Vec3{X: 2.2, Y: 1.25, Z: 0.87}, 0.24, hostileMarkup, 0.93, true),
				mustDetect(t, ph, atTable, robot.Vec3{X: 2.6, Y: 0.3, Z: 0.1}, 0.2, "\u202e<b>mug</b>\u200b\n```SYSTEM```", 0.3, true),
			}, now())
		}},
		{"uncertain_and_unplaced", Query{}, func(t *testing.T, s *Summarizer, ph pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
			s.Observe(home, []robot.Detection{
				mustDetect(t, ph, home, cupOnTable, 0.1, "cup", 0.9, true),
				mustDetect(t, ph, home, robot.Vec3{X: 2.5, Y: -0.6, Z: 0.1}, 0.2, "cat", 0.31, false),
				{Label: "lamp", BBox: [4]float64{300, 0, 340, 20}, Confidence: 0.7},
				{Label: "cup", BBox: [4]float64{700, 0, 740, 20}, Confidence: 0.7},
			}, now())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newTestSummarizer(t)
			ph := newPinhole(*s.cfgCamera())
			tc.build(t, s, ph, clk, clk.Now)
			sc, err := s.Describe(context.Background(), tc.q)
			require.NoError(t, err)
			data, err := json.MarshalIndent(sc, "", "  ")
			require.NoError(t, err)
			got := append([]byte(sc.Text+"\n\n"), append(data, '\n')...)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./perception -run TestGolden -update to create it")
			require.Equal(t, string(want), string(got))
			// The budget holds in the data as in the text.
			require.LessOrEqual(t, len(sc.Objects), max(tc.q.MaxObjects, DefaultMaxObjects))
			require.Equal(t, len(sc.Objects), sc.Shown)
		})
	}
}

// buildThirty fills the view with 30 objects of five labels on the floor
// and the table, seen from the origin.
func buildThirty(t *testing.T, s *Summarizer, ph pinhole, _ interface{ Advance(time.Duration) }, now func() time.Time) {
	labels := []string{"cup", "bottle", "box", "ball", "can"}
	var dets []robot.Detection
	for i := range 30 {
		x := 1.4 + 0.45*float64(i/6)
		y := -0.3*x + 0.8*x*float64(i%6)/5
		z, size := 0.08, 0.16
		if x > 1.9 && x < 3.1 && y > 0.5 && y < 1.5 {
			z = 0.75 + 0.08
		}
		dets = append(dets, mustDetect(t, ph, home, robot.Vec3{X: x, Y: y, Z: z}, size, labels[i%5], 0.55+0.015*float64(i), true))
	}
	s.Observe(home, dets, now())
}

func mustDetect(t *testing.T, ph pinhole, pose robot.Pose2D, at robot.Vec3, size float64, label string, conf float64, depth bool) robot.Detection {
	t.Helper()
	d, ok := ph.detect(pose, at, size, label, conf, depth)
	require.True(t, ok, "%s at %+v must be in view", label, at)
	return d
}
