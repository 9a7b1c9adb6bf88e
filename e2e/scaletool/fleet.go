//go:build e2e

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

// fleet is one simulated fleet: three server processes and one process
// holding every worker.
type fleet struct {
	n       int
	dir     string
	servers []*child // s1-s3
	workers *child   // nil when n == 3
	names   []string // worker names
	c       *client.Client
}

// child is one member process and its command pipe.
type child struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	dir  string // data dir of a server
}

// serverIP and workerIP place the boards on 127.88.0.0/16: an even second
// octet, which testutil.TestIP (always odd) never hands a test, so a test
// running meanwhile cannot collide with the simulation.
func serverIP(i int) string { return fmt.Sprintf("127.88.0.%d", i+1) }
func workerIP(i int) string { return fmt.Sprintf("127.88.%d.%d", 1+i/250, i%250+1) }

// startFleet starts n boards (3 servers, n-3 workers) under dir and waits
// until the leader counts all of them Ready.
func startFleet(ctx context.Context, self, dir string, n int, timing string) (*fleet, error) {
	key := make([]byte, 32)
	rand.Read(key)
	f := &fleet{n: n, dir: dir}
	var join []string
	for i := range 3 {
		join = append(join, fmt.Sprintf("%s:%d", serverIP(i), gossipPort))
	}
	for i := range 3 {
		name := fmt.Sprintf("s%d", i+1)
		ms := memberSpec{Name: name, IP: serverIP(i), Dir: filepath.Join(dir, name), Server: true}
		c, err := spawn(self, dir, name, spec{Members: []memberSpec{ms}, Join: join, Key: key, Timing: timing})
		if err != nil {
			f.stop()
			return nil, err
		}
		c.dir = ms.Dir
		f.servers = append(f.servers, c)
	}
	if n > 3 {
		sp := spec{Join: join, Key: key, Timing: timing}
		for i := range n - 3 {
			name := fmt.Sprintf("w%03d", i+4)
			sp.Members = append(sp.Members, memberSpec{Name: name, IP: workerIP(i), Dir: filepath.Join(dir, name)})
			f.names = append(f.names, name)
		}
		c, err := spawn(self, dir, "workers", sp)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.workers = c
	}
	err := poll(ctx, 3*time.Minute, "every board Ready", func() error {
		nodes, err := f.list(ctx, api.KindNode)
		if err != nil {
			return err
		}
		ready := 0
		for _, o := range nodes {
			if o.(*api.Node).Status.Phase == api.NodeReady {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("%d of %d nodes Ready", ready, n)
		}
		return nil
	})
	if err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

// spawn starts `self member` with sp and waits for its first line.
func spawn(self, dir, name string, sp spec) (*child, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	specFile := filepath.Join(dir, name+".json")
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(self, "member", "--spec", specFile)
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if _, err := c.read(); err != nil {
		c.kill()
		return nil, fmt.Errorf("%s: %w (see %s)", name, err, logf.Name())
	}
	return c, nil
}

// do sends one command and returns the fields of its answer after "ok".
func (c *child) do(format string, args ...any) ([]string, error) {
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	return c.read()
}

func (c *child) read() ([]string, error) {
	if !c.out.Scan() {
		return nil, fmt.Errorf("%s: process ended (%v)", c.name, c.out.Err())
	}
	f := strings.Fields(c.out.Text())
	if len(f) == 0 || f[0] != "ok" {
		return nil, fmt.Errorf("%s: %s", c.name, c.out.Text())
	}
	return f[1:], nil
}

// kill ends the process: closing stdin stops it; SIGKILL after 10 s.
func (c *child) kill() {
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

func (f *fleet) stop() {
	if f.workers != nil {
		f.workers.kill()
	}
	for _, s := range f.servers {
		s.kill()
	}
}

// client returns an API client of every server (tokens from their data
// dirs).
func (f *fleet) client() (*client.Client, error) {
	if f.c != nil {
		return f.c, nil
	}
	tok, err := os.ReadFile(filepath.Join(f.servers[0].dir, "api.token"))
	if err != nil {
		return nil, err
	}
	var addrs []string
	for i := range f.servers {
		addrs = append(addrs, fmt.Sprintf("http://%s:%d", serverIP(i), apiPort))
	}
	fields := strings.Fields(string(tok))
	if len(fields) == 0 {
		return nil, errors.New("s1: empty api.token")
	}
	c, err := client.New(addrs, client.Options{Token: fields[0], Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	f.c = c
	return c, nil
}

// list lists kind through any server.
func (f *fleet) list(ctx context.Context, kind api.Kind) ([]api.Object, error) {
	var out []api.Object
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	raws, _, err := c.List(ctx, kind)
	if err != nil {
		return nil, err
	}
	for _, r := range raws {
		o, err := api.FromRaw(r)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// leader returns the index of the leader's server process.
func (f *fleet) leader(ctx context.Context) (int, error) {
	c, err := f.client()
	if err != nil {
		return -1, err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return -1, err
	}
	for i, s := range f.servers {
		if s.name == st.Leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no leader (status names %q)", st.Leader)
}

// poll calls cond until it returns nil or d passes (then the last error).
func poll(ctx context.Context, d time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(50 * time.Millisecond): // the fleet is in other processes: nothing to wait on but its API
		}
	}
}
