//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Dashboard is `herdctl dashboard --no-open` running the way a user's
// does (through the context's SSH tunnel), with headless Chromium (Debian's
// chromium, driven by chromedp) showing its page.
type Dashboard struct {
	// URL is the one-time URL herdctl printed.
	URL string
	// Browser is the chromedp context of the page's tab.
	Browser context.Context
	cmd     *exec.Cmd
	stop    func()
}

// StartDashboard starts herdctl dashboard and loads its page in Chromium,
// waiting until the page follows the watch streams (within ctx). With via
// "" herdctl goes through the context's SSH tunnel; with via a server board,
// through the port forward to that board's API (as Herdctl).
func (f *Fleet) StartDashboard(ctx context.Context, via string) (*Dashboard, error) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return nil, fmt.Errorf("e2e: chromium is missing (scripts/deps installs it): %w", err)
	}
	args := []string{"--config", f.ConfigPath()}
	if via != "" {
		addr, err := f.forwardAddr(ctx, via)
		if err != nil {
			return nil, err
		}
		args = append(args, "--addr", "http://"+addr, "--token-file", f.TokenFile())
	}
	d := &Dashboard{}
	hctx, cancelH := context.WithCancel(context.Background())
	d.cmd = exec.CommandContext(hctx, f.herdctlPath(), append(args, "dashboard", "--no-open")...)
	d.cmd.Dir, d.cmd.Env = f.Root, cleanEnv()
	d.cmd.Cancel = func() error { return d.cmd.Process.Signal(os.Interrupt) }
	d.cmd.WaitDelay = 3 * time.Second
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		cancelH()
		return nil, err
	}
	var stderr strings.Builder
	d.cmd.Stderr = &stderr
	if err := d.cmd.Start(); err != nil {
		cancelH()
		return nil, fmt.Errorf("e2e: herdctl dashboard: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
	}()
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.WindowSize(1280, 860), chromedp.NoSandbox,
		chromedp.Flag("headless", true), chromedp.Flag("disable-gpu", true))...)
	bctx, cancelB := chromedp.NewContext(actx)
	d.stop = func() { cancelB(); cancelA(); cancelH(); _ = d.cmd.Wait() }
	select {
	case d.URL = <-line:
	case <-ctx.Done():
		d.stop()
		return nil, fmt.Errorf("e2e: herdctl dashboard printed no URL: %v: %s", ctx.Err(), stderr.String())
	}
	if !strings.HasPrefix(d.URL, "http://127.0.0.1:") {
		d.stop()
		return nil, fmt.Errorf("e2e: herdctl dashboard printed %q: %s", d.URL, stderr.String())
	}
	d.Browser = bctx
	if err := chromedp.Do(bctx, chromedp.Navigate(d.URL)); err != nil {
		d.stop()
		return nil, fmt.Errorf("e2e: loading the dashboard: %w", err)
	}
	wctx, cancel := context.WithCancel(bctx)
	defer cancel()
	stopOnCtx := context.AfterFunc(ctx, cancel)
	defer stopOnCtx()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))); err != nil {
		d.stop()
		return nil, fmt.Errorf("e2e: the dashboard never went live: %w", err)
	}
	return d, nil
}

// Stop closes the browser and stops herdctl dashboard (Ctrl-C).
func (d *Dashboard) Stop() { d.stop() }

// PollPage waits, for at most within, until the JavaScript expression is truthy in the
// page (checked on every change of the page), and returns its value.
func PollPage[T any](d *Dashboard, within time.Duration, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(d.Browser, within)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(within)))
}

// Screenshot writes a PNG of the whole page to path.
func (d *Dashboard) Screenshot(path string) error {
	ctx, cancel := context.WithTimeout(d.Browser, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
