// Package crew holds what every part of crew shares: the sentinel errors
// that the command line maps to exit codes, and the identifier rules of
// docs/concepts.md (Identifiers).
//
// The work is done in sub-packages: task (the state machine), events (the
// log's events and line format), state (the reducer), mailbox (JSONL
// mailbox files and the per-agent mail tree), store (the interface to
// storage, with store/file and store/nats behind it) and run (the
// operations, written once over store). cmd/crew is the command line;
// README.md, "How the code is laid out", draws the whole.
package crew
