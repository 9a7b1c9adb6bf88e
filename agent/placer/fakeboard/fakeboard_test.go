package fakeboard

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/placer/boardapi"
	"github.com/herd-dev/herd/units"
)

const unitA = "herd-a.service"

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	f := New()
	b := f.Board("n1")
	content := []byte("[Unit]\nX-Herd-Pod=a\n")
	path := UnitDir + "/" + unitA

	if err := f.PutFile(ctx, "n1", path, content, boardapi.FileOptions{Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	got, err := f.ShowUnits(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := []units.UnitState{{Unit: unitA, FileHash: units.Hash(content)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("file only (-want +got):\n%s", diff)
	}
	if err := f.Systemctl(ctx, "n1", "start", "herd-missing.service"); !errors.Is(err, ErrCommand) {
		t.Fatalf("start of a unit with no file: err = %v, want ErrCommand", err)
	}
	// As systemd does, a start loads a unit it has never seen from disk.
	if err := f.Systemctl(ctx, "n1", "start", unitA); err != nil {
		t.Fatalf("start of a never-loaded unit with a file: %v", err)
	}
	if s, _ := b.Unit(unitA); s.LoadState != "loaded" || s.ActiveState != "active" {
		t.Fatalf("after a start without daemon-reload: %+v", s)
	}
	for _, verb := range []string{"daemon-reload", "enable", "start"} {
		var args []string
		if verb != "daemon-reload" {
			args = []string{unitA}
		}
		if err := f.Systemctl(ctx, "n1", verb, args...); err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
	}
	s, _ := b.Unit(unitA)
	if s.ActiveState != "active" || s.SubState != "running" || s.MainPID == 0 || s.UnitFileState != "enabled" || s.LoadState != "loaded" {
		t.Fatalf("after start: %+v", s)
	}
	if diff := cmp.Diff([]string{unitA}, b.ActiveUnits()); diff != "" {
		t.Fatalf("active (-want +got):\n%s", diff)
	}

	// A changed file needs a reload.
	b.WriteFile(path, append(content, '#'), 0o644)
	if s, _ := b.Unit(unitA); !s.NeedDaemonReload || !b.NeedsReload() {
		t.Fatalf("changed file: NeedDaemonReload false: %+v", s)
	}
	pid := s.MainPID
	if err := f.Systemctl(ctx, "n1", "daemon-reload"); err != nil {
		t.Fatal(err)
	}
	if err := f.Systemctl(ctx, "n1", "restart", unitA); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Unit(unitA); s.MainPID == pid || s.NeedDaemonReload {
		t.Fatalf("after restart: %+v (old pid %d)", s, pid)
	}

	// Failed, then removed: stays loaded (not-found) until reset-failed.
	if err := b.Fail(unitA, 3); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"disable", unitA}} {
		if err := f.Systemctl(ctx, "n1", c[0], c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Remove(ctx, "n1", path); err != nil {
		t.Fatal(err)
	}
	if err := f.Systemctl(ctx, "n1", "daemon-reload"); err != nil {
		t.Fatal(err)
	}
	if s, ok := b.Unit(unitA); !ok || s.LoadState != "not-found" || s.ActiveState != "failed" || s.ExecMainStatus != 3 {
		t.Fatalf("removed failed unit: %+v %v", s, ok)
	}
	if err := f.Systemctl(ctx, "n1", "reset-failed", unitA); err != nil {
		t.Fatal(err)
	}
	if s, ok := b.Unit(unitA); ok {
		t.Fatalf("after reset-failed the unit is still known: %+v", s)
	}
	if _, err := f.ReadFile(ctx, "n1", path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of removed file: %v, want ErrNotExist", err)
	}
	if n := b.CallCount("systemctl"); n != 10 {
		t.Errorf("systemctl calls = %d, want 10: %q", n, b.CallStrings())
	}
}

func TestUnreachableAndHook(t *testing.T) {
	ctx := context.Background()
	f := New()
	b := f.Board("n1")
	b.SetUnreachable(true)
	if _, err := f.ShowUnits(ctx, "n1"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("ShowUnits: %v, want ErrUnreachable", err)
	}
	if err := f.PutFile(ctx, "n1", "/x", nil, boardapi.FileOptions{Mode: 0o644}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("PutFile: %v", err)
	}
	if len(b.Files()) != 0 {
		t.Fatal("an unreachable board took a file")
	}
	b.SetUnreachable(false)
	boom := errors.New("boom")
	b.SetHook(func(c Call) error {
		if c.Op == "Remove" {
			return boom
		}
		return nil
	})
	if err := f.Remove(ctx, "n1", "/x"); !errors.Is(err, boom) {
		t.Fatalf("Remove with hook: %v", err)
	}
	b.SetProbe(func(c boardapi.ProbeCommand) (int, error) { return len(c.Argv), nil })
	if st, err := f.Probe(ctx, "n1", boardapi.ProbeCommand{Argv: []string{"a", "b"}}); err != nil || st != 2 {
		t.Fatalf("Probe = %d, %v", st, err)
	}
	want := []string{"ShowUnits", "PutFile /x", "Remove /x", "Probe a b"}
	if diff := cmp.Diff(want, b.CallStrings()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestStartAsAndCrash(t *testing.T) {
	ctx := context.Background()
	f := New()
	b := f.Board("n1")
	b.StartAs(unitA, "failed", "failed")
	b.WriteFile(UnitDir+"/"+unitA, []byte("x"), 0o644)
	if err := f.Systemctl(ctx, "n1", "daemon-reload"); err != nil {
		t.Fatal(err)
	}
	if err := f.Systemctl(ctx, "n1", "start", unitA); !errors.Is(err, ErrCommand) {
		t.Fatalf("failing start: %v", err)
	}
	b.StartAs(unitA, "", "")
	if err := f.Systemctl(ctx, "n1", "start", unitA); err != nil {
		t.Fatal(err)
	}
	if err := b.Crash(unitA, 2); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Unit(unitA); s.NRestarts != 1 || s.ExecMainStatus != 2 || s.ActiveState != "active" {
		t.Fatalf("after crash: %+v", s)
	}
}
