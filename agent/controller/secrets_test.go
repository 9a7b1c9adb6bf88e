package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

func secretOf(name string, hashes map[string]string) *api.Secret {
	s := &api.Secret{Kind: api.KindSecret, Metadata: api.ObjectMeta{Name: name}, Spec: api.SecretSpec{Data: map[string]api.SealedValue{}}}
	for k, h := range hashes {
		s.Spec.Data[k] = api.SealedValue{KeyID: "00000000", Sealed: []byte("sealed"), Hash: h}
	}
	return s
}

func secretDeployment() *api.Deployment {
	one := 1
	d := &api.Deployment{Metadata: api.ObjectMeta{Name: "web", Created: t0},
		Spec: api.DeploymentSpec{Replicas: &one, Template: api.PodTemplate{Exec: []string{"/bin/web"}, Secrets: []string{"db"}}}}
	api.SetDefaults(d)
	return d
}

// created returns the pods acts create.
func created(acts []Action) []*api.Pod {
	var out []*api.Pod
	for _, a := range acts {
		if a.Type == ActionCreate && a.Kind == api.KindPod {
			out = append(out, a.Object.(*api.Pod))
		}
	}
	return out
}

// TestSecretRevision: the pods of a template naming a secret carry its
// version and keys; a changed value is a new revision (the pods roll), a
// missing secret leaves the pod unscheduled with reason SecretMissing.
func TestSecretRevision(t *testing.T) {
	d := secretDeployment()
	nodes := []*api.Node{readyNode("pi1")}
	v1 := secretOf("db", map[string]string{"password": "1111111111111111", "user": "2222222222222222"})

	pods := created(NewIndex(&Cluster{Deployments: []*api.Deployment{d}, Nodes: nodes, Secrets: []*api.Secret{v1}}).
		Reconcile(t0, scheduler.DefaultConfig(), KeyOf(api.KindDeployment, "web")))
	if len(pods) != 1 {
		t.Fatalf("created %d pods, want 1", len(pods))
	}
	want := []api.PodSecret{{Name: "db", Version: api.SecretVersion(v1), Keys: []string{"password", "user"}}}
	if diff := cmp.Diff(want, pods[0].Spec.Secrets); diff != "" {
		t.Errorf("pod secrets (-want +got):\n%s", diff)
	}
	rev1 := pods[0].Spec.Revision
	if rev1 == api.TemplateHash(d.Spec.Template) {
		t.Errorf("revision %s ignores the secret's version", rev1)
	}

	// The value changes: a new revision, so the running pod is old and a
	// new one is made.
	v2 := secretOf("db", map[string]string{"password": "3333333333333333", "user": "2222222222222222"})
	old := pods[0]
	old.Status.Phase, old.Spec.Node, old.Status.Ready = api.PodRunning, "pi1", true
	acts := NewIndex(&Cluster{Deployments: []*api.Deployment{d}, Nodes: nodes, Pods: []*api.Pod{old}, Secrets: []*api.Secret{v2}}).
		Reconcile(t0, scheduler.DefaultConfig(), KeyOf(api.KindDeployment, "web"))
	next := created(acts)
	if len(next) != 1 || next[0].Spec.Revision == rev1 || next[0].Spec.Secrets[0].Version != api.SecretVersion(v2) {
		t.Fatalf("after the secret changed: %s", fmtActions(acts))
	}

	// The secret is missing: the pod is made (version "") and stays
	// Pending with a reason naming the secret.
	pods = created(NewIndex(&Cluster{Deployments: []*api.Deployment{d}, Nodes: nodes}).
		Reconcile(t0, scheduler.DefaultConfig(), KeyOf(api.KindDeployment, "web")))
	if len(pods) != 1 || api.MissingSecrets(pods[0]) != "db" {
		t.Fatalf("missing secret: pods %v", pods)
	}
	acts = NewIndex(&Cluster{Deployments: []*api.Deployment{d}, Nodes: nodes, Pods: pods}).
		Reconcile(t0, scheduler.DefaultConfig(), KeySchedule)
	if len(acts) != 1 || acts[0].Type != ActionUpdateStatus {
		t.Fatalf("schedule with a missing secret: %s", fmtActions(acts))
	}
	c := api.FindCondition(acts[0].Object.(*api.Pod).Status.Conditions, api.ConditionScheduled)
	if c == nil || c.Reason != reasonSecretMissing || c.Message != "secret db does not exist: herdctl create secret db --from-file KEY=PATH" {
		t.Fatalf("condition %+v", c)
	}
	// Written once: the same pass again changes nothing.
	p := acts[0].Object.(*api.Pod)
	if again := NewIndex(&Cluster{Deployments: []*api.Deployment{d}, Nodes: nodes, Pods: []*api.Pod{p}}).
		Reconcile(t0, scheduler.DefaultConfig(), KeySchedule); len(again) != 0 {
		t.Fatalf("second pass: %s", fmtActions(again))
	}
}

// TestJobSecrets: a job's pod carries the versions of the secrets its
// template names, like a deployment's; a changed value replaces a
// scheduled job's pod, so the timer's next run reads the new value.
func TestJobSecrets(t *testing.T) {
	j := testJob("*-*-* 03:00:00", 3)
	j.Spec.Template.Secrets = []string{"db"}
	nodes := []*api.Node{readyNode("pi1")}
	v1 := secretOf("db", map[string]string{"password": "1111111111111111"})
	reconcile := func(s *api.Secret, pods []*api.Pod) []Action {
		return NewIndex(&Cluster{Jobs: []*api.Job{j}, Pods: pods, Nodes: nodes, Secrets: []*api.Secret{s}}).
			Reconcile(jobT0, scheduler.DefaultConfig(), KeyOf(api.KindJob, "backup"))
	}
	pods := created(reconcile(v1, nil))
	if len(pods) != 1 {
		t.Fatalf("created %d pods, want 1", len(pods))
	}
	want := []api.PodSecret{{Name: "db", Version: api.SecretVersion(v1), Keys: []string{"password"}}}
	if diff := cmp.Diff(want, pods[0].Spec.Secrets); diff != "" {
		t.Errorf("pod secrets (-want +got):\n%s", diff)
	}
	p := pods[0]
	p.Spec.Node, p.Status.Phase = "pi1", api.PodRunning

	if got := created(reconcile(v1, []*api.Pod{p})); len(got) != 0 {
		t.Errorf("same secret: created %d pods, want none", len(got))
	}
	v2 := secretOf("db", map[string]string{"password": "3333333333333333"})
	acts := reconcile(v2, []*api.Pod{p})
	deleted := false
	for _, a := range acts {
		deleted = deleted || a.Type == ActionDelete && a.Object.GetMeta().Name == p.Metadata.Name
	}
	if !deleted {
		t.Errorf("changed secret: actions %v, want the old pod deleted", acts)
	}
}
