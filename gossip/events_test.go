package gossip

import (
	"fmt"
	"testing"
	"time"
)

func TestEventTypeString(t *testing.T) {
	for typ, want := range map[EventType]string{EventJoin: "join", EventLeave: "leave", EventFail: "fail", EventUpdate: "update", 0: "unknown"} {
		if got := typ.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", typ, got, want)
		}
	}
}

// With nobody reading, pushes never block and the backlog holds at most the
// output buffer plus one event per member, the latest one.
func TestEventQueueCoalescesWhenConsumerIsSlow(t *testing.T) {
	const buffer, pushes = 4, 3000
	q := newEventQueue(buffer)
	go q.run()
	defer q.close()

	names := []string{"a", "b", "c"}
	for i := range pushes {
		q.push(Event{Type: EventUpdate, Member: Member{Name: names[i%3]}, At: time.Unix(int64(i), 0)})
	}
	last := map[string]int64{"a": pushes - 3, "b": pushes - 2, "c": pushes - 1}

	got := 0
	seenLast := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(seenLast) < len(names) {
		select {
		case ev := <-q.out:
			got++
			if ev.At.Unix() == last[ev.Member.Name] {
				seenLast[ev.Member.Name] = true
			}
		case <-timeout:
			t.Fatalf("latest events not delivered; got %d events, saw last of %v", got, seenLast)
		}
	}
	// Nobody read while pushing: the buffer, the one event the pump holds
	// and one pending event per member is all there can be.
	if max := buffer + 1 + len(names); got > max {
		t.Errorf("delivered %d events for %d pushes, want at most %d: not coalesced", got, pushes, max)
	}
}

func TestEventQueueKeepsOrderAcrossMembers(t *testing.T) {
	q := newEventQueue(0)
	for i, name := range []string{"c", "a", "b", "a"} {
		q.push(Event{Member: Member{Name: name}, At: time.Unix(int64(i), 0)})
	}
	var got []string
	for {
		ev, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s@%d", ev.Member.Name, ev.At.Unix()))
	}
	want := "[c@0 a@3 b@2]"
	if fmt.Sprint(got) != want {
		t.Errorf("order = %v, want %s", got, want)
	}
}

func TestEventQueueCloseClosesOut(t *testing.T) {
	q := newEventQueue(1)
	go q.run()
	q.push(Event{Member: Member{Name: "a"}})
	q.push(Event{Member: Member{Name: "b"}})
	q.close()
	q.close() // idempotent
	for range q.out {
	}
	q.push(Event{Member: Member{Name: "late"}}) // must not panic or block
}
