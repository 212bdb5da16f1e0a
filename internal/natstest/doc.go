// Package natstest starts real nats-server instances for tests, embedded in
// the test process: one JetStream server, or a JetStream cluster on
// loopback. Nothing needs installing: the server is the
// github.com/nats-io/nats-server/v2 module. Stores live in t.TempDir()
// and every server is shut down by t.Cleanup.
//
// Servers fsync every write (sync_interval: always), the durability
// setting the README asks of a single node: a published Jepsen analysis of
// NATS 2.12.1 found acknowledged writes lost under the default interval.
package natstest
