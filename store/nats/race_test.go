//go:build race

package nats

// raceEnabled says the tests run under the race detector, whose
// instrumentation allocates on its own: byte counts measured then are
// not the code's (the standard library skips its allocation tests so).
const raceEnabled = true
