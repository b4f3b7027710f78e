package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// envBare makes this test binary a bare net/http server (the RSS
// baseline): it prints its address and serves until killed.
const envBare = "BENCHREPORT_BARE_SERVER"

// envIdle overrides how long BenchmarkIdleRSS lets both processes idle
// before it reads their RSS (a Go duration; default 5s).
const envIdle = "ROBOT_BRIDGE_BENCH_IDLE"

func TestMain(m *testing.M) {
	if os.Getenv(envBare) == "1" {
		bareServer()
		return
	}
	os.Exit(m.Run())
}

// bareServer is the smallest Go HTTP server that answers a JSON GET.
func bareServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("bare http://%s/\n", ln.Addr())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ready":true}`+"\n")
	}))
}

// BenchmarkIdleRSS builds robot-bridge, serves the simulator config with
// it (as `make run` does, in a temporary data dir), waits until /readyz
// answers, lets it idle (ROBOT_BRIDGE_BENCH_IDLE, default 5 s) and reads
// its resident set size (VmRSS) and peak (VmHWM) from /proc. The
// baseline, measured at the same time, is a bare Go net/http server
// process (this test binary in its bare mode) after the same idle time.
// It measures once per call, whatever b.N (run it with -benchtime 1x).
func BenchmarkIdleRSS(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc (Linux)")
	}
	idle := 5 * time.Second
	if v := os.Getenv(envIdle); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s=%q: %v", envIdle, v, err)
		}
		idle = d
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "robot-bridge")
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("go not found: %v", err)
	}
	build := exec.Command(goBin, "build", "-o", bin, "../../cmd/robot-bridge")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, err := filepath.Abs("../../hw-configs/sim-mobile-manipulator.yaml")
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	bridge := startProc(b, regexp.MustCompile(`API http://([0-9.:]+)/v1/`), bin,
		"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn")
	bare := startProc(b, regexp.MustCompile(`bare http://([0-9.:]+)/`), os.Args[0], "-test.run=^$")
	waitOK(b, "http://"+bridge.addr+"/readyz")
	waitOK(b, "http://"+bare.addr+"/")
	time.Sleep(idle)
	rss, hwm := procMem(b, bridge.cmd.Process.Pid)
	bareRSS, _ := procMem(b, bare.cmd.Process.Pid)
	b.StopTimer()
	b.ReportMetric(rss/1024, "rss-MB")
	b.ReportMetric(hwm/1024, "peak-rss-MB")
	b.ReportMetric(bareRSS/1024, "bare-rss-MB")
	b.ReportMetric(idle.Seconds(), "idle-s")
	b.ReportMetric(0, "ns/op")
}

type proc struct {
	cmd  *exec.Cmd
	addr string
}

// startProc starts name with args and waits for the address addrRE finds
// in its standard output; the process is killed when the benchmark ends.
func startProc(b *testing.B, addrRE *regexp.Regexp, name string, args ...string) *proc {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), envBare+"=")
	if name == os.Args[0] {
		cmd.Env = append(cmd.Env, envBare+"=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case a := <-addr:
		return &proc{cmd: cmd, addr: a}
	case <-exited:
		b.Fatalf("%s exited at start: %s", filepath.Base(name), stderr.String())
	case <-time.After(60 * time.Second):
		b.Fatalf("%s did not print its address: %s", filepath.Base(name), stderr.String())
	}
	return nil
}

// waitOK polls url until it answers 200 (at most 60 s).
func waitOK(b *testing.B, url string) {
	b.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never answered 200 (last error: %v)", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procMem reads VmRSS and VmHWM (kB) of pid.
func procMem(b *testing.B, pid int) (rss, hwm float64) {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	return statusKB(string(raw), "VmRSS"), statusKB(string(raw), "VmHWM")
}

// statusKB returns field (in kB) of a /proc/<pid>/status text, 0 if absent.
func statusKB(status, field string) float64 {
	for line := range strings.Lines(status) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		v, _ := strconv.ParseFloat(f[0], 64)
		return v
	}
	return 0
}
