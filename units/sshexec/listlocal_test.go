package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/artifact"
)

// listFixture is a board in temporary directories for the listing: unit
// files, disconnect marks, artifact statuses, the report seq file, and a
// fake systemctl in bin. The fake logs each call (TZ and argv,
// NUL-separated, a line per call) to bin/systemctl.log; list-units prints
// bin/list-units.out; show prints an Id and LoadState=loaded block per
// unit asked (ActiveState=active too for a timer); a file
// bin/fail-list-units or bin/fail-show makes that verb fail with status 1.
type listFixture struct {
	bin, units, marks, status, seq string
}

func newListFixture(t testing.TB) *listFixture {
	t.Helper()
	root := t.TempDir()
	f := &listFixture{
		bin:    filepath.Join(root, "bin"),
		units:  filepath.Join(root, "system"),
		marks:  filepath.Join(root, "disconnect"),
		status: filepath.Join(root, "artifacts"),
		seq:    filepath.Join(root, "unitreport.seq"),
	}
	for _, d := range []string{f.bin, f.units, f.marks, f.status} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(f.bin, "systemctl"), `#!/bin/sh
d=$(dirname "$0")
{ printf '%s\0' "TZ=${TZ-}" "$@"; printf '\n'; } >> "$d/systemctl.log"
case "$1" in
list-units) [ -e "$d/fail-list-units" ] && { echo "Failed to connect to bus: No such file or directory" >&2; exit 1; }
	cat "$d/list-units.out" ;;
show) [ -e "$d/fail-show" ] && { echo "Failed to get properties: Access denied" >&2; exit 1; }
	shift; while [ "$1" != -- ]; do shift; done; shift
	sep=; for u; do
		printf '%sId=%s\nLoadState=loaded\n' "$sep" "$u"
		case $u in *.timer) printf 'ActiveState=active\n';; esac
		sep='
'
	done ;;
esac
`)
	os.Chmod(filepath.Join(f.bin, "systemctl"), 0o755)
	writeFile(t, filepath.Join(f.bin, "list-units.out"), "")
	return f
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listUnits sets what list-units prints, a line each.
func (f *listFixture) listUnits(t testing.TB, lines ...string) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	writeFile(t, filepath.Join(f.bin, "list-units.out"), b.String())
}

// lister is the listing of this board.
func (f *listFixture) lister() lister {
	return lister{UnitDir: f.units, ReportSeqFile: f.seq, DisconnectDir: f.marks, StatusDir: f.status,
		Systemctl: filepath.Join(f.bin, "systemctl"), Max: MaxListing}
}

// script is showUnitsScript reading this board's paths.
func (f *listFixture) script() (string, error) {
	s := showUnitsScript()
	for _, r := range []struct{ old, new string }{
		{"d=" + UnitDir + "\n", "d='" + f.units + "'\n"},
		{ReportSeqFile, f.seq},
		{artifact.StatusDir, f.status},
		{units.DisconnectDir, f.marks},
	} {
		if !strings.Contains(s, r.old) {
			return "", fmt.Errorf("the script does not read %s", r.old)
		}
		s = strings.ReplaceAll(s, r.old, r.new)
	}
	return s, nil
}

// runScript runs the script on this board with shell sh (default "sh"),
// the fake systemctl first in PATH, in the C locale as on a lab board
// (C.UTF-8 collates as C).
func (f *listFixture) runScript(sh ...string) (stdout, stderr []byte, err error) {
	if len(sh) == 0 {
		sh = []string{"sh"}
	}
	script, err := f.script()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(sh[0], append(sh[1:], "-c", script, "herd-show-units")...)
	cmd.Dir = f.bin // the glob must not depend on the working directory
	cmd.Env = append(os.Environ(), "PATH="+f.bin+":"+os.Getenv("PATH"), "LC_ALL=C")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return out, errb.Bytes(), err
}

// calls returns the fake systemctl's log and clears it.
func (f *listFixture) calls(t *testing.T) string {
	t.Helper()
	p := filepath.Join(f.bin, "systemctl.log")
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	os.Remove(p)
	return string(b)
}

// mixedBoard fills f with pods' units, instances of templates, stray
// names, disconnect marks and artifact statuses; it returns the unit
// files written.
func mixedBoard(t testing.TB, f *listFixture) map[string]string {
	t.Helper()
	writeFile(t, f.seq, "1764700000000000000 42\nignored\n")
	for name, content := range map[string]string{
		"herd-web-1.service": "mismatch http://files.lan/x: sha256 of the 3 bytes downloaded is abc, want def\n2 1764700000 0123456789abcdef\n",
		"herd-other.service": "unreachable not listed\n",
	} {
		writeFile(t, filepath.Join(f.status, name), content)
	}
	f.listUnits(t, "herd-web-1.service loaded active running web-1", "herd-gone.service not-found inactive dead gone",
		"herd-Up.service loaded active running x", "herd-web-1@abc1.service loaded active running web-1",
		"herd-orph@2.service loaded failed failed orph", "herd-x@y@z.service loaded active running x",
		"herd-web-1@A.service loaded active running x", "herd-x_kick@1.service loaded active running x")
	files := map[string]string{
		"herd-web-1.service":      "[Service]\nExecStart=/bin/web\n",
		"herd-web-1@.service":     "a template: not listed as a pod's unit",
		"herd-web-1_kick.service": "a kick unit: not listed",
		"herd-new.service":        "[Service]\nExecStart=/bin/new\n",
		"herd-x y.service":        "stray",
		"herd-[a].service":        "stray",
		"herd-b*.service":         "stray",
		"other.service":           "not herd",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(f.units, name), content)
	}
	if err := os.Mkdir(filepath.Join(f.units, "herd-dir.service"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"herd-new.service", "herd-other.service"} {
		writeFile(t, filepath.Join(f.marks, name), "")
	}
	return files
}

// TestListLocalMatchesScript: on the same board, ListLocal prints what
// the script prints, byte for byte, makes the same systemctl calls (argv
// and TZ), and ParseListing reads the same from both; a failing
// systemctl is an error of both.
func TestListLocalMatchesScript(t *testing.T) {
	symlink := func(t *testing.T, target, name string) {
		t.Helper()
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		board func(t *testing.T, f *listFixture)
		// check looks at what both parsed, so that a case proves what
		// it says (not two empty listings alike).
		check func(t *testing.T, states []units.UnitState, mark string)
		// wantStatus: both fail, the script with this status.
		wantStatus int
	}{{
		name:  "pods, instances, strays, marks and artifact failures",
		board: func(t *testing.T, f *listFixture) { mixedBoard(t, f) },
		check: func(t *testing.T, states []units.UnitState, mark string) {
			if len(states) != 4 || mark != "1764700000000000000 42" {
				t.Errorf("got %d units, mark %q; want 4 and the seq file's", len(states), mark)
			}
		},
	}, {
		name: "no herd units at all",
		board: func(t *testing.T, f *listFixture) {
			writeFile(t, f.seq, "7 1\n")
			f.listUnits(t, "sshd.service loaded active running OpenSSH")
			writeFile(t, filepath.Join(f.units, "other.service"), "x")
		},
		check: func(t *testing.T, states []units.UnitState, mark string) {
			if len(states) != 0 || mark != "7 1" {
				t.Errorf("got %v, mark %q; want none and 7 1", states, mark)
			}
		},
	}, {
		name: "timers",
		board: func(t *testing.T, f *listFixture) {
			f.listUnits(t, "herd-tick.timer loaded active waiting tick", "herd-tick.service loaded inactive dead tick")
			writeFile(t, filepath.Join(f.units, "herd-tick.timer"), "[Timer]\nOnCalendar=hourly\n")
			writeFile(t, filepath.Join(f.units, "herd-tick.service"), "[Service]\nExecStart=/bin/tick\n")
			writeFile(t, filepath.Join(f.units, "herd-lone.timer"), "[Timer]\nOnCalendar=daily\n")
			writeFile(t, filepath.Join(f.units, "herd-x_y.timer"), "stray")
		},
		check: func(t *testing.T, states []units.UnitState, mark string) {
			var timed []string
			for _, s := range states {
				if s.TimerActiveState == "active" && s.TimerFileHash != "" {
					timed = append(timed, s.Unit)
				}
			}
			if diff := cmp.Diff([]string{"herd-lone.service", "herd-tick.service"}, timed); diff != "" {
				t.Errorf("units with a timer (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "symbolic links",
		board: func(t *testing.T, f *listFixture) {
			elsewhere := t.TempDir()
			writeFile(t, filepath.Join(elsewhere, "real"), "[Service]\nExecStart=/bin/linked\n")
			symlink(t, filepath.Join(elsewhere, "real"), filepath.Join(f.units, "herd-link.service"))
			symlink(t, filepath.Join(elsewhere, "gone"), filepath.Join(f.units, "herd-dangling.service"))
			symlink(t, elsewhere, filepath.Join(f.units, "herd-dirlink.service"))
			symlink(t, filepath.Join(elsewhere, "real"), filepath.Join(f.marks, "herd-link.service"))
			symlink(t, filepath.Join(elsewhere, "real"), filepath.Join(f.status, "herd-link.service"))
		},
		check: func(t *testing.T, states []units.UnitState, mark string) {
			want := []units.UnitState{{Unit: "herd-link.service", LoadState: "loaded",
				FileHash: units.Hash([]byte("[Service]\nExecStart=/bin/linked\n")), DisconnectMark: true}}
			if diff := cmp.Diff(want, states); diff != "" {
				t.Errorf("units (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "an over-long seq line",
		board: func(t *testing.T, f *listFixture) {
			writeFile(t, f.seq, strings.Repeat("9", maxMark+1)+"\n")
			f.listUnits(t, "herd-a.service loaded active running a")
		},
		check: func(t *testing.T, states []units.UnitState, mark string) {
			if len(states) != 1 || mark != "" {
				t.Errorf("got %d units, mark %q; want 1 and none", len(states), mark)
			}
		},
	}, {
		name: "a seq line padded, without a newline",
		board: func(t *testing.T, f *listFixture) {
			writeFile(t, f.seq, "  \t5 6 \t")
			f.listUnits(t, "  herd-a.service\tloaded active running a")
		},
		check: func(t *testing.T, states []units.UnitState, mark string) {
			if len(states) != 1 || mark != "5 6" {
				t.Errorf("got %d units, mark %q; want 1 and 5 6", len(states), mark)
			}
		},
	}, {
		name: "only instances, more than are listed",
		board: func(t *testing.T, f *listFixture) {
			var lines []string
			for i := range maxInstanceNames + 10 {
				lines = append(lines, fmt.Sprintf("herd-job-%d@%x.service loaded active running run", i%3, i))
			}
			f.listUnits(t, lines...)
		},
		check: func(t *testing.T, states []units.UnitState, mark string) {
			if len(states) != 3 {
				t.Errorf("got %d units, want the 3 jobs", len(states))
			}
		},
	}, {
		name: "list-units fails",
		board: func(t *testing.T, f *listFixture) {
			writeFile(t, filepath.Join(f.bin, "fail-list-units"), "")
		},
		wantStatus: 1,
	}, {
		name: "show fails",
		board: func(t *testing.T, f *listFixture) {
			mixedBoard(t, f)
			writeFile(t, filepath.Join(f.bin, "fail-show"), "")
		},
		wantStatus: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newListFixture(t)
			tc.board(t, f)
			script, stderr, serr := f.runScript()
			scriptCalls := f.calls(t)
			got, gerr := f.lister().list(testCtx(t))
			goCalls := f.calls(t)
			if diff := cmp.Diff(scriptCalls, goCalls); diff != "" {
				t.Errorf("systemctl calls (-script +ListLocal):\n%s", diff)
			}
			if tc.wantStatus != 0 {
				var ee *exec.ExitError
				if !errors.As(serr, &ee) || ee.ExitCode() != tc.wantStatus {
					t.Errorf("script: %v, want exit status %d", serr, tc.wantStatus)
				}
				var le *ListError
				if !errors.As(gerr, &le) || le.ExitCode() != tc.wantStatus || !strings.Contains(gerr.Error(), "Failed to") {
					t.Errorf("ListLocal: %v, want a *ListError with status %d and systemctl's message", gerr, tc.wantStatus)
				}
				return
			}
			if serr != nil {
				t.Fatalf("script: %v\n%s", serr, stderr)
			}
			if gerr != nil {
				t.Fatalf("ListLocal: %v", gerr)
			}
			if diff := cmp.Diff(string(script), string(got)); diff != "" {
				t.Errorf("output (-script +ListLocal):\n%s", diff)
			}
			sStates, sMark, err := ParseListing(script)
			if err != nil {
				t.Fatalf("ParseListing(script): %v", err)
			}
			gStates, gMark, err := ParseListing(got)
			if err != nil {
				t.Fatalf("ParseListing(ListLocal): %v", err)
			}
			if diff := cmp.Diff(sStates, gStates); diff != "" || sMark != gMark {
				t.Errorf("parsed (-script +ListLocal):\n%s\nmark %q, %q", diff, sMark, gMark)
			}
			tc.check(t, gStates, gMark)
		})
	}
}

// TestListLocalBounds: a systemctl that prints more than the cap is an
// error, not a cut listing, and a cancelled listing stops its systemctl.
func TestListLocalBounds(t *testing.T) {
	f := newListFixture(t)
	f.listUnits(t, "herd-a.service loaded active running "+strings.Repeat("x", 2000))
	l := f.lister()
	l.Max = 1000
	if _, err := l.list(testCtx(t)); !errors.Is(err, ErrOutputTooLarge) {
		t.Errorf("over the cap: %v, want ErrOutputTooLarge", err)
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	writeFile(t, filepath.Join(f.bin, "slow"), "#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 60\n")
	os.Chmod(filepath.Join(f.bin, "slow"), 0o755)
	l = f.lister()
	l.Systemctl = filepath.Join(f.bin, "slow")
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := l.list(ctx)
		errc <- err
	}()
	var pid int
	testutil.Until(t, 10*time.Second, "systemctl to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err == nil
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled listing: %v, want context.Canceled", err)
	}
	testutil.Until(t, 10*time.Second, "systemctl to be killed", func() bool { return processGone(pid) })
}

// BenchmarkListingScript and BenchmarkListingGo list the mixed board
// (mixedBoard: two pods, two instances, disconnect marks, an artifact
// failure) with the script and with ListLocal; the fake systemctl is a
// shell script in both, so the difference is the script's own
// processes.
func BenchmarkListingScript(b *testing.B) {
	f := newListFixture(b)
	mixedBoard(b, f)
	for b.Loop() {
		if _, stderr, err := f.runScript(); err != nil {
			b.Fatalf("%v: %s", err, stderr)
		}
	}
}

func BenchmarkListingGo(b *testing.B) {
	f := newListFixture(b)
	mixedBoard(b, f)
	l := f.lister()
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.list(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
