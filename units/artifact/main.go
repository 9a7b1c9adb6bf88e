package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/herd-dev/herd/api"
)

// Words of the fetch command line.
const (
	subcommand = "fetch"
	unitFlag   = "--unit="
	setIDWord  = "setid"
	noSetID    = "-"
	groupWords = 5
)

// Argv is the command a pod's unit runs before its process to place its
// artifacts: the herd binary, "artifact", "fetch", "--unit=UNIT", "--",
// then five words per artifact: URL, SHA256, PATH, MODE and "setid" or
// "-" (AllowSetID). The artifacts must have passed admission and
// defaulting (api.Validate, api.SetDefaults). Main parses it back.
func Argv(unit string, arts []api.Artifact) []string {
	argv := []string{api.HerdBinary, "artifact", subcommand, unitFlag + unit, "--"}
	for _, a := range arts {
		setid := noSetID
		if a.AllowSetID {
			setid = setIDWord
		}
		mode := a.Mode
		if mode == "" {
			mode = api.DefaultArtifactMode
		}
		argv = append(argv, a.URL, a.SHA256, a.Path, mode, setid)
	}
	return argv
}

// parseArgs reads the arguments Argv puts after "artifact".
func parseArgs(args []string) (unit string, arts []api.Artifact, err error) {
	if len(args) < 3 || args[0] != subcommand || !strings.HasPrefix(args[1], unitFlag) || args[2] != "--" {
		return "", nil, errors.New("usage: herd artifact fetch --unit=UNIT -- URL SHA256 PATH MODE setid|- ...")
	}
	unit = strings.TrimPrefix(args[1], unitFlag)
	rest := args[3:]
	if len(rest) == 0 || len(rest)%groupWords != 0 {
		return "", nil, fmt.Errorf("want groups of %d words (URL SHA256 PATH MODE setid|-), got %d words", groupWords, len(rest))
	}
	for i := 0; i < len(rest); i += groupWords {
		g := rest[i : i+groupWords]
		a := api.Artifact{URL: g[0], SHA256: g[1], Path: g[2], Mode: g[3]}
		switch g[4] {
		case setIDWord:
			a.AllowSetID = true
		case noSetID:
		default:
			return "", nil, fmt.Errorf("artifact %d: %q is not setid or -", i/groupWords, g[4])
		}
		if !api.IsSHA256(a.SHA256) {
			return "", nil, fmt.Errorf("artifact %d: %q is not a sha256", i/groupWords, a.SHA256)
		}
		if _, err := a.Perm(); err != nil {
			return "", nil, err
		}
		arts = append(arts, a)
	}
	return unit, arts, nil
}

// Main runs `herd artifact ARGS...` (args without "herd artifact"), the
// command Argv renders, with DefaultConfig. It returns the exit status: 0,
// ExitUsage for bad arguments, or the Exit* status of the failure's Kind.
// The failure goes to stderr (the unit's journal) and to the status file.
// SIGTERM (systemctl stop) ends a backoff wait or a download at once.
func Main(args []string, stderr io.Writer) int {
	unit, arts, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "herd artifact: %v\n", err)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = DefaultConfig().Fetch(ctx, unit, arts)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "herd artifact: %s: %v\n", unit, err)
	var e *Error
	if !errors.As(err, &e) {
		return ExitFailed
	}
	return ExitStatus(e.Kind)
}

// ExitStatus is the exit status of a fetch that failed with kind k.
func ExitStatus(k Kind) int {
	switch k {
	case KindMismatch:
		return ExitMismatch
	case KindUnreachable:
		return ExitUnreachable
	case KindTooLarge:
		return ExitTooLarge
	case KindRefused:
		return ExitRefused
	}
	return ExitFailed
}
