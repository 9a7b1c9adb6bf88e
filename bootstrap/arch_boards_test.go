package bootstrap

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestGoArchBoards: what each Raspberry Pi (and PC) reports in `uname -m`
// and which release binary it gets.
func TestGoArchBoards(t *testing.T) {
	tests := []struct {
		board, machine, want string
	}{
		{"Pi 1 or Zero, ARMv6", "armv6l", ArchARMv6},
		{"Pi 2, 32-bit OS", "armv7l", ArchARMv7},
		{"Pi 3/4 or Zero 2, 32-bit kernel", "armv7l", ArchARMv7},
		// An ARMv8 CPU running a 32-bit kernel in AArch32 mode: the armv7
		// binary runs there.
		{"Pi 3/4, AArch32 kernel", "armv8l", ArchARMv7},
		// A 64-bit kernel says aarch64 even under a 32-bit userland
		// (Raspberry Pi OS 32-bit on a Pi 4); the static arm64 binary
		// needs nothing from the userland.
		{"Pi 3/4/5 or Zero 2, 64-bit kernel", "aarch64", ArchARM64},
		{"arm64 as BSD and macOS say it", "arm64", ArchARM64},
		{"x86 PC or VM", "x86_64", ArchAMD64},
		{"32-bit PC", "i686", ""},
		{"32-bit PC, i386", "i386", ""},
		{"big-endian arm64", "aarch64_be", ""},
		{"ARMv5", "armv5tel", ""},
	}
	for _, tt := range tests {
		t.Run(tt.board+" "+tt.machine, func(t *testing.T) {
			got, err := GoArch(tt.machine)
			if tt.want == "" {
				if !errors.Is(err, ErrUnsupportedArch) || !strings.Contains(err.Error(), `"`+tt.machine+`"`) {
					t.Fatalf("GoArch(%q) = %q, %v; want ErrUnsupportedArch naming %q", tt.machine, got, err, tt.machine)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("GoArch(%q) = %q, %v; want %q", tt.machine, got, err, tt.want)
			}
			if !slices.Contains(Architectures, got) {
				t.Errorf("GoArch(%q) = %q, not one of the release architectures %v", tt.machine, got, Architectures)
			}
		})
	}
}

// buildArch is the release architecture of this test binary, from its own
// build info (GOARCH, GOARM), or "" for one herd does not release.
func buildArch(t *testing.T) string {
	t.Helper()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("test binary without build info")
	}
	goarm := ""
	for _, s := range bi.Settings {
		if s.Key == "GOARM" {
			goarm = strings.SplitN(s.Value, ",", 2)[0]
		}
	}
	switch runtime.GOARCH {
	case "amd64":
		return ArchAMD64
	case "arm64":
		return ArchARM64
	case "arm":
		return map[string]string{"7": ArchARMv7, "6": ArchARMv6, "5": ArchARMv6}[goarm]
	}
	return ""
}

// TestBinaryArchSelf reads this very test binary, which scripts/test-arm
// builds for arm64 and armv7: what bootstrap says about a real Go binary
// of each architecture, including the 32-bit ARM versions.
func TestBinaryArchSelf(t *testing.T) {
	want := buildArch(t)
	if want == "" {
		t.Skipf("GOARCH %s is not a release architecture", runtime.GOARCH)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	got, err := BinaryArch(exe)
	if err != nil || got != want {
		t.Fatalf("BinaryArch(%s) = %q, %v; want %q", exe, got, err, want)
	}
	if !Runs(got, want) {
		t.Errorf("Runs(%s, %s) = false", got, want)
	}
}

// TestReleaseDist checks a folder made by scripts/release (which runs this
// test with HERD_DIST set): every herd-linux-<arch> and herdctl-linux-<arch>
// is there and built for <arch>, and `--dist` picks the right herd for each
// board architecture.
func TestReleaseDist(t *testing.T) {
	dist := os.Getenv("HERD_DIST")
	if dist == "" {
		t.Skip("set HERD_DIST to the absolute path of a release folder (scripts/release does)")
	}
	if !filepath.IsAbs(dist) {
		t.Fatalf("HERD_DIST=%s: want an absolute path (tests run in the package folder)", dist)
	}
	for _, arch := range Architectures {
		for _, cmd := range []string{"herd", "herdctl"} {
			p := filepath.Join(dist, cmd+"-linux-"+arch)
			got, err := BinaryArch(p)
			if err != nil || got != arch {
				t.Errorf("BinaryArch(%s) = %q, %v; want %q", p, got, err, arch)
			}
		}
		got, err := Binaries{Dist: dist}.PathFor(arch, BinaryArch)
		if want := filepath.Join(dist, "herd-linux-"+arch); err != nil || got != want {
			t.Errorf("PathFor(%s) = %q, %v; want %q", arch, got, err, want)
		}
	}
}
