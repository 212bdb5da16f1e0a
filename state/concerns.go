package state

import "github.com/crew-dev/crew/events"

// Concerns returns the participants event e concerns, each once: the
// waiters a store wakes when e is committed (store.Log.Watch with
// participants). A participant is a task id (the task's worker) or Leader.
//
//   - The task e is about (e.Task): its status, its questions and their
//     answers, its messages and their delivery, its worker's stop.
//   - The tasks a leader -> worker message reaches (Recipients: a
//     broadcast's every task).
//   - Leader, for what the leader is told or waits on: a message to the
//     leader (a question, a report, crew's failure and timeout messages)
//     and every change of a task's status or worker (task.*, worker.*),
//     and a repair.
//
// A reader that waits for anything else (the run's end, every event)
// watches the whole run.
func Concerns(e *events.Event) []string {
	var out []string
	add := func(p string) {
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	if e.Task != "" {
		add(e.Task)
	}
	for _, t := range Recipients(e) {
		add(t)
	}
	switch {
	case e.Type == events.RunCreated: // no one waits for a run's first event
	case e.Message != nil && e.Message.Direction == events.Outbox,
		e.Type != events.MessageSent && e.Type != events.MessageDelivered &&
			e.Type != events.MessageAcknowledged && e.Type != events.MessageRejected:
		add(Leader)
	}
	return out
}
