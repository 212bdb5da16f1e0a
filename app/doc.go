// Package app is crew's application layer: one typed request per
// operation (Steer, Ask, TaskAdd, Pending, ...) and one method of App
// that carries it out, returning the record that `crew --json` prints.
//
// Every front end calls these and nothing below them: the command line
// (cmd/crew) parses flags into a request and prints the result; crew
// mcp's tools take the request types as their input (schemas from the
// json and jsonschema tags; a field tagged json:"-" is the server's
// identity, not the client's to set); the dashboard (web) and the agent
// hooks call the same methods. Identity (which run, which task, which
// agent acts), defaults and validation are resolved here, once, in
// front of package run, whose operations do the work over a store.
//
// Errors wrap the sentinels of package crew (crew.Code maps them to exit
// codes and classes). Explain adds what the identity can tell of one (the
// run taken as the newest, the run holding an unknown task); a front end
// calls it on the error it shows.
//
// Every reading a worker does (inbox, outbox, pending, task show, mail
// read, events) is a sign of its life (SignOfLife, docs/concepts.md,
// Liveness), recorded here, not in the front ends.
package app
