package mqtttest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// StatePublisher is transport/mqtt/testdata/statepub running in a process
// of its own: a fleet of robots that announce themselves online and
// publish a state each at a fixed rate, so that a benchmark's CPU and
// memory figures are the bridge's alone.
type StatePublisher struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	sent atomic.Uint64
}

// Sent is how many states the publisher says it has published (it says so
// every 100 ms).
func (p *StatePublisher) Sent() uint64 { return p.sent.Load() }

var (
	statePubOnce sync.Once
	statePubBin  string
	statePubErr  error
)

// statePubBinary builds statepub once per test binary.
func statePubBinary() (string, error) {
	statePubOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			statePubErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "statepub")
		if err != nil {
			statePubErr = err
			return
		}
		statePubBin = filepath.Join(dir, "statepub")
		build := exec.Command("go", "build", "-o", statePubBin, "./transport/mqtt/testdata/statepub")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			statePubErr = fmt.Errorf("go build ./transport/mqtt/testdata/statepub: %w: %s", err, out)
		}
	})
	return statePubBin, statePubErr
}

// StartStatePublisher starts robots robots with ids idPrefix1 …
// idPrefixN publishing at hz each through the broker at url, and stops
// them when the test ends.
func StartStatePublisher(tb testing.TB, url string, robots int, hz float64, idPrefix string) *StatePublisher {
	tb.Helper()
	bin, err := statePubBinary()
	require.NoError(tb, err)
	p := &StatePublisher{cmd: exec.Command(bin, "-broker", url, "-robots", strconv.Itoa(robots),
		"-hz", strconv.FormatFloat(hz, 'f', -1, 64), "-id-prefix", idPrefix)}
	p.cmd.Stderr = os.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := p.cmd.StdoutPipe()
	require.NoError(tb, err)
	p.in, err = p.cmd.StdinPipe()
	require.NoError(tb, err)
	require.NoError(tb, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "sent "); ok {
				if v, err := strconv.ParseUint(n, 10, 64); err == nil {
					p.sent.Store(v)
				}
			}
		}
	}()
	tb.Cleanup(func() {
		_ = p.in.Close()
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// CPUTime is this process's user plus system CPU time.
func CPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RSS is this process's resident set size now, from /proc/self/statm.
func RSS(tb testing.TB) int64 {
	raw, err := os.ReadFile("/proc/self/statm")
	require.NoError(tb, err)
	f := strings.Fields(string(raw))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(tb, err)
	return pages * int64(os.Getpagesize())
}
