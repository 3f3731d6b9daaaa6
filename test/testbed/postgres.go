package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresBinDir finds PostgreSQL's server binaries (initdb, pg_ctl):
// SLESS_TEST_POSTGRES_BIN, else the newest of Debian's
// /usr/lib/postgresql/<major>/bin, else the directory of initdb on PATH.
func PostgresBinDir() (string, error) {
	if d := os.Getenv("SLESS_TEST_POSTGRES_BIN"); d != "" {
		return d, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	best, bestMajor := "", -1
	for _, f := range found {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(f))))
		if err == nil && major > bestMajor {
			best, bestMajor = filepath.Dir(f), major
		}
	}
	if best != "" {
		return best, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb): install PostgreSQL (hack/deps.sh postgres, or apt-get install postgresql), set SLESS_TEST_POSTGRES_BIN, or set SLESS_TEST_DATABASE_URL")
}

var (
	pgOnce   sync.Once
	pgAdmin  string // URL of a database on the shared server that may CREATE DATABASE
	pgErr    error
	pgServer *PostgresServer
)

// DatabaseURL gives the test a fresh, empty database and drops it afterwards.
// The server is, in order: SLESS_TEST_DATABASE_URL, one already answering on
// 127.0.0.1:5432, or a throwaway cluster started for this test binary.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() {
		if u := os.Getenv("SLESS_TEST_DATABASE_URL"); u != "" {
			pgAdmin = u
			return
		}
		local := "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
		if pingPostgres(local) == nil {
			pgAdmin = local
			return
		}
		srv, err := StartPostgres()
		if err != nil {
			pgErr = err
			return
		}
		pgServer = srv
		sharedMu.Lock()
		atExit(func() { _ = srv.Stop() })
		sharedMu.Unlock()
		pgAdmin = srv.URL("postgres")
	})
	if pgErr != nil {
		t.Fatalf("testbed: PostgreSQL: %v", pgErr)
	}
	return CreateDatabase(t, pgAdmin)
}

// CreateDatabase makes a fresh database on the server adminURL reaches and
// drops it when the test ends.
func CreateDatabase(t testing.TB, adminURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("testbed: connect to PostgreSQL: %v", err)
	}
	defer conn.Close(context.Background())
	name := "sless_test_" + randomSuffix(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testbed: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Logf("testbed: drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testbed: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("testbed: database URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func pingPostgres(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.Ping(ctx)
}

// PostgresServer is a throwaway PostgreSQL cluster owned by a test: it can be
// stopped and started again to test what happens while the database is down.
type PostgresServer struct {
	Dir string
	// Host is the address it listens on: 127.0.0.1 but for the node's.
	Host string
	Port int
	bin  string // where initdb and pg_ctl are
}

// StartPostgres initialises and starts a cluster in a fresh directory, on a
// free loopback port, trusting local connections. initdb refuses to run as
// root, so as root it runs as the postgres user.
func StartPostgres() (*PostgresServer, error) {
	dir, err := os.MkdirTemp("", "sless-pg-")
	if err != nil {
		return nil, err
	}
	return startPostgres(dir, "127.0.0.1")
}

// startPostgres is StartPostgres in dir (made if missing), listening on
// host, trusting connections from the networks clients (CIDRs) as well as
// loopback's.
func startPostgres(dir, host string, clients ...string) (*PostgresServer, error) {
	bin, err := PostgresBinDir()
	if err != nil {
		return nil, err
	}
	initdb := filepath.Join(bin, "initdb")
	if _, err := os.Stat(initdb); err != nil {
		return nil, fmt.Errorf("%s not found: %w", initdb, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePortOn(host)
	if err != nil {
		return nil, err
	}
	s := &PostgresServer{Dir: dir, Host: host, Port: port, bin: bin}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown %s to postgres: %v: %s", dir, err, out)
		}
	}
	if out, err := s.run(initdb, "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if len(clients) > 0 {
		hba, err := os.OpenFile(filepath.Join(dir, "data", "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		for _, c := range clients {
			_, err = fmt.Fprintf(hba, "host all all %s trust\n", c)
		}
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("pg_hba.conf: %w", err)
		}
	}
	return s, s.Start()
}

func (s *PostgresServer) run(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// Start starts (or restarts) the server and waits until it accepts connections.
func (s *PostgresServer) Start() error {
	opts := fmt.Sprintf("-c listen_addresses=%s -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", s.Host, s.Port, s.Dir)
	cmd := s.run(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-l", filepath.Join(s.Dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server fast, ending open connections.
func (s *PostgresServer) Stop() error {
	cmd := s.run(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-m", "fast", "-w", "stop")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// Crash stops the server as a crash would (pg_ctl stop -m immediate): no
// shutdown checkpoint, connections cut, recovery on the next Start.
func (s *PostgresServer) Crash() error {
	cmd := s.run(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-m", "immediate", "-w", "stop")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v: %s", err, out)
	}
	return nil
}

// Remove stops the server if it runs and deletes its files.
func (s *PostgresServer) Remove() {
	_ = s.Stop()
	_ = os.RemoveAll(s.Dir)
}

// URL reaches database db on this server.
func (s *PostgresServer) URL(db string) string {
	return "postgres://postgres@" + net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) + "/" + db + "?sslmode=disable"
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
