package gossip

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type gotMessage struct {
	Kind byte
	Body string
}

func TestSendDeliversToOnMessage(t *testing.T) {
	key := newKey(t)
	got := make(chan gotMessage, 8)
	rcfg := testConfig(t, "recv", key)
	rcfg.OnMessage = func(kind byte, body []byte) { got <- gotMessage{kind, string(body)} }
	recv := startNode(t, rcfg)
	scfg := testConfig(t, "send", key)
	send := startNode(t, scfg)
	ctx, cancel := context.WithTimeout(context.Background(), joinWithin)
	defer cancel()
	if _, err := send.Join(ctx, []string{recv.LocalMember().Address()}); err != nil {
		t.Fatal(err)
	}
	waitAllAlive(t, []*Gossip{recv, send})

	big := strings.Repeat("x", MaxMessage)
	for _, m := range []gotMessage{{1, "hello"}, {7, big}} {
		if err := send.Send("recv", m.Kind, []byte(m.Body)); err != nil {
			t.Fatalf("Send(kind %d): %v", m.Kind, err)
		}
		select {
		case g := <-got:
			if diff := cmp.Diff(m, g); diff != "" {
				t.Errorf("received (-sent +got):\n%.300s", diff)
			}
		case <-time.After(joinWithin):
			t.Fatalf("message of kind %d not delivered within %v", m.Kind, joinWithin)
		}
	}
	if n := recv.MessagesDropped(); n != 0 {
		t.Errorf("MessagesDropped = %d, want 0", n)
	}
}

func TestSendRefuses(t *testing.T) {
	g := startNode(t, testConfig(t, "alone", newKey(t)))
	if err := g.Send("nobody", 1, []byte("x")); !errors.Is(err, ErrNotMember) {
		t.Errorf("Send to a stranger: %v, want ErrNotMember", err)
	}
	err := g.Send("alone", 1, bytes.Repeat([]byte{0}, MaxMessage+1))
	if err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("Send of an oversize body: %v, want an error naming the limit", err)
	}
}

func TestNotifyMsgNeverBlocks(t *testing.T) {
	block := make(chan struct{})
	cfg := testConfig(t, "slow", newKey(t))
	cfg.OnMessage = func(byte, []byte) { <-block }
	g := startNode(t, cfg)
	defer close(block)
	d := &delegate{g: g}
	// One message is taken by the blocked OnMessage (or still queued), the
	// queue holds messageQueue more; the rest, and the malformed ones, are
	// dropped at once.
	for range messageQueue + 10 {
		d.NotifyMsg([]byte{1, 'x'})
	}
	d.NotifyMsg(nil)
	d.NotifyMsg(make([]byte, MaxMessage+2))
	if n := g.MessagesDropped(); n < 11 || n > 12 {
		t.Errorf("MessagesDropped = %d, want 11 or 12 (9 or 10 over the queue, 2 malformed)", n)
	}
}
