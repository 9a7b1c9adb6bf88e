package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herd-dev/herd/api"
)

// newBrowser starts Debian's headless chromium (scripts/deps installs it)
// for chromedp, or skips the test when it is missing.
func newBrowser(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/deps installs it as root: apt-get install chromium): skipping the dashboard's browser test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium's sandbox refuses root
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first Run starts the browser for as long as bctx lives; the
	// test's deadline bounds what follows.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, within)
	t.Cleanup(cancelT)
	return ctx
}

// text returns the text of the first element matching sel, waiting for it.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("waiting for %s: %v", sel, err)
	}
	// Read the text in the page, in one step, once the element has some:
	// between the wait and a read by node the page may render the element
	// anew (a watch event), and a read of the replaced node gives "".
	js := `(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); const s = e ? e.innerText : ""; return s.trim() !== "" ? s : false })()`
	s, err := chromedp.Run(ctx, chromedp.Poll[string](js, chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func TestDashboardInChromium(t *testing.T) {
	ctx := newBrowser(t, 90*time.Second)
	h := newHarness(t)
	h.setStatus(api.ClusterStatus{Node: "b1", Leader: "b1"})
	now := time.Now().UTC()
	h.put(dashNode("b1", api.NodeReady, "10.77.0.11"))
	h.put(dashNode("b2", api.NodeReady, "10.77.0.12"))
	b3 := dashNode("b3", api.NodeReady, "10.77.0.13")
	b3.Status.CgroupControllers = []string{"cpu"} // memory limits off: a warning
	h.put(b3)
	h.put(dashPod("web-a", "b1", api.PodRunning, true))
	h.put(dashPod("web-b", "b2", api.PodRunning, true))
	starting := dashPod("web-c", "b3", api.PodStarting, false)
	starting.Status.Message = `<img src=x onerror="document.title='pwned'">`
	h.put(starting)
	h.put(&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Name: "http", Target: "http"}}},
		Status: api.ServiceStatus{Endpoints: []api.Endpoint{
			{Port: "http", Pod: "web-a", Node: "b1", Address: "10.77.0.11:8080"},
			{Port: "http", Pod: "web-b", Node: "b2", Address: "10.77.0.12:8080"}}}})
	h.putEvent(1, api.EventSpec{Time: now.Add(-3 * time.Minute), Object: api.OwnerRef{Kind: api.KindNode, Name: "b1"},
		Reason: api.ReasonNodeJoined, Type: api.EventNormal, Node: "b1", Message: "b1 joined"})
	h.putEvent(2, api.EventSpec{Time: now.Add(-2 * time.Minute), Object: api.OwnerRef{Kind: api.KindPod, Name: "web-b"},
		Reason: api.ReasonBound, Type: api.EventNormal, Node: "b2", Message: "<b>bound</b> to b2"})

	login := h.startDashboard()
	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))); err != nil {
		t.Fatalf("loading the dashboard: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, "code=") || !strings.HasSuffix(loc, "/ui/") {
		t.Errorf("the page is at %s: want /ui/, without the one-time code", loc)
	}

	// The boards, the pods on each, the service's endpoints, the events.
	for node, pod := range map[string]string{"b1": "web-a", "b2": "web-b", "b3": "web-c"} {
		sel := `article[data-node="` + node + `"][data-phase="Ready"] li[data-pod="` + pod + `"]`
		if got := text(t, ctx, sel); !strings.Contains(got, pod) {
			t.Errorf("%s shows %q, want pod %s", sel, got, pod)
		}
	}
	if got := text(t, ctx, `article[data-node="b3"] .warnings li[data-warning="no-memory-limits"]`); !strings.Contains(got, "memory limits not enforced") {
		t.Errorf("b3's warnings %q", got)
	}
	if got := text(t, ctx, `article[data-node="b1"] .facts`); !strings.Contains(got, "Raspberry Pi 4 Model B") || !strings.Contains(got, "4 CPU") {
		t.Errorf("b1's facts %q", got)
	}
	if got := text(t, ctx, `tr[data-service="web"]`); !strings.Contains(got, "10.77.0.11:8080") || !strings.Contains(got, "10.77.0.12:8080") {
		t.Errorf("service web shows %q, want both endpoints", got)
	}
	if got := text(t, ctx, `#timeline li:first-child`); !strings.Contains(got, "pod/web-b") || !strings.Contains(got, "Bound") ||
		!strings.Contains(got, "2m ago") || !strings.Contains(got, "<b>bound</b>") {
		t.Errorf("the newest event shows %q, want pod/web-b Bound 2m ago, its markup as text", got)
	}
	if got := text(t, ctx, `#timeline li:last-child`); !strings.Contains(got, "node/b1") {
		t.Errorf("the oldest event shows %q, want node/b1", got)
	}

	// A board goes NotReady, its pod is lost and replaced on another
	// board: the page follows the watch streams.
	b2 := dashNode("b2", api.NodeNotReady, "10.77.0.12")
	b2.Status.Conditions = []api.Condition{{Type: api.ConditionReady, Status: api.ConditionFalse, Reason: "Dead"}}
	h.put(b2)
	h.put(dashPod("web-b", "b2", api.PodLost, false))
	h.put(dashPod("web-d", "b3", api.PodRunning, true))
	h.putEvent(3, api.EventSpec{Time: time.Now().UTC(), Object: api.OwnerRef{Kind: api.KindPod, Name: "web-d"},
		Reason: api.ReasonBound, Type: api.EventNormal, Node: "b3", Message: "bound to b3"})
	if got := text(t, ctx, `article[data-node="b2"][data-phase="NotReady"] [data-role="phase"]`); got != "NotReady" {
		t.Errorf("b2's badge %q, want NotReady", got)
	}
	border := eval[string](t, ctx, `getComputedStyle(document.querySelector('article[data-node="b2"]')).borderTopColor`)
	if border != "rgb(198, 40, 40)" && border != "rgb(255, 107, 107)" {
		t.Errorf("b2's card border is %s, want the red of NotReady", border)
	}
	text(t, ctx, `article[data-node="b2"] li[data-pod="web-b"][data-phase="Lost"]`)
	text(t, ctx, `article[data-node="b3"] li[data-pod="web-d"][data-phase="Running"]`)
	if got := text(t, ctx, `#timeline li:first-child`); !strings.Contains(got, "pod/web-d") || !strings.Contains(got, "on b3") {
		t.Errorf("the newest event shows %q, want the replacement pod/web-d on b3", got)
	}
	if got := text(t, ctx, `[data-summary="boards"]`); got != "2/3 boards ready" {
		t.Errorf("the summary says %q", got)
	}

	// Nothing from the API became markup; the page holds no credential.
	title := eval[string](t, ctx, `document.title`)
	html := eval[string](t, ctx, `document.documentElement.outerHTML`)
	cookie := eval[string](t, ctx, `document.cookie`)
	injected := eval[int](t, ctx, `document.querySelectorAll('#boards img, #timeline b').length`)
	if strings.Contains(title, "pwned") || injected != 0 {
		t.Errorf("API data became markup: title %q, %d injected elements", title, injected)
	}
	if strings.Contains(html, harnessToken) || cookie != "" {
		t.Errorf("the page holds a credential: token in page %v, document.cookie %q", strings.Contains(html, harnessToken), cookie)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("HERD_DASHBOARD_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}
