// Command herdctl controls a herd cluster; see package cli.
package main

import (
	"os"

	"github.com/herd-dev/herd/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
