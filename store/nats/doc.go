// Package nats keeps crew runs in NATS JetStream, for leaders and
// workers on different machines that share no files.
//
// Layout. Each run is one stream, CREW_RUN_<run>, with a subject per
// actor, crew.run.<run>.<actor>: the run's events, one message each on
// its actor's subject, as the JSON line events.jsonl would hold. An
// agent's NATS credentials may publish only on its own actor's subjects
// (Permissions, Authority; docs/nats.md, Authorization), and readers
// refuse an event on another actor's subject (crew.ErrTampered). The stream's sequence is the event's seq, so
// seq 1, 2, 3 … stays dense and a cursor read (--since SEQ) starts at
// the right message without scanning the log.
//
// Commit rule (the commit engine of store/commit, as for the file
// store). A writer reduces the log as far as it has read it, to seq
// N, validates its operation, and publishes the event as seq N+1 with
// Nats-Expected-Last-Sequence: N. The server stores it only if the
// stream's last message is still N, so two writers on two machines
// cannot both append seq N+1: the loser gets crew.ErrConflict, reloads
// and validates again (the server is the run lock). Each publish carries
// Nats-Msg-Id, the operation's id: a publish retried after a lost
// acknowledgement (a node died, the connection dropped) is stored once,
// and the retry learns it was.
//
// Durability. The server acknowledges a publish once it is stored; what
// "stored" means is the server's setting: run it with sync_interval:
// always (fsync before the acknowledgement; the default flushes every two
// minutes, under which the Jepsen analysis of NATS 2.12.1 lost
// acknowledged writes), and on a cluster give streams replicas
// (Options.Replicas, --nats-replicas) so that an acknowledged event is
// on a majority of nodes.
//
// Waiting is woken by a subscription (an ordered consumer that delivers
// the headers of the run's events as they are stored), never by polling.
// Every consumer is deleted when its reader is done with it (each costs
// the server work on every event appended).
//
// A participant's waiter (a worker's ask --wait) is woken instead by
// core NATS wake-ups, and its safety rescan reads the participant's wake
// record in WakeStream, which writers publish before they append, not
// the log (wake.go; docs/nats.md, Wake records and the rescan).
//
// Mail. The per-agent mail tree lives in the key-value bucket MailBucket
// (see Mail), with the projection mark of each run: how far the run's
// messages have been copied into it.
//
// Snapshots. A process that opens a run starts from the run's snapshot
// in SnapshotBucket (its whole state as of a seq, gzip-compressed JSON)
// and reads only the events after it. The snapshot is a projection, never
// the source of truth: it is used only if the stream's message at its seq
// still has the SHA-256 it names and the projection mark has reached its
// seq; otherwise the run is replayed from seq 1. Its writer moves the
// mark first, then puts the snapshot, so a crash between the two leaves
// the mark ahead (safe), never the snapshot. Writers write it after
// bursts (snapshotDue), not every commit; only processes that may move
// the mark do (the leader's, or any without authorization): a worker's
// credentials read snapshots and cannot write them (docs/nats.md,
// Snapshots).
//
// Locks. Creators of runs and tasks take turns through the key agents of
// the bucket LockBucket (see Store.LockAgents); nothing else locks.
//
// Reads go to each stream's leader (no direct gets from replicas), so a
// process reads what any process was told is stored.
package nats
