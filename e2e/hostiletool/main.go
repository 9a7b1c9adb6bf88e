//go:build e2e

// Command hostiletool is the attacker of the e2e hostile-actor scenarios
// (e2e/hostile_test.go): a static binary the suite copies onto a worker
// board or runs in the lab's keyless "stranger" namespace. It speaks
// herd's wire protocols from the outside, with whatever keys it is given,
// and reports each attempt as one JSON line; it never decides whether an
// attempt should have worked (the test does).
//
//	hostiletool forge  -addrs A,B -keys F1,F2 [-probe]  forwarded write (or a harmless probe) with each key
//	hostiletool raft   -addrs A,B                       Raft RPC with a random key
//	hostiletool flood  -addrs A,B -n 200 -for 60s       idle TCP connections held open (reopened when closed)
//	hostiletool gossip -join A -bind IP [-key none|random] -for 10s  memberlist join
//
// The tool presents the certificate raftstore.Certificate derives from each
// key, and speaks the transport's framing itself (TLS 1.3, one protocol
// byte, 4-byte length-prefixed JSON frames). The suite's positive control
// (the probe from a server board with the server's own key) fails if the
// framing drifts, so a refusal is never a tool mismatch.
package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/herd-dev/herd/raftstore"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hostiletool forge|raft|flood|gossip [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addrs := fs.String("addrs", "", "comma-separated host:port of the servers' raft ports")
	keys := fs.String("keys", "", "comma-separated key files to try (base64 or raw 32 bytes)")
	probe := fs.Bool("probe", false, "forge: send an op the leader rejects (changes nothing)")
	pod := fs.String("pod", "hostile-forged", "forge: name of the pod to create")
	node := fs.String("node", "b1", "forge: spec.node of the forged pod")
	n := fs.Int("n", 200, "flood: connections per address")
	dur := fs.Duration("for", 10*time.Second, "flood, gossip: how long")
	join := fs.String("join", "", "gossip: member address host:port")
	bind := fs.String("bind", "", "gossip: local address")
	key := fs.String("key", "none", "gossip: none or random")
	_ = fs.Parse(os.Args[2:])
	var list []string
	if *addrs != "" {
		list = strings.Split(*addrs, ",")
	}
	switch os.Args[1] {
	case "forge":
		forge(list, strings.Split(*keys, ","), *probe, *pod, *node)
	case "raft":
		raftRPC(list)
	case "flood":
		flood(list, *n, *dur)
	case "gossip":
		gossip(*join, *bind, *key, *dur)
	default:
		fmt.Fprintln(os.Stderr, "hostiletool: unknown command", os.Args[1])
		os.Exit(2)
	}
}

func report(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// readKey reads a key file as herd writes them (base64) or raw 32 bytes.
func readKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == 32 {
		return k, nil
	}
	if len(b) == 32 {
		return b, nil
	}
	return nil, fmt.Errorf("not a 32-byte key (%d bytes)", len(b))
}

// dial opens a TLS connection to addr with the identity of key and sends
// the protocol byte. The server's certificate is not checked: an attacker
// does not care whom it talks to.
func dial(addr string, key []byte, proto byte) (*tls.Conn, error) {
	cert, err := raftstore.Certificate(key)
	if err != nil {
		return nil, err
	}
	raw, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c := tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ServerName: "herd-raft", InsecureSkipVerify: true})
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if _, err := c.Write([]byte{proto}); err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return c, nil
}

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	_, err = w.Write(append(hdr[:], b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 8<<20 {
		return nil, errors.New("frame too large")
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// forge tries every key against every address: a forwarded create of a pod
// bound to node (or, with probe, an op type the leader refuses). The
// result is "refused" (TLS or the first read failed: the server did not
// take us for a peer) or "answered" with the server's reply.
func forge(addrs, keys []string, probe bool, pod, node string) {
	for _, kf := range keys {
		if kf == "" {
			continue
		}
		key, err := readKey(kf)
		if err != nil {
			report(map[string]any{"key": kf, "result": "unusable", "err": err.Error()})
			continue
		}
		for _, addr := range addrs {
			op := map[string]any{"type": "create", "object": map[string]any{
				"kind": "pods", "metadata": map[string]any{"name": pod},
				"spec": map[string]any{"owner": map[string]any{"kind": "deployments", "name": "hostile"}, "node": node,
					"template": map[string]any{"exec": []string{"/bin/sh", "-c", "id -u > /run/hostile-forged; exec sleep infinity"}}},
			}}
			if probe {
				op = map[string]any{"type": "hostile-probe", "object": map[string]any{"kind": "pods", "metadata": map[string]any{"name": pod}}}
			}
			res := map[string]any{"key": kf, "addr": addr}
			c, err := dial(addr, key, 'F')
			if err != nil {
				res["result"], res["err"] = "refused", err.Error()
				report(res)
				continue
			}
			err = writeFrame(c, map[string]any{"ops": []any{op}, "timeoutMillis": 4000})
			var b []byte
			if err == nil {
				b, err = readFrame(c)
			}
			c.Close()
			if err != nil {
				// TLS 1.3: a client certificate the server rejects shows
				// up on the first read, not in Handshake.
				res["result"], res["err"] = "refused", err.Error()
			} else {
				res["result"], res["reply"] = "answered", json.RawMessage(b)
			}
			report(res)
		}
	}
}

// raftRPC sends a Raft connection preamble with a key nobody holds.
func raftRPC(addrs []string) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for _, addr := range addrs {
		res := map[string]any{"addr": addr}
		c, err := dial(addr, key, 'R')
		if err == nil {
			// hashicorp/raft's first byte is the RPC type; any answer
			// (or none: read times out) after the handshake would mean
			// the server took us for a peer.
			_, _ = c.Write([]byte{0})
			var one [1]byte
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = c.Read(one[:])
			c.Close()
			if err == nil {
				res["result"] = "answered"
				report(res)
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				res["result"], res["err"] = "accepted", "connection kept open after the handshake"
				report(res)
				continue
			}
		}
		res["result"], res["err"] = "refused", err.Error()
		report(res)
	}
}

// flood holds n idle TCP connections to each address for d, opening a new
// one whenever the server closes one, and reports how many it opened.
func flood(addrs []string, n int, d time.Duration) {
	deadline := time.Now().Add(d)
	var opened, failed atomic.Int64
	var wg sync.WaitGroup
	for _, addr := range addrs {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						failed.Add(1)
						time.Sleep(100 * time.Millisecond)
						continue
					}
					opened.Add(1)
					_ = c.SetReadDeadline(deadline)
					_, _ = io.Copy(io.Discard, c) // until the server closes it or the deadline
					c.Close()
				}
			}()
		}
	}
	wg.Wait()
	report(map[string]any{"result": "done", "opened": opened.Load(), "failed": failed.Load()})
}

// gossip joins the member at join as "stranger" and stays for d,
// reporting what memberlist saw.
func gossip(join, bind, key string, d time.Duration) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = "stranger"
	mc.BindAddr = bind
	mc.BindPort = 7946
	mc.AdvertiseAddr = bind
	mc.AdvertisePort = 7946
	mc.LogOutput = io.Discard
	if key == "random" {
		mc.SecretKey = make([]byte, 32)
		_, _ = rand.Read(mc.SecretKey)
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		report(map[string]any{"key": key, "result": "error", "err": err.Error()})
		os.Exit(1)
	}
	n, err := ml.Join([]string{join})
	res := map[string]any{"key": key, "joined": n}
	if err != nil {
		res["err"] = err.Error()
	}
	time.Sleep(d) // the attacker stays around: the test looks meanwhile
	var names []string
	for _, m := range ml.Members() {
		names = append(names, m.Name)
	}
	res["members"], res["result"] = names, "done"
	report(res)
	_ = ml.Shutdown()
}
