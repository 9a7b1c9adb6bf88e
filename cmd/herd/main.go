// Command herd is the agent that runs on every board. `herd ssh-gate` is
// the forced command of the cluster SSH key (see units/sshgate); it is
// handled before the agent's command line so it stays small and exact.
package main

import (
	"os"

	"github.com/herd-dev/herd/agent"
	"github.com/herd-dev/herd/units/sshgate"
)

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "ssh-gate" {
		os.Exit(sshgate.Main(os.Args[2:], os.Environ(), os.Stderr))
	}
	os.Exit(agent.Main(os.Args[1:], os.Stdout, os.Stderr))
}
