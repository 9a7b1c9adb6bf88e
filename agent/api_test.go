package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

func TestOpenAPITokensGeneratesOnceAndKeeps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	tf, err := openAPITokens(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.DataDir, APITokenFileName)
	if tf.Path() != path {
		t.Errorf("token file %s, want %s", tf.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated token file: %v mode %v, want 0600", err, fi.Mode())
	}
	first, _ := tf.Accepted()
	if len(first) != 1 || len(first[0]) < 43 {
		t.Fatalf("generated tokens %q, want one of >= 43 characters", first)
	}
	// A restart keeps the token clients already have.
	tf2, err := openAPITokens(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := tf2.Accepted(); again[0] != first[0] {
		t.Errorf("restart made a new token %q, want the kept %q", again[0], first[0])
	}

	// An explicit file is used as is; a bad one is an error naming it.
	own := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(own, []byte("mine-0123456789abcdef\nold-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.APITokenFile = own
	tf3, err := openAPITokens(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tf3.Accepted(); len(got) != 2 || got[0] != "mine-0123456789abcdef" {
		t.Errorf("explicit file tokens %q", got)
	}
	if err := os.WriteFile(own, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openAPITokens(cfg, log); err == nil || !strings.Contains(err.Error(), own) {
		t.Errorf("empty token file: %v, want an error naming %s", err, own)
	}
	cfg.APITokenFile = filepath.Join(t.TempDir(), "missing")
	if _, err := openAPITokens(cfg, log); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing token file: %v, want not exist", err)
	}
}

func TestAgentAPINeedsItsToken(t *testing.T) {
	f := newFleet(t, 1, 1)
	f.leader()
	a := f.agents[0].a
	noTok, _ := client.New(a.APIAddrs(), client.Options{Timeout: 5 * time.Second})
	_, err := noTok.Status(context.Background())
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Fatalf("agent API without a token: %v, want 401", err)
	}
	toks, err := api.ReadTokenFile(filepath.Join(f.agents[0].cfg.DataDir, APITokenFileName))
	if err != nil || toks[0] != a.APIToken() {
		t.Fatalf("token file %q (%v), agent token %q", toks, err, a.APIToken())
	}
	if _, err := f.client(0).Status(context.Background()); err != nil {
		t.Errorf("with the token: %v", err)
	}
}

func TestValidateAPIHosts(t *testing.T) {
	cfg := DevConfig("/tmp/x")
	cfg.APIHosts = []string{"herd.lan", "bad host"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `api_hosts[1] "bad host"`) {
		t.Errorf("Validate = %v, want an api_hosts[1] error", err)
	}
}

func TestLogsCommandIgnoresStatus(t *testing.T) {
	pod := &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-7x2kq"},
		Spec:   api.PodSpec{Node: "pi2"},
		Status: api.PodStatus{Unit: "sshd.service"}}
	node, argv := logsCommand(pod, httpapi.LogOptions{Tail: 5})
	if node != "pi2" || len(argv) < 2 || argv[1] != "--unit=herd-web-7x2kq.service" {
		t.Errorf("logs command %s %q: want pi2 and --unit=herd-web-7x2kq.service", node, argv)
	}
	for _, a := range argv {
		if strings.Contains(a, "sshd") {
			t.Errorf("argv %q follows status.unit", argv)
		}
	}
	// An overlapping job's runs are the instances of its template.
	pod.Spec.Owner = api.OwnerRef{Kind: api.KindJob, Name: "web"}
	pod.Spec.Schedule, pod.Spec.Concurrency = "hourly", api.ConcurrencyAllow
	if _, argv := logsCommand(pod, httpapi.LogOptions{}); len(argv) < 2 || argv[1] != "--unit=herd-web-7x2kq@*.service" {
		t.Errorf("logs command of an overlapping job's pod %q: want --unit=herd-web-7x2kq@*.service", argv)
	}
	if _, argv := logsCommand(pod, httpapi.LogOptions{Follow: true}); len(argv) < 2 || argv[1] != `_SYSTEMD_SLICE=system-herd\x2dweb\x2d7x2kq.slice` {
		t.Errorf("logs -f command of an overlapping job's pod %q: want the match _SYSTEMD_SLICE=system-herd\\x2dweb\\x2d7x2kq.slice", argv)
	}
}
