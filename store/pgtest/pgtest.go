// Package pgtest starts Debian's PostgreSQL server for a test: initdb in a
// temporary directory, postgres on a free loopback port with its socket in
// that directory, one database per test, stopped when the test binary's
// last user is done. When the test runs as root — initdb refuses to — the
// server runs as Debian's unprivileged postgres user. A missing PostgreSQL
// fails the test with the command that installs it; it never skips.
//
// Stop, Start and Restart let a test take the server away and bring it
// back on the same port and data directory, as a database outage would.
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// Install is the command that installs what this package needs.
const Install = "apt-get install -y postgresql"

// Password is the superuser's password on every test server. Tests that
// check no log line carries the DSN's secret grep for it.
const Password = "pgtest-s3cret-Pw"

// superuser is the server's superuser.
const superuser = "bridge"

// Server is one running PostgreSQL server.
type Server struct {
	bin    string // directory of initdb, postgres, pg_ctl
	dir    string // root of everything: data/, sock/
	port   int
	runAs  *user.User // nil: the current user
	extra  []string   // more server settings (name=value)
	logBuf *lockedBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu; nil while stopped
	exit chan struct{} // guarded by mu; closed when cmd exits
	dbs  int           // guarded by mu; databases created, for names
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
)

// Shared returns the test binary's one server, starting it on first use;
// a failure to start fails t. Call Shutdown from TestMain after m.Run to
// stop it (its files are removed then too).
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// Shutdown stops the shared server, if one was started.
func Shutdown() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		_ = shared.Close()
		shared = nil
	}
}

// New starts a server of its own for t, closed when t ends (outage tests
// stop and restart it without disturbing the shared one). Settings are
// extra server settings, "name=value" each (postgres -c).
func New(t testing.TB, settings ...string) *Server {
	t.Helper()
	s, err := Start(settings...)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// BinDir finds PostgreSQL's server binaries: pg_config --bindir, else
// Debian's /usr/lib/postgresql/<version>/bin.
func BinDir() (string, error) { return binDir("pg_config", "/usr/lib/postgresql/*/bin/initdb") }

func binDir(pgConfig, glob string) (string, error) {
	if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	matches, _ := filepath.Glob(glob)
	if len(matches) == 0 {
		return "", fmt.Errorf("PostgreSQL's initdb was not found (pg_config --bindir, /usr/lib/postgresql/*/bin); install it with `%s`", Install)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// Start runs initdb in a new temporary directory and starts the server
// on a free loopback port, with the extra settings ("name=value"). The
// caller closes it.
func Start(settings ...string) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, extra: settings, logBuf: &lockedBuffer{}}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and initdb refuses root: the unprivileged postgres user is missing (%w); install it with `%s`", err, Install)
		}
		s.runAs = u
	}
	if err := s.initdb(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if s.port, err = freePort(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) sockDir() string { return filepath.Join(s.dir, "sock") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
	if s.runAs != nil {
		uid, _ := strconv.Atoi(s.runAs.Uid)
		gid, _ := strconv.Atoi(s.runAs.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(cmd.Env, "HOME="+s.dir)
	}
	return cmd
}

func (s *Server) chown(paths ...string) error {
	if s.runAs == nil {
		return nil
	}
	uid, _ := strconv.Atoi(s.runAs.Uid)
	gid, _ := strconv.Atoi(s.runAs.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) initdb() error {
	for _, d := range []string{s.dataDir(), s.sockDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	pw := filepath.Join(s.dir, "pwfile")
	if err := os.WriteFile(pw, []byte(Password+"\n"), 0o600); err != nil {
		return err
	}
	if err := s.chown(s.dir, s.dataDir(), s.sockDir(), pw); err != nil {
		return err
	}
	cmd := s.command("initdb", "-D", s.dataDir(), "-U", superuser, "--pwfile", pw, "-A", "scram-sha-256",
		"-E", "UTF8", "--locale", "C.UTF-8", "--no-sync")
	out, err := cmd.CombinedOutput()
	_ = os.Remove(pw)
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// Start starts the server (again) on its port. Starting a running server
// is a no-op.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := s.command("postgres", "-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.sockDir(),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=16MB",
		"-c", "log_min_messages=warning", "-c", "logging_collector=off")
	for _, kv := range s.extra {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	cmd.Stdout, cmd.Stderr = s.logBuf, s.logBuf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	s.cmd, s.exit = cmd, exit
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			if s.pingLocked() == nil {
				return nil
			}
		}
		select {
		case <-exit:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start:\n%s", s.logBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 60s:\n%s", s.logBuf.String())
		}
	}
}

func (s *Server) pingLocked() error {
	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// Stop stops the server at once (SIGINT: the fast shutdown, which
// disconnects every client), as an outage would; the data stays.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exit:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
	return nil
}

// Crash stops the server the way a power cut ends it: SIGQUIT, the
// immediate shutdown, which writes nothing more and leaves the next start
// to replay the WAL (crash recovery).
func (s *Server) Crash() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exit:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
	return nil
}

// Restart stops and starts the server.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// Close stops the server and removes its files.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Log is what the server wrote so far.
func (s *Server) Log() string { return s.logBuf.String() }

// DSN is a URL for database db over TCP on loopback, with the password.
func (s *Server) DSN(db string) string {
	u := url.URL{
		Scheme: "postgres", User: url.UserPassword(superuser, Password), Host: s.Addr(), Path: "/" + db,
		RawQuery: "sslmode=disable&connect_timeout=5",
	}
	return u.String()
}

// CreateDB creates a new, empty database and returns its DSN.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	s.dbs++
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs)
	s.mu.Unlock()
	if err := s.Exec(context.Background(), "postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return s.DSN(name)
}

// Exec runs statements in database db as the superuser.
func (s *Server) Exec(ctx context.Context, db, stmt string, args ...any) error {
	h, err := sql.Open("pgx", s.DSN(db))
	if err != nil {
		return err
	}
	defer func() { _ = h.Close() }()
	_, err = h.ExecContext(ctx, stmt, args...)
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
