package bootstrap

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

func TestFormed(t *testing.T) {
	alive := func(n string) api.GossipMember { return api.GossipMember{Name: n, State: "alive"} }
	tests := []struct {
		name string
		st   api.ClusterStatus
		ok   bool
		why  string
	}{
		{"formed", api.ClusterStatus{Leader: "b1", Members: []api.GossipMember{alive("b1"), alive("b2")}}, true, ""},
		{"no leader", api.ClusterStatus{Members: []api.GossipMember{alive("b1"), alive("b2")}}, false, "no leader elected"},
		{"member missing", api.ClusterStatus{Leader: "b1", Members: []api.GossipMember{alive("b1")}}, false, "1 of 2 boards alive (waiting for b2)"},
		{"member suspect", api.ClusterStatus{Leader: "b1", Members: []api.GossipMember{alive("b1"), {Name: "b2", State: "suspect"}}}, false, "waiting for b2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := Formed(tt.st, []string{"b1", "b2"})
			if ok != tt.ok || !strings.Contains(why, tt.why) {
				t.Errorf("Formed = %v, %q; want %v, %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}

func TestWaitForCluster(t *testing.T) {
	var calls atomic.Int32
	status := func(context.Context) (api.ClusterStatus, error) {
		switch calls.Add(1) {
		case 1:
			return api.ClusterStatus{}, errors.New("connection refused")
		case 2:
			return api.ClusterStatus{Members: []api.GossipMember{{Name: "b1", State: "alive"}}}, nil
		}
		return api.ClusterStatus{Leader: "b1", Members: []api.GossipMember{{Name: "b1", State: "alive"}}}, nil
	}
	var seen []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := WaitForCluster(ctx, status, []string{"b1"}, time.Millisecond, func(s string) { seen = append(seen, s) })
	if err != nil || st.Leader != "b1" {
		t.Fatalf("WaitForCluster = %+v, %v", st, err)
	}
	if len(seen) != 2 || !strings.Contains(seen[0], "not reachable") || seen[1] != "no leader elected" {
		t.Errorf("progress = %q", seen)
	}

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		never := func(context.Context) (api.ClusterStatus, error) {
			cancel()
			return api.ClusterStatus{Leader: "b1"}, nil
		}
		_, err := WaitForCluster(ctx, never, []string{"b1", "b2"}, time.Hour, nil)
		if !errors.Is(err, ErrNotFormed) || !strings.Contains(err.Error(), "waiting for b1, b2") {
			t.Errorf("err = %v", err)
		}
	})
}
