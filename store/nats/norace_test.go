//go:build !race

package nats

// raceEnabled: see race_test.go.
const raceEnabled = false
