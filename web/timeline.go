package web

import (
	"time"

	"github.com/crew-dev/crew/report"
)

// Timeline geometry, in SVG user units: lanes share one time axis of
// laneWidth units after a label of labelWidth.
const (
	labelWidth = 160
	laneWidth  = 840
	laneHeight = 22
)

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

// mark is a message on a lane.
type mark struct {
	X     float64
	Kind  string
	Title string
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
// creation to its end (or to the report's time while tasks are open).
func lanes(rep *report.Report) []lane {
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
		out[i] = lane{Task: t.ID, Y: i * laneHeight}
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
	return out
}
