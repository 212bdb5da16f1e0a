// Package report renders a run for people and CI systems: a markdown
// summary for a job page ($GITHUB_STEP_SUMMARY), JUnit XML for test
// reporters, a mermaid sequence diagram of the conversation, and the whole
// run as one JSON object.
//
// A Report is read from the run's log in one pass (events.Read: the log is
// streamed, not loaded whole) up to the seq of the run's state (state.State),
// so tasks and messages describe the same moment. The rules for message
// statuses come from package run (state.MessageUpdates, state.Recipients);
// this package only gathers and renders.
//
// Imports flow cmd -> report -> run.
package report
