package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMemory(t *testing.T) {
	tests := []struct {
		in      string
		bytes   int64
		percent int
		err     string
	}{
		{"1", 1, 0, ""},
		{"4096", 4096, 0, ""},
		{"512K", 512 << 10, 0, ""},
		{"64M", 64 << 20, 0, ""},
		{"1G", 1 << 30, 0, ""},
		{"2T", 2 << 40, 0, ""},
		{"064M", 64 << 20, 0, ""},
		{"50%", 0, 50, ""},
		{"100%", 0, 100, ""},
		{"1%", 0, 1, ""},
		{"", 0, 0, "empty"},
		{"0", 0, 0, "greater than zero"},
		{"0M", 0, 0, "greater than zero"},
		{"0%", 0, 0, "between 1% and 100%"},
		{"101%", 0, 0, "between 1% and 100%"},
		{"64m", 0, 0, `did you mean "64M"`},
		{"1g", 0, 0, `did you mean "1G"`},
		{"64MB", 0, 0, "64MB"},
		{"64Mi", 0, 0, "64Mi"},
		{"1.5G", 0, 0, "whole number"},
		{"infinity", 0, 0, "leave the limit out"},
		{"-1M", 0, 0, "whole number"},
		{"+1M", 0, 0, "whole number"},
		{" 1M", 0, 0, "whole number"},
		{"1 M", 0, 0, "whole number"},
		{"1_000", 0, 0, "whole number"},
		{"1P", 0, 0, "suffix must be K, M, G or T"},
		{"M", 0, 0, "whole number"},
		{"%", 0, 0, "whole number"},
		{"5.5%", 0, 0, "whole number"},
		{"9999999T", 0, 0, "too large"},
		{"99999999999999999999", 0, 0, "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			b, p, err := ParseMemory(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseMemory(%q) = %d, %d, %v; want error containing %q", tt.in, b, p, err, tt.err)
				}
				if !errors.Is(err, ErrInvalidQuantity) {
					t.Errorf("error does not wrap ErrInvalidQuantity")
				}
				return
			}
			if err != nil || b != tt.bytes || p != tt.percent {
				t.Errorf("ParseMemory(%q) = %d, %d, %v; want %d, %d", tt.in, b, p, err, tt.bytes, tt.percent)
			}
			if (b == 0) == (p == 0) {
				t.Errorf("exactly one of bytes and percent must be non-zero")
			}
		})
	}
}

func TestParseCPU(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  string
	}{
		{"50%", 50, ""},
		{"150%", 150, ""},
		{"1%", 1, ""},
		{"025%", 25, ""},
		{"25600%", 25600, ""},
		{"25601%", 0, "between 1% and 25600%"},
		{"0%", 0, "between 1%"},
		{"", 0, "empty"},
		{"0.5", 0, "percentage of one core"},
		{"500m", 0, "percentage of one core"},
		{"2", 0, "percentage of one core"},
		{"12.5%", 0, "whole percentage"},
		{"-5%", 0, "whole percentage"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCPU(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidQuantity) {
					t.Fatalf("ParseCPU(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseCPU(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestRequest(t *testing.T) {
	tests := []struct {
		name    string
		r       Resources
		want    Request
		wantErr string
	}{
		{"none", Resources{}, Request{}, ""},
		{"limits only", Resources{MemoryLimit: "64M", CPULimit: "50%"}, Request{MemoryBytes: 64 << 20, CPUPercent: 50}, ""},
		{"requests win", Resources{MemoryLimit: "64M", MemoryRequest: "32M", CPULimit: "50%", CPURequest: "10%"}, Request{MemoryBytes: 32 << 20, CPUPercent: 10}, ""},
		{"percent limit reserves nothing", Resources{MemoryLimit: "50%"}, Request{}, ""},
		{"percent request", Resources{MemoryRequest: "25%"}, Request{MemoryPercent: 25}, ""},
		{"invalid memory", Resources{MemoryRequest: "lots"}, Request{}, "resources.memoryRequest"},
		{"invalid cpu limit", Resources{CPULimit: "1"}, Request{}, "resources.cpuLimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Request()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidQuantity) {
					t.Fatalf("Request() error = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Request() (-want +got):\n%s", diff)
			}
		})
	}
	if got := (Request{MemoryPercent: 25}).MemoryOn(1 << 30); got != 256<<20 {
		t.Errorf("MemoryOn(1G) of 25%% = %d, want %d", got, 256<<20)
	}
}
