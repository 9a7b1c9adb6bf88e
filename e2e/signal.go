//go:build e2e

package e2e

import (
	"os"
	"os/signal"
	"syscall"
)

// OnInterrupt calls f, on a goroutine of its own, with the first SIGINT or
// SIGTERM the process receives: the suite and the lab tools take their lab
// down on it.
func OnInterrupt(f func(os.Signal)) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { f(<-sigs) }()
}
