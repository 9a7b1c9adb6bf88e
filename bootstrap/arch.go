package bootstrap

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Release architectures: the suffix of herd-linux-<arch> in a release.
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
	ArchARMv7 = "armv7"
	ArchARMv6 = "armv6"
	// archARM is a 32-bit ARM binary whose ARM version is unknown (not a
	// Go binary, or built without GOARM in its build info).
	archARM = "arm"
)

// Architectures lists the release architectures, as in a --dist folder.
var Architectures = []string{ArchAMD64, ArchARM64, ArchARMv7, ArchARMv6}

// ErrUnsupportedArch: a board's `uname -m` names a CPU herd has no build for.
var ErrUnsupportedArch = errors.New("bootstrap: unsupported architecture")

// GoArch maps a board's `uname -m` to the release binary it needs:
// x86_64 → amd64, aarch64/arm64 → arm64, armv7l/armv8l → armv7 (a 32-bit
// userland on an ARMv8 CPU), armv6l → armv6.
func GoArch(machine string) (string, error) {
	switch strings.TrimSpace(machine) {
	case "x86_64", "amd64":
		return ArchAMD64, nil
	case "aarch64", "arm64":
		return ArchARM64, nil
	case "armv7l", "armv7", "armv8l":
		return ArchARMv7, nil
	case "armv6l", "armv6":
		return ArchARMv6, nil
	}
	return "", fmt.Errorf("%w: uname -m says %q (herd is built for x86_64, aarch64, armv7l and armv6l)", ErrUnsupportedArch, machine)
}

// BinaryArch tells which architecture the executable at path is for: from
// its Go build info (GOARCH, GOARM) when it has one, else from its ELF
// header (32-bit ARM then reads as "arm", version unknown).
func BinaryArch(path string) (string, error) {
	if bi, err := buildinfo.ReadFile(path); err == nil {
		var goarch, goarm string
		for _, s := range bi.Settings {
			switch s.Key {
			case "GOARCH":
				goarch = s.Value
			case "GOARM":
				goarm = s.Value
			}
		}
		switch goarch {
		case "amd64":
			return ArchAMD64, nil
		case "arm64":
			return ArchARM64, nil
		case "arm":
			switch strings.SplitN(goarm, ",", 2)[0] {
			case "7":
				return ArchARMv7, nil
			case "6", "5":
				return ArchARMv6, nil
			}
			return archARM, nil
		case "":
			// no GOARCH setting: fall through to the ELF header
		default:
			return "", fmt.Errorf("bootstrap: %s is built for GOARCH=%s, not a board architecture", path, goarch)
		}
	}
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %s is not a Linux executable: %w", path, err)
	}
	defer f.Close()
	switch {
	case f.Machine == elf.EM_X86_64:
		return ArchAMD64, nil
	case f.Machine == elf.EM_AARCH64:
		return ArchARM64, nil
	case f.Machine == elf.EM_ARM:
		return archARM, nil
	}
	return "", fmt.Errorf("bootstrap: %s is an ELF executable for %v, not a board architecture", path, f.Machine)
}

// Runs reports whether a binary built for binArch runs on a board needing
// boardArch: the same, or an ARMv6 (or version-unknown ARM) binary on an
// ARMv7 board.
func Runs(binArch, boardArch string) bool {
	switch {
	case binArch == boardArch:
		return true
	case boardArch == ArchARMv7 && (binArch == ArchARMv6 || binArch == archARM):
		return true
	case boardArch == ArchARMv6 && binArch == archARM:
		return true
	}
	return false
}

// Binaries says where the herd binaries come from. At most one of Single
// and Dist is set; Default is used when neither is.
type Binaries struct {
	// Single is one binary for every board (--herd-binary); boards of
	// another architecture are refused.
	Single string
	// Dist is a release folder holding herd-linux-<arch> (--dist).
	Dist string
	// Default is a herd binary found next to herdctl (bin/herd), used for
	// boards of its own architecture.
	Default string
}

// Validate checks that Single and Dist are not both set.
func (b Binaries) Validate() error {
	if b.Single != "" && b.Dist != "" {
		return errors.New("bootstrap: give either a single herd binary or a dist folder, not both")
	}
	return nil
}

// PathFor returns the binary to install on a board of arch (a release
// architecture) and checks that it is built for it; archOf tells a file's
// architecture (BinaryArch).
func (b Binaries) PathFor(arch string, archOf func(string) (string, error)) (string, error) {
	var path, source string
	switch {
	case b.Single != "":
		path, source = b.Single, "--herd-binary"
	case b.Dist != "":
		path, source = filepath.Join(b.Dist, "herd-linux-"+arch), "--dist"
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("bootstrap: no herd binary for %s boards: %w", arch, err)
		}
	case b.Default != "":
		path, source = b.Default, "the herd binary next to herdctl"
	default:
		return "", fmt.Errorf("bootstrap: no herd binary for %s boards: use --herd-binary FILE or --dist DIR (with herd-linux-%s)", arch, arch)
	}
	got, err := archOf(path)
	if err != nil {
		return "", err
	}
	if !Runs(got, arch) {
		hint := ""
		if b.Dist == "" {
			hint = fmt.Sprintf("; use --dist DIR with herd-linux-%s for a mixed fleet", arch)
		}
		return "", fmt.Errorf("bootstrap: %s (%s) is built for %s, the board needs %s%s", path, source, got, arch, hint)
	}
	return path, nil
}
