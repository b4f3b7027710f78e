package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/store/pgtest"
)

// lockedLog is a log sink the test reads while the bridge writes.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestStoreEngine_ComesFromConfThenTheEnvironment(t *testing.T) {
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte("postgres://u:from-file@127.0.0.1:5432/rb\n"), 0o600))
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	tests := []struct {
		name    string
		conf    StoreConf
		env     map[string]string
		want    store.Driver
		wantDSN string
		wantErr string
	}{
		{name: "nothing set is sqlite", want: store.DriverSQLite},
		{name: "postgres from the environment", env: map[string]string{EnvStore: "postgres", EnvStoreDSN: "postgres://u:pw@h/db"}, want: store.DriverPostgres, wantDSN: "postgres://u:pw@h/db"},
		{name: "the flag wins over the environment", conf: StoreConf{Driver: "sqlite"}, env: map[string]string{EnvStore: "postgres"}, want: store.DriverSQLite},
		{name: "a DSN file wins over the variable", conf: StoreConf{Driver: "postgres", DSNFile: dsnFile}, env: map[string]string{EnvStoreDSN: "postgres://other"}, want: store.DriverPostgres, wantDSN: "postgres://u:from-file@127.0.0.1:5432/rb"},
		{name: "a DSN file from the environment", conf: StoreConf{Driver: "postgres"}, env: map[string]string{EnvStoreDSNFile: dsnFile}, want: store.DriverPostgres, wantDSN: "postgres://u:from-file@127.0.0.1:5432/rb"},
		{name: "postgres without a DSN", conf: StoreConf{Driver: "postgres"}, wantErr: "needs a connection string: set ROBOT_BRIDGE_STORE_DSN"},
		{name: "an empty DSN file", conf: StoreConf{Driver: "postgres", DSNFile: empty}, wantErr: "is empty"},
		{name: "a missing DSN file", conf: StoreConf{Driver: "postgres", DSNFile: filepath.Join(t.TempDir(), "nope")}, wantErr: "the store's DSN file"},
		{name: "a DSN with the sqlite store", env: map[string]string{EnvStoreDSN: "postgres://u:pw@h/db"}, wantErr: "but the store is sqlite"},
		{name: "an unknown engine", conf: StoreConf{Driver: "oracle"}, wantErr: `store driver "oracle" is not known; allowed: sqlite, postgres`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &Bridge{conf: Conf{Store: tc.conf, Env: func(k string) string { return tc.env[k] }}}
			drv, dsn, err := b.storeEngine()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), "pw@")
				require.NotContains(t, err.Error(), "from-file")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, drv)
			require.Equal(t, tc.wantDSN, dsn)
		})
	}
}

func TestStorePostgres_OutageIsUnavailableAndNothingMovesThenCallsWorkAgain(t *testing.T) {
	// Given a bridge on the simulator whose store is PostgreSQL, on a
	// server of its own, logging everything
	pg := pgtest.New(t)
	dsn := pg.CreateDB(t)
	logs := &lockedLog{}
	b, err := New(Conf{
		Config: testConfig(t, nil), Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Store:  StoreConf{Driver: "postgres"},
		Env: func(k string) string {
			if k == EnvStoreDSN {
				return dsn
			}
			return testEnv(k)
		},
	})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
	})
	h := &harness{
		t: t, b: b, sim: b.Sim(), base: "http://" + b.Addr(), agent: testAgentToken, operator: testOperatorToken,
		client: &http.Client{Timeout: 30 * time.Second},
	}
	h.waitReady()
	require.Equal(t, store.DriverPostgres, b.Store().Info().Driver)
	// And a keyed move that went through, recorded in PostgreSQL
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.4, "y": 0}, "idempotency_key", "k-before")))
	h.approve(id)
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 20*time.Second))["status"])

	// When the database server goes away
	require.NoError(t, pg.Stop())
	before := motionCommands(h.sim)

	// Then an action call is UNAVAILABLE and nothing moves, with and
	// without an idempotency key
	requireError(t, h.call("move_base_to", args(map[string]any{"x": 0.8, "y": 0}, "idempotency_key", "k-during")), "UNAVAILABLE", true)
	requireError(t, h.call("move_base_to", args(map[string]any{"x": 0.8, "y": 0})), "UNAVAILABLE", true)
	require.Equal(t, before, motionCommands(h.sim))
	// And the bridge is not ready
	code, _ := h.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	// And an e-stop pressed now latches at once, and its answer says it is
	// in force but not recorded
	code, body := h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "outage drill"})
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", body)
	require.Equal(t, "UNAVAILABLE", body["error"].(map[string]any)["type"], "%v", body)
	require.Contains(t, body["error"].(map[string]any)["suggestion"], "bring the PostgreSQL server back", "the advice names the database server, not a disk")
	require.Equal(t, true, safetyStatus(h)["estop"].(map[string]any)["active"])

	// When the server is back, with the same bridge process
	require.NoError(t, pg.Start())

	// Then the e-stop reaches the database by the store's own retry, and
	// the bridge is ready again
	require.Eventually(t, func() bool {
		es, _, err := b.Store().Latches(context.Background(), b.RobotIDs()[0])
		return err == nil && es.Active && es.Reason == "outage drill"
	}, 30*time.Second, 20*time.Millisecond)
	h.waitReady()
	code, body = h.do("POST", "/v1/estop/reset", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	// And the same call works
	id2 := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.8, "y": 0}, "idempotency_key", "k-during")))
	h.approve(id2)
	require.Equal(t, "succeeded", taskData(h.waitTask(id2, 20*time.Second))["status"])
	require.Greater(t, motionCommands(h.sim), before)
	// And its transitions are in PostgreSQL
	trs, err := b.Store().Transitions(context.Background(), id2)
	require.NoError(t, err)
	require.Equal(t, "succeeded", string(trs[len(trs)-1].To))
	// And no log line carried the database password
	require.Contains(t, logs.String(), `"component":"store"`)
	require.NotContains(t, logs.String(), pgtest.Password)
}

// A store that cannot be configured is refused before the bridge writes
// anything: no tokens.json left behind in the data dir.
func TestStoreEngine_MisconfiguredStoreWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, err := New(Conf{
		Config: testConfig(t, nil), Listen: "127.0.0.1:0", DataDir: dir,
		Store: StoreConf{Driver: "postgres"},
		Env:   func(string) string { return "" },
	})
	require.ErrorContains(t, err, "needs a connection string: set ROBOT_BRIDGE_STORE_DSN")
	_, statErr := os.Stat(dir)
	require.True(t, os.IsNotExist(statErr), "the data dir was created or written: %v", statErr)
}
