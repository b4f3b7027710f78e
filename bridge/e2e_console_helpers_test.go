package bridge

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// Helpers of the console's end-to-end tests: a headless Chromium driven by
// chromedp, and a Server-Sent Events reader.

// chromiumPath is Debian's chromium. The browser tests need it and fail
// (never skip) without it.
const chromiumPath = "/usr/bin/chromium"

// browser is one headless Chromium tab with step screenshots that are
// written out only when the test fails.
type browser struct {
	t   testing.TB
	ctx context.Context
	// width and height are the page's size in CSS pixels.
	width, height int

	mu    sync.Mutex
	shots []shot // guarded by mu
}

type shot struct {
	name string
	png  []byte
}

// startBrowser starts a fresh headless Chromium (its own profile under
// t.TempDir()) with a laptop-sized window.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	return startBrowserAt(t, 1280, 900)
}

// startBrowserAt starts a fresh headless Chromium whose page is exactly
// width × height CSS pixels (a laptop is 1280×800, a tablet 768×1024).
func startBrowserAt(t testing.TB, width, height int) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the console tests drive Debian's headless Chromium, but %s is missing (%v); install it: apt-get install -y chromium", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		// /dev/shm is small in containers; Chromium crashes when it fills.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	// Cleanups run last-in first-out: the failure screenshots are taken
	// before the browser goes away, and the browser goes before its
	// profile directory is removed.
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	t.Cleanup(b.writeShotsOnFailure)
	// The first call on the tab's context starts the browser; it must not
	// carry a timeout, or the timeout would end the browser.
	require.NoError(t, chromedp.Do(ctx), "start %s", chromiumPath)
	b.width, b.height = width, height
	b.run("viewport", 10*time.Second, chromedp.EmulateViewport(int64(width), int64(height)))
	return b
}

// screenshotDir is where the console tests write the screenshots of the
// console's main states, for a reviewer (README, "The operator console").
// It is git-ignored.
const screenshotDir = "../test-output/console"

// keepShot writes a screenshot of the viewport to screenshotDir as
// <width>x<height>-<name>.png, whether or not the test fails.
func (b *browser) keepShot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err, "screenshot %s", name)
	require.NoError(b.t, os.MkdirAll(screenshotDir, 0o755))
	p := filepath.Join(screenshotDir, fmt.Sprintf("%dx%d-%s.png", b.width, b.height, sanitize(name)))
	require.NoError(b.t, os.WriteFile(p, png, 0o644))
}

// run runs actions with a deadline, naming the step on failure.
func (b *browser) run(step string, max time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, max)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + step)
		b.t.Fatalf("browser step %q: %v; page: %s", step, err, b.pageState())
	}
}

// pageState describes the console page for a failure message: the live
// stream, the last message shown, open dialogs and the queue.
func (b *browser) pageState() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		live: document.getElementById('app').dataset.live,
		toast: document.getElementById('toast').textContent,
		dialogs: [...document.querySelectorAll('dialog[open]')].map(d => d.id),
		queue: [...document.querySelectorAll('#queue li')].map(li => li.dataset.taskId),
		tasks: [...document.querySelectorAll('#tasks li')].map(li => li.dataset.taskId + ':' + li.dataset.status),
		focus: document.activeElement && (document.activeElement.id || document.activeElement.tagName),
	})`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// eval evaluates a JavaScript expression and returns its result.
func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.shot("failed-eval")
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return out
}

// poll waits until a JavaScript expression is truthy.
func (b *browser) poll(step, expr string, max time.Duration) {
	b.t.Helper()
	b.run(step, max+time.Second, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(max)))
}

// shot keeps a screenshot of the page as it is now, for the failure report.
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shots = append(b.shots, shot{name: name, png: png})
}

// writeShotsOnFailure writes every step's screenshot, and one of the page
// at the end, under the test's artifact dir (a temp dir unless go test
// runs with -artifacts, which keeps them) and logs their paths.
func (b *browser) writeShotsOnFailure() {
	if !b.t.Failed() {
		return
	}
	b.shot("at-failure")
	dir := b.t.ArtifactDir()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range b.shots {
		p := filepath.Join(dir, fmt.Sprintf("%02d-%s.png", i+1, sanitize(s.name)))
		if err := os.WriteFile(p, s.png, 0o644); err != nil {
			b.t.Logf("write screenshot: %v", err)
			continue
		}
		b.t.Logf("screenshot: %s", p)
	}
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, s)
}

// sseEvent is one Server-Sent Event (or, with Name ":", a comment line).
type sseEvent struct {
	Name string
	Data string
	ID   string
	At   time.Time
}

// sseStream is an open event stream.
type sseStream struct {
	Resp   *http.Response
	Events <-chan sseEvent
	close  func()
}

func (s *sseStream) Close() { s.close() }

// openSSE opens path on base as an event stream with the bearer token
// and/or cookie given, and parses it in a goroutine until Close.
func openSSE(tb testing.TB, base, path, token string, cookies ...*http.Cookie) *sseStream {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	require.NoError(tb, err)
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		require.NoError(tb, err)
	}
	out := make(chan sseEvent, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		rd := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if ev.Name != "" || ev.Data != "" {
					ev.At = time.Now()
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				select {
				case out <- sseEvent{Name: ":", Data: strings.TrimSpace(line[1:]), At: time.Now()}:
				case <-ctx.Done():
					return
				}
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.Data += line[len("data: "):]
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[len("id: "):]
			}
		}
	}()
	var once sync.Once
	return &sseStream{Resp: resp, Events: out, close: func() {
		once.Do(func() {
			cancel()
			_ = resp.Body.Close()
			<-done
		})
	}}
}

// next returns the next event named name (skipping others) within max.
func (s *sseStream) next(tb testing.TB, name string, max time.Duration, match func(sseEvent) bool) sseEvent {
	tb.Helper()
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				tb.Fatalf("event stream ended while waiting for %q", name)
			}
			if ev.Name == name && (match == nil || match(ev)) {
				return ev
			}
		case <-deadline.C:
			tb.Fatalf("no %q event within %s", name, max)
		}
	}
}

// bootBridge starts a bridge on the simulator for tests and benchmarks
// (startHarness needs a *testing.T) and returns it with its base URL.
func bootBridge(tb testing.TB, edit func(*hwconfig.Config)) (*Bridge, string) {
	tb.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(tb, err)
	cfg.Sim.FalsePositiveRate = 0
	if edit != nil {
		edit(cfg)
	}
	require.NoError(tb, cfg.Validate())
	b := newTestBridge(tb, cfg, nil)
	base := "http://" + b.Addr()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, base
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("bridge never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// contextWithTimeout is the tab's context with a deadline, for a call
// that needs chromedp.Run's result.
func contextWithTimeout(b *browser, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, d)
}
