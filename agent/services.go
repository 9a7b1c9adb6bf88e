package agent

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/herd-dev/herd/agent/placer"
	"github.com/herd-dev/herd/agent/svcproxy"
	"github.com/herd-dev/herd/agent/svcview"
	"github.com/herd-dev/herd/api"
)

// checkServiceProxy validates service_proxy: empty, off, or an IP.
func checkServiceProxy(s string) error {
	if s == "" || s == "off" || net.ParseIP(s) != nil {
		return nil
	}
	return errors.New(`want an IP address to listen on, "" for every address or off`)
}

// startServices makes the agent's service view and, unless
// service_proxy = "off", its service proxy.
func (a *Agent) startServices() {
	a.view = svcview.NewFeed()
	if a.cfg.ServiceProxy == "off" {
		return
	}
	a.proxy = svcproxy.New(svcproxy.Options{Host: a.cfg.ServiceProxy, Log: a.log.With("component", "svcproxy")})
	a.metrics.AddProxy(a.proxy)
}

// runServices keeps the service view current (a server from its store, a
// worker from the file the leader writes) and the proxy's listeners those
// of the view, until ctx ends.
func (a *Agent) runServices(ctx context.Context, wg *sync.WaitGroup) {
	log := a.log.With("component", "svcview")
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if a.store != nil {
			err = svcview.FollowStore(ctx, a.store, a.view, log)
		} else {
			err = svcview.FollowFile(ctx, a.viewFile, a.view, log)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("service view stopped: no DNS answers or service ports from this board", "err", err)
		}
	}()
	if a.proxy == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.followProxy(ctx)
	}()
}

// followProxy sets the proxy's bindings after every change of the view;
// a port that cannot open is logged once per distinct error and retried
// with the next change.
func (a *Agent) followProxy(ctx context.Context) {
	changes, stop := a.view.Subscribe()
	defer stop()
	var last string
	for {
		if v, _, ok := a.view.Current(); ok {
			err := a.proxy.Set(proxyBindings(v))
			if msg := errString(err); msg != last {
				if err != nil {
					a.log.Warn("service proxy: some service ports are not forwarded on this board", "err", err)
				}
				last = msg
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// proxyBindings turns the view into the proxy's bindings: one per proxy
// port a service owns (api.ProxyOwners), forwarding to that service
// port's ready endpoints.
func proxyBindings(v svcview.View) []svcproxy.Binding {
	byName := make(map[string]*api.Service, len(v.Services))
	for _, s := range v.Services {
		byName[s.Metadata.Name] = s
	}
	var out []svcproxy.Binding
	for _, c := range api.ProxyOwners(v.Services) {
		b := svcproxy.Binding{Key: svcproxy.Key{Service: c.Service, Port: c.Name, Protocol: c.Protocol}, Listen: c.Port}
		for _, e := range byName[c.Service].Status.Endpoints {
			if e.Port == c.Name {
				b.Targets = append(b.Targets, svcproxy.Target{Addr: e.Address, Node: e.Node, Pod: e.Pod})
			}
		}
		out = append(out, b)
	}
	return out
}

// viewWriter writes the service view to a worker through the leader's
// executor (the board helper's no-follow write).
type viewWriter struct{ exec placerExecutor }

func (w viewWriter) WriteView(ctx context.Context, node string, content []byte) error {
	return w.exec.PutFile(ctx, node, svcview.Path, content, placer.FileOptions{Mode: svcview.FileMode, ParentMode: svcview.DirMode})
}
