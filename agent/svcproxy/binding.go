package svcproxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// maxRows bounds the stats rows a binding keeps: beyond it the rows of
// removed targets with nothing open are forgotten.
const maxRows = 256

// counters are one Stat row's live values.
type counters struct {
	conns, bytesIn, bytesOut, failures atomic.Uint64
	active                             atomic.Int64
}

// binding is the state a TCP and a UDP listener share: the key, the
// current targets, the round robin cursor, the targets' health and the
// stats rows.
type binding struct {
	key    Key
	listen int // as asked (0 = any)

	mu      sync.Mutex
	targets []Target
	cursor  int
	health  map[string]health    // by target address
	rows    map[string]*counters // by target address, "" for failures before a choice
}

func newBinding(b Binding) *binding {
	x := &binding{key: b.Key, listen: b.Listen, health: map[string]health{},
		rows: map[string]*counters{"": {}}}
	x.setTargets(b.Targets)
	return x
}

// setTargets swaps the targets: a new target gets a row, a removed one
// loses its health record (and its row, once rows pile up).
func (b *binding) setTargets(ts []Target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.targets = append([]Target(nil), ts...)
	cur := map[string]bool{"": true}
	for _, t := range ts {
		cur[t.Addr] = true
		if b.rows[t.Addr] == nil {
			b.rows[t.Addr] = &counters{}
		}
	}
	for a := range b.health {
		if !cur[a] {
			delete(b.health, a)
		}
	}
	if len(b.rows) > maxRows {
		for a, c := range b.rows {
			if !cur[a] && c.active.Load() == 0 {
				delete(b.rows, a)
			}
		}
	}
}

// choice is one candidate target of a new connection.
type choice struct {
	Target
	row *counters
}

// plan returns the targets a new connection tries, in order (nil: none),
// and advances the round robin cursor.
func (b *binding) plan(now time.Time) []choice {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, next := order(len(b.targets), b.cursor, func(i int) bool {
		return b.health[b.targets[i].Addr].down(now)
	})
	b.cursor = next
	out := make([]choice, len(idx))
	for k, i := range idx {
		t := b.targets[i]
		out[k] = choice{Target: t, row: b.row(t.Addr)}
	}
	return out
}

// row returns the row of addr, making it if a Set removed it meanwhile;
// b.mu held.
func (b *binding) row(addr string) *counters {
	c := b.rows[addr]
	if c == nil {
		c = &counters{}
		b.rows[addr] = c
	}
	return c
}

// result records the outcome of a dial of addr at now and reports
// whether the target just went down (for logging).
func (b *binding) result(c choice, ok bool, now time.Time) (wentDown bool) {
	if !ok {
		c.row.failures.Add(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.current(c.Addr) {
		return false
	}
	if ok {
		delete(b.health, c.Addr)
		return false
	}
	h := b.health[c.Addr]
	b.health[c.Addr] = h.failed(now)
	return !h.down(now)
}

// current reports whether addr is one of the targets; b.mu held.
func (b *binding) current(addr string) bool {
	for _, t := range b.targets {
		if t.Addr == addr {
			return true
		}
	}
	return false
}

// refused counts a connection or datagram refused before a target was
// chosen.
func (b *binding) refused() {
	b.mu.Lock()
	c := b.rows[""]
	b.mu.Unlock()
	c.failures.Add(1)
}

// stats returns the binding's rows.
func (b *binding) stats() []Stat {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Stat, 0, len(b.rows))
	for a, c := range b.rows {
		out = append(out, Stat{Key: b.key, Target: a, Conns: c.conns.Load(),
			Active: int(c.active.Load()), BytesIn: c.bytesIn.Load(),
			BytesOut: c.bytesOut.Load(), Failures: c.failures.Load()})
	}
	return out
}
