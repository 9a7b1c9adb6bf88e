package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// node returns node name as agent i stores it.
func (f *testFleet) node(i int, name string) (*api.Node, error) {
	o, err := f.agents[i].a.store.Get(api.KindNode, name)
	if err != nil {
		return nil, err
	}
	n, err := api.FromRaw(o)
	if err != nil {
		return nil, err
	}
	return n.(*api.Node), nil
}

func agentDown(n *api.Node) *api.Condition {
	for i, c := range n.Status.Conditions {
		if c.Type == controller.ConditionAgentDown && c.Status == api.ConditionTrue {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// An agent that crashes (kill -9, or frozen) on a board whose SSH still
// answers: gossip declares it dead, but the leader's SSH witness keeps the
// board Ready with AgentDown, no pod is lost or replaced, nothing is done
// to its units; when the agent comes back the condition goes away. The
// leader's own agent too: the new leader witnesses its board.
func TestAgentCrashOnLiveBoardLosesNothing(t *testing.T) {
	for _, which := range []string{"follower", "leader"} {
		t.Run(which, func(t *testing.T) {
			f := newFleet(t, 3, 3)
			lead := f.leader()
			if _, err := f.client(lead).Apply(context.Background(), []api.Object{webDeployment(3)}, false); err != nil {
				t.Fatal(err)
			}
			placed := f.runningPods(lead, 3, "")

			victim := (lead + 1) % 3
			if which == "leader" {
				victim = lead
			}
			vname := f.agents[victim].cfg.Name
			board := f.boards.Board(vname)
			down := f.crash(victim) // its board stays reachable over "SSH"
			board.ResetCalls()
			lead = f.leader()

			var since time.Time
			testutil.Eventually(t, 15*time.Second, vname+" Ready with AgentDown", func() error {
				n, err := f.node(lead, vname)
				if err != nil {
					return err
				}
				c := agentDown(n)
				if n.Status.Phase != api.NodeReady || c == nil {
					return fmt.Errorf("%s is %s, conditions %+v", vname, n.Status.Phase, n.Status.Conditions)
				}
				since = c.LastTransitionTime
				return nil
			})
			// Well past WitnessGrace the board is still Ready: the witness
			// is renewed every second.
			testutil.Eventually(t, 15*time.Second, "AgentDown to outlast the witness grace", func() error {
				n, err := f.node(lead, vname)
				if err != nil {
					return err
				}
				if n.Status.Phase != api.NodeReady || agentDown(n) == nil {
					t.Fatalf("%s became %s while its board answered: %+v", vname, n.Status.Phase, n.Status.Conditions)
				}
				if time.Since(since) < controller.WitnessGrace+2*time.Second {
					return fmt.Errorf("only %v since AgentDown", time.Since(since).Round(time.Millisecond))
				}
				return nil
			})
			f.assertPods(lead, placed)

			f.start(down)
			testutil.Eventually(t, 15*time.Second, vname+" back without AgentDown", func() error {
				n, err := f.node(lead, vname)
				if err != nil {
					return err
				}
				if n.Status.Phase != api.NodeReady || agentDown(n) != nil {
					return fmt.Errorf("%s is %s, conditions %+v", vname, n.Status.Phase, n.Status.Conditions)
				}
				return nil
			})
			f.assertPods(f.leader(), placed)
			for _, c := range board.Calls() {
				if c.Op != "ShowUnits" && c.Op != "Probe" {
					t.Errorf("the leader acted on %s while its agent was down: %s", vname, c)
				}
			}
		})
	}
}

// assertPods checks that the pods are exactly placed (name → node), all
// Running.
func (f *testFleet) assertPods(i int, placed map[string]string) {
	f.t.Helper()
	got := map[string]string{}
	for _, p := range f.pods(i) {
		if p.Status.Phase != api.PodRunning {
			f.t.Errorf("pod %s is %s: %s", p.Metadata.Name, p.Status.Phase, p.Status.Message)
		}
		got[p.Metadata.Name] = p.Spec.Node
	}
	if diff := cmp.Diff(placed, got); diff != "" {
		f.t.Errorf("pods changed (-before +now):\n%s", diff)
	}
}
