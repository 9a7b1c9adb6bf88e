// Command herd is the agent that runs on every board.
package main

import (
	"os"

	"github.com/herd-dev/herd/agent"
)

func main() { os.Exit(agent.Main(os.Args[1:], os.Stdout, os.Stderr)) }
