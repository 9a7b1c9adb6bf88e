package gossip

import (
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// MaxMessage is the largest message body Send takes and a receiver
// accepts, in bytes.
const MaxMessage = 64 << 10

// messageQueue is how many received messages wait for Config.OnMessage;
// more are dropped (and counted) rather than block memberlist.
const messageQueue = 64

// message is one received user message, copied out of memberlist's buffer.
type message struct {
	kind byte
	body []byte
}

// Send delivers one message of the given kind to the member named to, over
// memberlist's reliable (TCP) channel, encrypted with the gossip key like
// all gossip. kind lets a receiver tell its message types apart. Send
// blocks for the TCP round trip, up to memberlist's TCP timeout; a member
// that is not alive gets ErrNotMember at once. Messages are a push only:
// there is no reply and no ordering between two Sends.
func (g *Gossip) Send(to string, kind byte, body []byte) error {
	if g.closed.Load() {
		return ErrShutdown
	}
	if len(body) > MaxMessage {
		return fmt.Errorf("gossip: message of %d bytes to %s: over the limit of %d", len(body), to, MaxMessage)
	}
	var node *memberlist.Node
	for _, n := range g.ml.Members() {
		if n.Name == to {
			node = n
			break
		}
	}
	if node == nil {
		return fmt.Errorf("%w: %s", ErrNotMember, to)
	}
	buf := make([]byte, 0, 1+len(body))
	buf = append(append(buf, kind), body...)
	if err := g.ml.SendReliable(node, buf); err != nil {
		return fmt.Errorf("gossip: send to %s: %w", to, err)
	}
	return nil
}

// ErrNotMember: Send was asked to reach a member that is not alive.
var ErrNotMember = errors.New("gossip: no such alive member")

// MessagesDropped counts received messages dropped because OnMessage fell
// behind or they were empty or over MaxMessage.
func (g *Gossip) MessagesDropped() uint64 { return g.dropped.Load() }

// deliver runs Config.OnMessage for the queued messages until stop is
// closed. The queue itself is never closed: memberlist may still hand over
// a message while it shuts down.
func (g *Gossip) deliver(q <-chan message, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case m := <-q:
			g.cfg.OnMessage(m.kind, m.body)
		}
	}
}

// closeMessages stops deliver; it is called once, by New's failure path or
// Shutdown.
func (g *Gossip) closeMessages() {
	if g.msgStop != nil {
		close(g.msgStop)
	}
}

// NotifyMsg implements memberlist.Delegate: it copies a user message (from
// any member holding the gossip key, over UDP or TCP) onto the queue for
// Config.OnMessage without blocking memberlist, dropping it when the
// queue is full, empty or too large. Who sent it is not known here: a
// message that matters must authenticate itself.
func (d *delegate) NotifyMsg(b []byte) {
	g := d.g
	if g.msgs == nil {
		return
	}
	if len(b) < 1 || len(b)-1 > MaxMessage {
		g.dropped.Add(1)
		return
	}
	m := message{kind: b[0], body: append([]byte(nil), b[1:]...)}
	select {
	case g.msgs <- m:
	default:
		g.dropped.Add(1)
	}
}
