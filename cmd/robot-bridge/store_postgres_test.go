package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/store/pgtest"
)

// lockedBuf is a process's stderr, read while it runs.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServe_PostgresStoreFromADSNFile(t *testing.T) {
	// Given a PostgreSQL server, and its DSN in a file as a mounted secret
	pg := pgtest.New(t)
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte(pg.CreateDB(t)+"\n"), 0o600))
	bin := buildBinary(t)
	cfg, err := filepath.Abs(filepath.Join(repoRoot, "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	dataDir := t.TempDir()

	// When serve runs with the postgres store, logging everything
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--log-level", "debug", "--store", "postgres", "--store-dsn-file", dsnFile)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROBOT_BRIDGE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "ROBOT_BRIDGE_AGENT_TOKEN="+crashAgentToken, "ROBOT_BRIDGE_OPERATOR_TOKEN="+crashOperatorToken)
	errOut := &lockedBuf{}
	cmd.Stderr = errOut
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-exited:
		t.Fatalf("serve exited at start: %s", errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not announce its address: %s", errOut.String())
	}

	// Then it becomes ready on that store
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "stderr: %s", errOut.String())
	// And the data dir holds the marker of the PostgreSQL store, no SQLite file
	require.FileExists(t, filepath.Join(dataDir, store.DefaultPostgresFile+store.MarkerSuffix))
	require.NoFileExists(t, filepath.Join(dataDir, store.DefaultFile))
	// When it is asked to stop
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	// Then it shut down cleanly, and no line it wrote holds the password
	require.NoError(t, exitErr, "stderr: %s", errOut.String())
	require.Contains(t, errOut.String(), `"driver":"postgres"`)
	require.NotContains(t, errOut.String(), pgtest.Password)
}

func TestServe_StoreFlagsRefuseWhatCannotWork(t *testing.T) {
	bin := buildBinary(t)
	cfg, err := filepath.Abs(filepath.Join(repoRoot, "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"an unknown engine", []string{"--store", "mysql"}, 2, `--store: store driver "mysql" is not known; allowed: sqlite, postgres`},
		{"postgres without a DSN", []string{"--store", "postgres"}, 1, "needs a connection string: set ROBOT_BRIDGE_STORE_DSN"},
		{"a DSN file with sqlite", []string{"--store-dsn-file", "/nonexistent"}, 1, "but the store is sqlite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn"}, tc.args...)
			code, _, errOut := runBinary(t, bin, args...)
			require.Equal(t, tc.wantCode, code, "stderr: %s", errOut)
			require.Contains(t, errOut, tc.want)
		})
	}
}
