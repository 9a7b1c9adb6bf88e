package bootstrap

import (
	"debug/elf"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestGoArch(t *testing.T) {
	tests := []struct {
		machine, want string
	}{
		{"x86_64", ArchAMD64},
		{"aarch64", ArchARM64},
		{"arm64", ArchARM64},
		{"armv7l", ArchARMv7},
		{"armv8l", ArchARMv7},
		{"armv6l", ArchARMv6},
		{"x86_64\n", ArchAMD64},
		{"i686", ""},
		{"riscv64", ""},
		{"armv5tel", ""},
		{"mips", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			got, err := GoArch(tt.machine)
			if tt.want == "" {
				if !errors.Is(err, ErrUnsupportedArch) {
					t.Fatalf("GoArch(%q) = %q, %v; want ErrUnsupportedArch", tt.machine, got, err)
				}
				if !strings.Contains(err.Error(), "x86_64, aarch64, armv7l and armv6l") {
					t.Errorf("error %q does not say what is supported", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("GoArch(%q) = %q, %v; want %q", tt.machine, got, err, tt.want)
			}
		})
	}
}

func TestRuns(t *testing.T) {
	tests := []struct {
		bin, board string
		want       bool
	}{
		{ArchAMD64, ArchAMD64, true},
		{ArchAMD64, ArchARM64, false},
		{ArchARM64, ArchAMD64, false},
		{ArchARMv6, ArchARMv7, true},
		{ArchARMv7, ArchARMv6, false},
		{archARM, ArchARMv7, true},
		{archARM, ArchARMv6, true},
		{ArchARMv7, ArchARM64, false},
	}
	for _, tt := range tests {
		t.Run(tt.bin+" on "+tt.board, func(t *testing.T) {
			if got := Runs(tt.bin, tt.board); got != tt.want {
				t.Errorf("Runs(%s, %s) = %v, want %v", tt.bin, tt.board, got, tt.want)
			}
		})
	}
}

func TestBinaryArch(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content []byte
		want    string
		wantErr string
	}{
		{"elf amd64", fakeELF(elf.EM_X86_64, elf.ELFCLASS64), ArchAMD64, ""},
		{"elf arm64", fakeELF(elf.EM_AARCH64, elf.ELFCLASS64), ArchARM64, ""},
		{"elf arm", fakeELF(elf.EM_ARM, elf.ELFCLASS32), archARM, ""},
		{"elf riscv", fakeELF(elf.EM_RISCV, elf.ELFCLASS64), "", "not a board architecture"},
		{"shell script", []byte("#!/bin/sh\necho hi\n"), "", "not a Linux executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "-"), tt.content, 0o755)
			got, err := BinaryArch(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("BinaryArch = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("BinaryArch = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("go build info", func(t *testing.T) {
		exe, err := os.Executable()
		if err != nil {
			t.Skip(err)
		}
		want := map[string]string{"amd64": ArchAMD64, "arm64": ArchARM64}[runtime.GOARCH]
		if want == "" {
			t.Skipf("GOARCH %s", runtime.GOARCH)
		}
		if got, err := BinaryArch(exe); err != nil || got != want {
			t.Errorf("BinaryArch(test binary) = %q, %v; want %q", got, err, want)
		}
	})
}

func TestBinariesPathFor(t *testing.T) {
	dist := t.TempDir()
	amd := writeFile(t, dist, "herd-linux-amd64", fakeELF(elf.EM_X86_64, elf.ELFCLASS64), 0o755)
	arm64 := writeFile(t, dist, "herd-linux-arm64", fakeELF(elf.EM_AARCH64, elf.ELFCLASS64), 0o755)
	writeFile(t, dist, "herd-linux-armv7", fakeELF(elf.EM_X86_64, elf.ELFCLASS64), 0o755) // wrong build
	tests := []struct {
		name    string
		b       Binaries
		arch    string
		want    string
		wantErr string
	}{
		{"single", Binaries{Single: amd}, ArchAMD64, amd, ""},
		{"single wrong arch", Binaries{Single: amd}, ArchARM64, "", "is built for amd64, the board needs arm64; use --dist"},
		{"dist", Binaries{Dist: dist}, ArchARM64, arm64, ""},
		{"dist missing arch", Binaries{Dist: dist}, ArchARMv6, "", "no herd binary for armv6 boards"},
		{"dist mislabelled", Binaries{Dist: dist}, ArchARMv7, "", "is built for amd64, the board needs armv7"},
		{"default", Binaries{Default: amd}, ArchAMD64, amd, ""},
		{"default other arch", Binaries{Default: amd}, ArchARM64, "", "the herd binary next to herdctl"},
		{"nothing", Binaries{}, ArchAMD64, "", "use --herd-binary FILE or --dist DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.b.PathFor(tt.arch, BinaryArch)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PathFor = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("PathFor = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if err := (Binaries{Single: amd, Dist: dist}).Validate(); err == nil {
		t.Error("Validate accepted both Single and Dist")
	}
}
