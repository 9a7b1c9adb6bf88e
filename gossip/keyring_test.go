package gossip

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"
)

// TestAcceptKeysRotation: a member that encrypts with the new gossip key
// joins one that still encrypts with the old key and accepts the new, and
// once the old key is dropped a member holding only it is shut out.
func TestAcceptKeysRotation(t *testing.T) {
	oldKey, newKey := newKey(t), newKey(t)
	aCfg := testConfig(t, "a", oldKey)
	aCfg.AcceptKeys = [][]byte{newKey}
	a := startNode(t, aCfg)
	bCfg := testConfig(t, "b", newKey)
	bCfg.AcceptKeys = [][]byte{oldKey}
	b := startNode(t, bCfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Join(ctx, []string{a.LocalMember().Address()}); err != nil {
		t.Fatalf("join during the rotation: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, "gossip to agree", func() error {
		if a.NumMembers() != 2 || b.NumMembers() != 2 {
			return errors.New("a sees " + states(a) + ", b sees " + states(b))
		}
		return nil
	})

	// After the rotation: c holds only the new key and joins; d holds only
	// the old one and cannot.
	c := startNode(t, testConfig(t, "c", newKey))
	if _, err := c.Join(ctx, []string{b.LocalMember().Address()}); err != nil {
		t.Fatalf("join with the new key: %v", err)
	}
	d := startNode(t, testConfig(t, "d", oldKey))
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if n, err := d.Join(short, []string{c.LocalMember().Address()}); !errors.Is(err, ErrJoin) || n != 0 {
		t.Fatalf("join of an old-key-only member to a new-key-only one = %d, %v; want 0, ErrJoin", n, err)
	}
}

func TestAcceptKeysValidated(t *testing.T) {
	cfg := testConfig(t, "a", newKey(t))
	cfg.AcceptKeys = [][]byte{[]byte("short")}
	if err := cfg.Validate(); err == nil {
		t.Fatal("a short accepted key passed Validate")
	}
}
