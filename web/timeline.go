package web

import (
	"fmt"
	"time"

	"github.com/crew-dev/crew/report"
)

// Timeline geometry, in SVG user units: lanes share one time axis of
// laneWidth units after a label of labelWidth.
const (
	labelWidth = 160
	laneWidth  = 840
	laneHeight = 22
	axisHeight = 18 // the time axis above the lanes
)

// chart is the lanes of a timeline under their time axis: Ticks along
// it, Height the whole drawing's.
type chart struct {
	Lanes  []lane
	Ticks  []tick
	Height int
}

// tick is a mark of the time axis: X in user units, Label the time
// since the axis's start (dur), Title the time of day (UTC).
type tick struct {
	X            float64
	Label, Title string
}

// tickSteps are the spans between ticks the axis may take: the first
// that gives at most maxTicks ticks is taken.
var tickSteps = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour,
}

const maxTicks = 8

// ticks marks the axis from start, total long, every step of tickSteps
// that gives at most maxTicks marks.
func ticks(start time.Time, total time.Duration) []tick {
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if total/s <= maxTicks {
			step = s
			break
		}
	}
	var out []tick
	for d := time.Duration(0); d <= total; d += step {
		label := dur(d.Seconds())
		if d == 0 {
			label = "0s"
		}
		out = append(out, tick{X: labelWidth + float64(d)/float64(total)*laneWidth, Label: label,
			Title: start.Add(d).UTC().Format("2006-01-02 15:04:05.000Z")})
	}
	return out
}

// lane is a task's row of the timeline: its running and waiting spans
// and a mark per message, placed on the run's time axis.
type lane struct {
	Task  string
	Y     int // top of the lane
	Spans []span
	Marks []mark
}

// span is a bar of a lane: X and W in user units, State its class.
type span struct {
	X, W  float64
	State string
	Title string
}

// mark is a message on a lane, or with End the task's end (Kind its
// terminal state: completed, failed, cancelled).
type mark struct {
	X     float64
	Kind  string
	Title string
	End   bool
	// Points is an end's diamond (SVG polygon points), in user units.
	Points string
}

// axis is the time the lanes of rep span: from the run's creation to
// its end, or to the report's time while tasks are open.
func axis(rep *report.Report) (from, to time.Time) {
	to = rep.At.Time
	if rep.Timings.EndedAt != nil {
		to = rep.Timings.EndedAt.Time
	}
	return rep.Timings.CreatedAt.Time, to
}

// lanes places the tasks of rep on one time axis, from the run's
// creation to its end (or to the report's time while tasks are open),
// each ended task with a mark of how it ended.
func lanes(rep *report.Report) chart {
	start, end := axis(rep)
	total := end.Sub(start)
	if total <= 0 {
		total = time.Millisecond
	}
	x := func(t time.Time) float64 {
		f := float64(t.Sub(start)) / float64(total)
		return labelWidth + min(max(f, 0), 1)*laneWidth
	}
	byTask := map[string]int{}
	out := make([]lane, len(rep.Tasks))
	for i, t := range rep.Tasks {
		byTask[t.ID] = i
		out[i] = lane{Task: t.ID, Y: axisHeight + i*laneHeight}
		for _, sp := range t.Spans {
			x0, x1 := x(sp.Start), x(sp.End)
			out[i].Spans = append(out[i].Spans, span{X: x0, W: max(x1-x0, 1), State: string(sp.State),
				Title: string(sp.State) + " " + sp.Start.UTC().Format("15:04:05.000") + "–" + sp.End.UTC().Format("15:04:05.000")})
		}
	}
	for _, m := range rep.Messages {
		i, ok := byTask[m.Task]
		if !ok {
			if i, ok = byTask[m.To]; !ok {
				continue
			}
		}
		out[i].Marks = append(out[i].Marks, mark{X: x(m.SentAt.Time), Kind: m.Kind,
			Title: m.Kind + " from " + m.From + " at " + m.SentAt.String() + ": " + cut(m.Body, 80)})
	}
	for i, t := range rep.Tasks {
		if t.EndedAt != nil && t.Status.Terminal() {
			ex, y := x(t.EndedAt.Time), out[i].Y+11
			out[i].Marks = append(out[i].Marks, mark{X: ex, Kind: string(t.Status), End: true,
				Title:  string(t.Status) + " at " + t.EndedAt.String() + cutReason(t.Reason),
				Points: fmt.Sprintf("%.1f,%d %.1f,%d %.1f,%d %.1f,%d", ex, y-6, ex+6, y, ex, y+6, ex-6, y)})
		}
	}
	return chart{Lanes: out, Ticks: ticks(start, total), Height: axisHeight + len(out)*laneHeight}
}

// cutReason is a task's reason for a title: ": " and its first 80
// characters, or "" for none.
func cutReason(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + cut(reason, 80)
}
