package agent

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// pods returns the stored pods as agent i sees them.
func (f *testFleet) pods(i int) []*api.Pod {
	raws, _, err := f.agents[i].a.store.List(api.KindPod)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*api.Pod
	for _, r := range raws {
		o, err := api.FromRaw(r)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, o.(*api.Pod))
	}
	return out
}

// activeUnits maps board → herd units active there (fake systemd), for the
// boards given.
func (f *testFleet) activeUnits(boards ...string) map[string][]string {
	out := map[string][]string{}
	for _, b := range boards {
		if u := f.boards.Board(b).ActiveUnits(); len(u) > 0 {
			out[b] = u
		}
	}
	return out
}

func countUnits(m map[string][]string) int {
	n := 0
	for _, u := range m {
		n += len(u)
	}
	return n
}

// runningPods waits until exactly want pods are Running on Ready nodes
// other than exclude, each with its unit active on its board, and no other
// pods exist; it returns pod → node.
func (f *testFleet) runningPods(i, want int, exclude string) map[string]string {
	f.t.Helper()
	var placed map[string]string
	testutil.Eventually(f.t, 20*time.Second, fmt.Sprintf("%d running pods", want), func() error {
		placed = map[string]string{}
		pods := f.pods(i)
		if len(pods) != want {
			return fmt.Errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != api.PodRunning {
				return fmt.Errorf("pod %s is %s (%s)", p.Metadata.Name, p.Status.Phase, p.Status.Message)
			}
			if p.Spec.Node == exclude {
				return fmt.Errorf("pod %s on %s", p.Metadata.Name, exclude)
			}
			active := false
			for _, u := range f.boards.Board(p.Spec.Node).ActiveUnits() {
				if u == "herd-"+p.Metadata.Name+".service" {
					active = true
				}
			}
			if !active {
				return fmt.Errorf("unit of %s not active on %s", p.Metadata.Name, p.Spec.Node)
			}
			placed[p.Metadata.Name] = p.Spec.Node
		}
		return nil
	})
	return placed
}

func TestWorkloadsPlacedReplacedAndFenced(t *testing.T) {
	f := newFleet(t, 3, 3)
	lead := f.leader()
	ctx := context.Background()
	// Spreading one per board needs every board Ready (fenced) first.
	testutil.Eventually(t, 15*time.Second, "every board Ready", func() error {
		for _, name := range []string{"a1", "a2", "a3"} {
			n, err := f.node(lead, name)
			if err != nil {
				return err
			}
			if n.Status.Phase != api.NodeReady {
				return fmt.Errorf("%s is %s", name, n.Status.Phase)
			}
		}
		return nil
	})
	if _, err := f.client(lead).Apply(ctx, []api.Object{webDeployment(3)}, false); err != nil {
		t.Fatal(err)
	}

	// Three pods, spread one per board, units active there.
	placed := f.runningPods(lead, 3, "")
	var nodes []string
	for _, n := range placed {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	if diff := cmp.Diff([]string{"a1", "a2", "a3"}, nodes); diff != "" {
		t.Errorf("pods not spread one per board (-want +got):\n%s", diff)
	}
	all := []string{"a1", "a2", "a3"}
	if n := countUnits(f.activeUnits(all...)); n != 3 {
		t.Fatalf("%d active units, want 3", n)
	}

	// A board that is not the leader loses its link: its agent stops
	// answering gossip, and the leader can no longer reach it over SSH; its
	// unit keeps running there (systemd), like a partitioned board.
	victim := (lead + 1) % 3
	vname := f.agents[victim].cfg.Name
	f.boards.Board(vname).SetUnreachable(true)
	down := f.crash(victim)

	// Its pod is replaced on the others: 3 running elsewhere.
	lead = f.leader()
	f.runningPods(lead, 3, vname)
	testutil.Eventually(t, 10*time.Second, "node NotReady", func() error {
		o, err := f.agents[lead].a.store.Get(api.KindNode, vname)
		if err != nil {
			return err
		}
		n, _ := api.FromRaw(o)
		if ph := n.(*api.Node).Status.Phase; ph != api.NodeNotReady {
			return fmt.Errorf("%s is %s", vname, ph)
		}
		return nil
	})

	// The board comes back: it is fenced (its stale unit stopped and
	// removed) before it is Ready, and exactly 3 units run in the fleet.
	f.boards.Board(vname).SetUnreachable(false)
	f.start(down)
	testutil.Eventually(t, 20*time.Second, "returning board fenced and Ready", func() error {
		o, err := f.agents[lead].a.store.Get(api.KindNode, vname)
		if err != nil {
			return err
		}
		n, _ := api.FromRaw(o)
		st := n.(*api.Node).Status
		if st.Phase != api.NodeReady || !st.Fenced {
			return fmt.Errorf("%s is %s fenced=%v", vname, st.Phase, st.Fenced)
		}
		if u := f.boards.Board(vname).ActiveUnits(); len(u) != 0 {
			return fmt.Errorf("%s still runs %v", vname, u)
		}
		return nil
	})
	if n := countUnits(f.activeUnits(all...)); n != 3 {
		t.Fatalf("after fencing: %d active units in the fleet, want exactly 3: %v", n, f.activeUnits(all...))
	}
	f.runningPods(lead, 3, "")

	// Deleting the deployment deletes its pods and their units everywhere.
	if err := f.client(lead).Delete(ctx, api.KindDeployment, "web"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "units removed after delete", func() error {
		if n := len(f.pods(lead)); n != 0 {
			return fmt.Errorf("%d pods left", n)
		}
		if m := f.activeUnits(all...); len(m) != 0 {
			return fmt.Errorf("units still active: %v", m)
		}
		return nil
	})
}
