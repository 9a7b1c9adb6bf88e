package controller

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// TestScrambleIsBijection: unscramble undoes scramble for every k in
// [0, 26^5) (exhaustively, for one key; a map with a left inverse on a
// finite set onto itself is a bijection) and for random keys, and
// suffixes are 5 characters of the alphabet.
func TestScrambleIsBijection(t *testing.T) {
	key := nameKey(api.KindDeployment, "web", t0)
	for k := range uint64(suffixSpace) {
		x := scramble(key, k)
		if x >= suffixSpace || unscramble(key, x) != k {
			t.Fatalf("scramble(%d) = %d, unscrambled %d", k, x, unscramble(key, x))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		key, k := r.Uint64(), r.Uint64N(suffixSpace)
		if got := unscramble(key, scramble(key, k)); got != k {
			t.Fatalf("unscramble(scramble(%d)) = %d with key %x", k, got, key)
		}
	}
	for _, k := range []int64{0, 1, suffixSpace - 1, suffixSpace, 1 << 40} {
		s := suffix(key, k)
		if len(s) != suffixLen || strings.Trim(s, suffixAlphabet) != "" {
			t.Errorf("suffix(%d) = %q", k, s)
		}
	}
	if suffix(key, 5) != suffix(key, 5+suffixSpace) {
		t.Error("the suffix does not wrap at 26^5")
	}
}

// TestSuffixesLookRandom: consecutive pods differ in more than their last
// character, and every position takes most of the alphabet's values.
func TestSuffixesLookRandom(t *testing.T) {
	key := nameKey(api.KindDeployment, "web", t0)
	var perPos [suffixLen]map[byte]bool
	for i := range perPos {
		perPos[i] = map[byte]bool{}
	}
	samePrefix := 0
	prev := suffix(key, 0)
	for k := int64(1); k < 1000; k++ {
		s := suffix(key, k)
		if s[1:] == prev[1:] || s[:suffixLen-1] == prev[:suffixLen-1] {
			samePrefix++
		}
		for i := range suffixLen {
			perPos[i][s[i]] = true
		}
		prev = s
	}
	if samePrefix > 10 {
		t.Errorf("%d of 999 consecutive suffixes differ in one end character only", samePrefix)
	}
	for i, m := range perPos {
		if len(m) < 24 {
			t.Errorf("position %d takes only %d values in 1000 suffixes", i, len(m))
		}
	}
}

// TestNamerWraps: after the counter wraps, names repeat, but a name still
// in use is skipped.
func TestNamerWraps(t *testing.T) {
	key := nameKey(api.KindDeployment, "web", t0)
	first := "web-" + suffix(key, 0)
	nm := newNamer(key, suffixSpace, func(n string) bool { return n == first })
	if got := nm.name("web"); got == first || got != "web-"+suffix(key, 1) || nm.next != suffixSpace+2 {
		t.Errorf("after the wrap: %q (next %d), want %q skipped for %q", got, nm.next, first, "web-"+suffix(key, 1))
	}
}

// converge runs reconcile, schedule and start until nothing moves.
func (w *world) converge(reconcile func() []Action) {
	w.t.Helper()
	for range 20 {
		acts := reconcile()
		w.apply(acts)
		binds := SchedulePending(w.now, w.snapshot(), w.podList())
		w.apply(binds)
		if len(acts)+len(binds)+w.runPods(-1) == 0 {
			return
		}
	}
	w.t.Fatal("the world did not converge")
}

// createdNames returns the names of the pods acts create.
func createdNames(acts []Action) []string {
	var out []string
	for _, a := range acts {
		if a.Type == ActionCreate && a.Kind == api.KindPod {
			out = append(out, a.Name)
		}
	}
	return out
}

// TestNoNameReusedAcrossReplacements: through 1000 cycles of a pod going
// Lost, Failed or Succeeded (at random), being deleted and replaced, with
// scale changes and template changes now and then, a deployment never
// creates a pod under a name it used before, and its counter equals the
// pods it made.
func TestNoNameReusedAcrossReplacements(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"a", "b", "c"} {
		w.add(readyNode(n, func(n *api.Node) { n.Status.MemoryBytes = 64 * gib; n.Status.CPUs = 64 }))
	}
	w.add(deployment("web", 3, strategy(1, 1)))
	r := rand.New(rand.NewPCG(9, 9))
	names := &nameLedger{t: t, used: map[string]int{}}
	reconcile := func(cycle int) func() []Action {
		return names.check(cycle, func() []Action {
			return ReconcileDeployment(w.now, w.deployments["web"], w.podList(), w.nodeList())
		})
	}
	for cycle := range 1000 {
		w.now = w.now.Add(time.Second)
		w.converge(reconcile(cycle))
		switch {
		case cycle%37 == 0: // scale
			nd := *w.deployments["web"]
			nd.Spec.Replicas = intp(1 + r.IntN(5))
			w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
		case cycle%29 == 0: // new template
			nd := *w.deployments["web"]
			nd.Spec.Template = nd.Spec.Template.DeepCopy()
			nd.Spec.Template.Env = map[string]string{"CYCLE": fmt.Sprint(cycle)}
			w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
		default: // a pod ends
			pods := w.owned(api.KindDeployment, "web")
			p := *pods[r.IntN(len(pods))]
			p.Status.Phase = []api.PodPhase{api.PodLost, api.PodFailed, api.PodSucceeded}[r.IntN(3)]
			w.apply([]Action{newAction(ActionUpdateStatus, &p, "the board")})
		}
	}
	if got := w.deployments["web"].Status.PodsCreated; got != int64(names.created) || names.created < 1000 {
		t.Errorf("podsCreated = %d, %d pods created", got, names.created)
	}
}

// TestNoDaemonNameReused: a daemon's pods replaced on the same node again
// and again (Lost while the node is down, then back; Failed; template
// changes) get a new name every time.
func TestNoDaemonNameReused(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"a", "b"} {
		w.add(readyNode(n))
	}
	w.add(exporter())
	r := rand.New(rand.NewPCG(3, 4))
	names := &nameLedger{t: t, used: map[string]int{}}
	reconcile := func(cycle int) func() []Action {
		return names.check(cycle, func() []Action {
			return ReconcileDaemon(w.now, w.daemons["exp"], w.podList(), w.nodeList())
		})
	}
	for cycle := range 300 {
		w.now = w.now.Add(time.Second)
		w.converge(reconcile(cycle))
		node := []string{"a", "b"}[r.IntN(2)]
		var p *api.Pod
		for _, q := range w.owned(api.KindDaemon, "exp") {
			if q.Spec.Node == node {
				p = q
			}
		}
		if p == nil {
			t.Fatalf("cycle %d: no pod on %s", cycle, node)
		}
		switch cycle % 3 {
		case 0: // the board goes down: Lost, deleted, not replaced; then back
			np := *p
			np.Status.Phase = api.PodLost
			w.apply([]Action{newAction(ActionUpdateStatus, &np, "board down")})
			nn := *w.nodes[node]
			nn.Status.Phase = api.NodeNotReady
			w.apply([]Action{newAction(ActionUpdateStatus, &nn, "board down")})
			w.converge(reconcile(cycle))
			if n := len(w.owned(api.KindDaemon, "exp")); n != 1 {
				t.Fatalf("cycle %d: %d pods with %s down, want 1", cycle, n, node)
			}
			nn = *w.nodes[node]
			nn.Status.Phase = api.NodeReady
			w.apply([]Action{newAction(ActionUpdateStatus, &nn, "board back")})
		case 1:
			np := *p
			np.Status.Phase = api.PodFailed
			w.apply([]Action{newAction(ActionUpdateStatus, &np, "unit failed")})
		case 2:
			nd := *w.daemons["exp"]
			nd.Spec.Template = nd.Spec.Template.DeepCopy()
			nd.Spec.Template.Env = map[string]string{"CYCLE": fmt.Sprint(cycle)}
			w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
		}
	}
	w.converge(reconcile(-1))
	if got := w.daemons["exp"].Status.PodsCreated; got != int64(names.created) || names.created < 300 {
		t.Errorf("podsCreated = %d, %d pods created", got, names.created)
	}
	for _, p := range w.owned(api.KindDaemon, "exp") {
		if !strings.HasPrefix(p.Metadata.Name, "exp-"+p.Spec.Node+"-") {
			t.Errorf("pod %s on %s", p.Metadata.Name, p.Spec.Node)
		}
	}
}

// TestFailedTxnRetriedSameNames: a pass whose transaction fails (a user
// write moved the deployment's resourceVersion, so the status write's CAS
// fails) changes nothing, pods and counter alike, and the retry from the
// same state asks for exactly the same names; once it commits, the next
// replacement gets a new one.
func TestFailedTxnRetriedSameNames(t *testing.T) {
	w := newWorld(t)
	w.add(readyNode("a"), readyNode("b"))
	w.add(deployment("web", 3))
	first := ReconcileDeployment(t0, w.deployments["web"], w.podList(), w.nodeList())
	again := ReconcileDeployment(t0, w.deployments["web"], w.podList(), w.nodeList())
	if diff := cmp.Diff(summary(first), summary(again)); diff != "" || len(createdNames(first)) != 3 {
		t.Fatalf("two passes from one state differ (-first +again):\n%s", diff)
	}

	// A user's label change lands between the pass and its write.
	nd := *w.deployments["web"]
	nd.Metadata.Labels = map[string]string{"team": "a"}
	w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
	before := w.save()
	if err := w.applyTxn(first); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("stale pass applied: %v", err)
	}
	if n := len(w.pods); n != 0 || w.deployments["web"].Status.PodsCreated != 0 || w.rv != before.rv {
		t.Fatalf("a failed transaction left %d pods, podsCreated %d", n, w.deployments["web"].Status.PodsCreated)
	}
	retry := ReconcileDeployment(t0, w.deployments["web"], w.podList(), w.nodeList())
	if diff := cmp.Diff(createdNames(first), createdNames(retry)); diff != "" {
		t.Fatalf("the retry asks for other names (-first +retry):\n%s", diff)
	}
	w.apply(retry)
	if got := w.deployments["web"].Status.PodsCreated; got != 3 {
		t.Fatalf("podsCreated = %d after the retry, want 3", got)
	}

	// A new leader reconciling the committed state continues the count.
	lost := *w.pods[createdNames(first)[0]]
	lost.Status.Phase = api.PodLost
	w.apply([]Action{newAction(ActionUpdateStatus, &lost, "board down")})
	next := ReconcileDeployment(t0, w.deployments["web"], w.podList(), w.nodeList())
	names := createdNames(next)
	if len(names) != 1 || slices.Contains(createdNames(first), names[0]) || names[0] != deploymentPodName("web", w.deployments["web"].Metadata.Created, 3) {
		t.Fatalf("the replacement is %v, want pod 3's new name", names)
	}
}

// TestCreatesFitInOneTxn: with templates at the top of their budget a pass
// creates only what fits in one transaction (as the agent's Writer
// encodes it), never none, and the deployment still converges.
func TestCreatesFitInOneTxn(t *testing.T) {
	tmpl := bigTemplate(t, api.MaxTemplateBytes)
	for _, tc := range []struct {
		name     string
		tmpl     api.PodTemplate
		perPass  int
		replicas int
	}{
		{"at the template budget", tmpl, 1, 3},
		{"a quarter of it", bigTemplate(t, api.MaxTemplateBytes/4), 4, 9},
		// The status write then carries the template in its history too.
		{"at the history budget", bigTemplate(t, api.MaxHistoryTemplateBytes), 3, 7},
		{"small", webTemplate(), 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.add(readyNode("a", func(n *api.Node) { n.Status.MemoryBytes = 1024 * gib; n.Status.CPUs = 1024 }))
			d := deployment("web", tc.replicas)
			d.Spec.Template = tc.tmpl
			d.Spec.Selector = tc.tmpl.Labels
			w.add(d)
			for pass := 0; len(w.pods) < tc.replicas; pass++ {
				if pass > tc.replicas {
					t.Fatalf("%d pods after %d passes", len(w.pods), pass)
				}
				acts := ReconcileDeployment(t0, w.deployments["web"], w.podList(), w.nodeList())
				if n := len(createdNames(acts)); n == 0 || n > tc.perPass {
					t.Fatalf("pass %d creates %d pods, want 1 to %d", pass, n, tc.perPass)
				}
				if n := txnBytes(t, acts); n > api.MaxBindTxnBytes {
					t.Fatalf("pass %d: a transaction of %d bytes, more than %d", pass, n, api.MaxBindTxnBytes)
				}
				w.apply(acts)
			}
			if st := w.deployments["web"].Status; st.Replicas != tc.replicas || st.PodsCreated != int64(tc.replicas) {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// txnBytes is the encoded size of acts as one transaction, as the agent's
// Writer sends it (deletes as kind, name and resourceVersion; status
// writes with the status only).
func txnBytes(t *testing.T, acts []Action) int {
	t.Helper()
	n := 2
	for _, a := range acts {
		raw, err := api.ToRaw(a.Object)
		if err != nil {
			t.Fatal(err)
		}
		switch a.Type {
		case ActionDelete:
			raw = api.RawObject{Kind: raw.Kind, Metadata: api.ObjectMeta{Name: raw.Metadata.Name, ResourceVersion: raw.Metadata.ResourceVersion}}
		case ActionUpdateStatus:
			raw = api.RawObject{Kind: raw.Kind, Metadata: api.ObjectMeta{Name: raw.Metadata.Name, ResourceVersion: raw.Metadata.ResourceVersion}, Status: raw.Status}
		}
		b, err := json.Marshal(map[string]any{"type": string(a.Type), "object": raw})
		if err != nil {
			t.Fatal(err)
		}
		n += len(b) + 1
	}
	return n
}

// nameLedger remembers every pod name a reconciler created and fails the
// test when one is created again.
type nameLedger struct {
	t       *testing.T
	used    map[string]int // name → cycle it was created in
	created int
}

// check wraps reconcile: the names its actions create are recorded.
func (l *nameLedger) check(cycle int, reconcile func() []Action) func() []Action {
	return func() []Action {
		acts := reconcile()
		for _, n := range createdNames(acts) {
			if c, ok := l.used[n]; ok {
				l.t.Fatalf("cycle %d: pod name %q created again (first in cycle %d)", cycle, n, c)
			}
			l.used[n] = cycle
			l.created++
		}
		return acts
	}
}
