package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/bootstrap"
	"github.com/herd-dev/herd/raftstore"
)

func TestVersionJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"version", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var v api.VersionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if v.Version != Version || v.StateFormat != raftstore.StateFormat {
		t.Errorf("got %+v, want version %q state format %d", v, Version, raftstore.StateFormat)
	}
	out.Reset()
	if code := Main([]string{"version"}, &out, &errOut); code != 0 || strings.TrimSpace(out.String()) != "herd "+Version {
		t.Errorf("plain version: exit %d, %q", code, out.String())
	}
	if code := Main([]string{"version", "-o", "yaml"}, &out, &errOut); code == 0 {
		t.Error("-o yaml accepted")
	}
}

func TestRestartSignalName(t *testing.T) {
	if got := unix.SignalName(RestartSignal); got != bootstrap.RestartSignal {
		t.Errorf("agent.RestartSignal is %s, bootstrap.RestartSignal says %s", got, bootstrap.RestartSignal)
	}
}
