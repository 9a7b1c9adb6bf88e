package raftstore

import "sync"

// leadership fans this server's leadership state out to any number of
// subscribers. Each subscriber has a one-slot channel that always holds the
// latest state: a slow subscriber loses intermediate values, never the last
// one.
//
// Safe for concurrent use.
type leadership struct {
	mu     sync.Mutex
	cur    bool
	subs   map[*leaderSub]struct{}
	closed bool
}

type leaderSub struct{ ch chan bool }

func newLeadership() *leadership {
	return &leadership{subs: map[*leaderSub]struct{}{}}
}

// set records a transition. A repeated false is dropped; a repeated true is
// delivered (leadership was lost and regained in between, so leader-only
// work must restart).
func (l *leadership) set(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || (!v && !l.cur) {
		return
	}
	l.cur = v
	for s := range l.subs {
		offer(s.ch, v)
	}
}

// offer replaces whatever ch holds with v. Called with l.mu held, so this is
// the only sender and the send cannot block.
func offer(ch chan bool, v bool) {
	select {
	case ch <- v:
	default:
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

func (l *leadership) current() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// subscribe returns a channel that first holds the current state, and a
// function that ends the subscription and closes the channel.
func (l *leadership) subscribe() (<-chan bool, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &leaderSub{ch: make(chan bool, 1)}
	if l.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	s.ch <- l.cur
	l.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, ok := l.subs[s]; ok {
				delete(l.subs, s)
				close(s.ch)
			}
		})
	}
}

// close ends every subscription.
func (l *leadership) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.cur = false
	for s := range l.subs {
		close(s.ch)
	}
	clear(l.subs)
}

// broadcaster wakes everyone waiting on the channel from wait when fire is
// called.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcaster() *broadcaster { return &broadcaster{ch: make(chan struct{})} }

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcaster) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}
