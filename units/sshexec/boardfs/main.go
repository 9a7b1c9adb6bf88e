package boardfs

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Main runs `herd board SUBCOMMAND ARGS...` (args without "herd board"):
//
//	put-file [-mode 0644] [-allow-setid] [-parent-mode 0700] -from STAGED PATH
//	rm-file PATH
//
// put-file reads the content from STAGED (a regular file, opened without
// following a link, removed once read) and writes it to PATH with
// PutFile; rm-file removes PATH with RemoveFile. It returns the exit
// status: 0, RefusedExit for ErrRefused, 1 for other failures, 2 for a
// usage error. Errors go to stderr, one line.
func Main(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "herd board: usage: herd board put-file|rm-file ...")
		return 2
	}
	fs := flag.NewFlagSet("herd board "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var err error
	switch args[0] {
	case "put-file":
		mode := fs.String("mode", "0644", "octal file mode")
		parentMode := fs.String("parent-mode", "", "octal mode of the file's directory, owned by root (empty: leave it)")
		allowSetID := fs.Bool("allow-setid", false, "permit setuid/setgid bits")
		from := fs.String("from", "", "staged file holding the content (removed once read)")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 1 || *from == "" {
			fmt.Fprintln(stderr, "herd board: usage: herd board put-file [-mode M] [-allow-setid] [-parent-mode M] -from STAGED PATH")
			return 2
		}
		m, err1 := strconv.ParseUint(*mode, 8, 32)
		var pm uint64
		var err2 error
		if *parentMode != "" {
			pm, err2 = strconv.ParseUint(*parentMode, 8, 32)
		}
		if err1 != nil || err2 != nil || pm > 0o777 {
			fmt.Fprintf(stderr, "herd board: put-file: bad -mode %q or -parent-mode %q\n", *mode, *parentMode)
			return 2
		}
		err = putFrom(fs.Arg(0), *from, PutOptions{Mode: uint32(m), AllowSetID: *allowSetID, ParentMode: uint32(pm)})
	case "rm-file":
		if fs.Parse(args[1:]) != nil || fs.NArg() != 1 {
			fmt.Fprintln(stderr, "herd board: usage: herd board rm-file PATH")
			return 2
		}
		err = RemoveFile(fs.Arg(0))
	default:
		fmt.Fprintf(stderr, "herd board: unknown subcommand %q (want put-file or rm-file)\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "herd board: %s: %v\n", args[0], err)
		if errors.Is(err, ErrRefused) {
			return RefusedExit
		}
		return 1
	}
	return 0
}

// putFrom writes the staged file's content to p and removes the staged
// file, whatever happens.
func putFrom(p, staged string, opt PutOptions) error {
	fd, err := unix.Open(staged, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("open staged content %s: %w", staged, err)
	}
	defer os.Remove(staged)
	f := os.NewFile(uintptr(fd), staged)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("staged content %s is not a regular file", staged)
	}
	return PutFile(p, f, opt)
}
