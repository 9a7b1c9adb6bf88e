package svcproxy

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestSetPortTaken: a listener that cannot open is named in the error,
// the other bindings still apply, and a later Set opens it once free.
func TestSetPortTaken(t *testing.T) {
	a := startBackend(t, "a", lines)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := taken.Addr().(*net.TCPAddr).Port
	other := Key{Service: "api", Port: "grpc", Protocol: "tcp"}
	p := newProxy(t, Options{})
	bs := []Binding{{Key: webTCP, Listen: port, Targets: targets(a.addr())}, {Key: other, Targets: targets(a.addr())}}
	err = p.Set(bs)
	if err == nil {
		t.Fatal("Set on a taken port: no error")
	}
	for _, want := range []string{`"web"`, `"http"`, "tcp", strconv.Itoa(port), "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if p.Addr(webTCP) != nil {
		t.Errorf("a listener for the taken port: %v", p.Addr(webTCP))
	}
	if got := once(t, p, other); got != "a: hi\na bye\n" {
		t.Errorf("the other binding: %q", got)
	}
	taken.Close()
	if err := p.Set(bs); err != nil {
		t.Fatalf("Set once the port is free: %v", err)
	}
	if got := p.Addr(webTCP).(*net.TCPAddr).Port; got != port {
		t.Errorf("listening on %d, want %d", got, port)
	}
	if got := once(t, p, webTCP); got != "a: hi\na bye\n" {
		t.Errorf("the retried binding: %q", got)
	}
}

// TestSetInvalid: each bad binding is named in the error and changes
// nothing; the good ones apply.
func TestSetInvalid(t *testing.T) {
	a := startBackend(t, "a", lines)
	p := newProxy(t, Options{})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := taken.Addr().(*net.TCPAddr).Port
	taken.Close() // free now: the two bindings below collide with each other only
	err = p.Set([]Binding{
		{Key: webTCP, Listen: port, Targets: append(targets(a.addr()), Target{Addr: "nonsense", Pod: "bad-1"})},
		{Key: Key{Service: "web", Port: "alt", Protocol: "tcp"}, Listen: port},
		{Key: webTCP, Listen: port},
		{Key: Key{Service: "x", Port: "p", Protocol: "sctp"}, Listen: 9},
		{Key: Key{Service: "y", Port: "p", Protocol: "udp"}, Listen: 70000},
		{Key: Key{Port: "p", Protocol: "udp"}, Listen: 53},
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`target "nonsense" (pod "bad-1")`,
		`service "web" port "alt" (tcp) listen ` + strconv.Itoa(port) + `: port already used by service "web" port "http"`,
		`service "web" port "http" (tcp) listen ` + strconv.Itoa(port) + `: listed twice`,
		`service "x" port "p" (sctp) listen 9: protocol must be tcp or udp`,
		`service "y" port "p" (udp) listen 70000: listen port out of range`,
		`no service name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}
	if got := once(t, p, webTCP); got != "a: hi\na bye\n" {
		t.Errorf("the valid binding (with its valid target): %q", got)
	}
	if n := len(p.Stats()); n != 2 {
		t.Errorf("stats: %v, want the web binding's two rows only", p.Stats())
	}
}

// TestSetPortChange: a binding whose port changes moves to the new port.
func TestSetPortChange(t *testing.T) {
	a := startBackend(t, "a", lines)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	set(t, p, Binding{Key: webTCP, Listen: port, Targets: targets(a.addr())})
	if got := p.Addr(webTCP).(*net.TCPAddr).Port; got != port {
		t.Errorf("listening on %d, want %d", got, port)
	}
	if got := once(t, p, webTCP); got != "a: hi\na bye\n" {
		t.Errorf("on the new port: %q", got)
	}
}
