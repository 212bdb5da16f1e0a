//go:build !unix

package file

import (
	"errors"

	"github.com/crew-dev/crew/store"
)

func (l *Log) watchFIFO([]string) (store.Waiter, error) {
	return nil, errors.New("no FIFOs on this system")
}

func (l *Log) poke(string) {}

func (l *Log) removeStaleWakes() int { return 0 }
