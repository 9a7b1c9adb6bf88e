package svcview

import (
	"bytes"
	"sync"

	"github.com/herd-dev/herd/agent/herddns"
)

// Feed holds the latest view and wakes subscribers when it changes. The
// zero value is not usable; use NewFeed. A Feed is safe for concurrent use.
type Feed struct {
	mu    sync.Mutex
	view  View
	enc   []byte
	valid bool
	subs  map[chan struct{}]struct{}
}

// NewFeed returns a Feed without a view (Current reports ok false).
func NewFeed() *Feed { return &Feed{subs: make(map[chan struct{}]struct{})} }

// Set makes v the current view; subscribers are woken only when its
// encoding differs from the current one's. It reports whether it changed.
func (f *Feed) Set(v View) bool {
	enc := v.Encode()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.valid && bytes.Equal(enc, f.enc) {
		return false
	}
	f.view, f.enc, f.valid = v, enc, true
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return true
}

// Current returns the current view and its encoding; ok is false before
// the first Set. The view must not be modified.
func (f *Feed) Current() (v View, enc []byte, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view, f.enc, f.valid
}

// Subscribe returns a channel that receives (coalesced) after every
// change, and a function that ends the subscription.
func (f *Feed) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// DNSState implements herddns.Source: the current view's services and
// boards (none before the first view).
func (f *Feed) DNSState() herddns.State {
	v, _, _ := f.Current()
	return herddns.State{Services: v.Services, Nodes: v.Nodes}
}
