package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/test/testbed"
)

// Every bad flag of sless dev is refused at once with a message naming it.
func TestDevRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// A data directory another sless dev holds.
	held := filepath.Join(dir, "held")
	os.MkdirAll(held, 0o755)
	st, err := apiserver.Open(filepath.Join(held, "sless.db"), runtime.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	token := []string{"--dev-token", "0123456789abcdef0123"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined"},
		{"extra argument", []string{"now"}, "unexpected arguments: now"},
		{"unknown log format", []string{"--log-format", "xml"}, `--log-format "xml": want auto, pretty, text or json`},
		{"zero idle timeout", []string{"--idle-timeout", "0s"}, "--idle-timeout must be positive"},
		{"negative idle timeout", []string{"--idle-timeout", "-5s"}, "--idle-timeout must be positive"},
		{"unparsable idle timeout", []string{"--idle-timeout", "soon"}, "invalid value \"soon\""},
		{"negative records age", []string{"--records-max-age", "-1h"}, "--records-max-age must not be negative"},
		{"zero idle connection timeout", []string{"--idle-conn-timeout", "0s"}, "--idle-conn-timeout must be positive"},
		{"zero body idle timeout", []string{"--body-idle-timeout", "0s"}, "--body-idle-timeout must be positive"},
		{"kafka broker without a port", []string{"--kafka-brokers", "k-0:9092,k-1"}, `--kafka-brokers: broker "k-1" is not host:port`},
		{"kafka brokers all blank", []string{"--kafka-brokers", " , "}, "--kafka-brokers: no broker given"},
		{"function domain with a wildcard", []string{"--fn-domain", "*.localhost"}, "--fn-domain: the function domain \"*.localhost\" starts with a wildcard"},
		{"function domain with a port", []string{"--fn-domain", "fn.localhost:8080"}, "has a port"},
		{"function domain with a trailing dot", []string{"--fn-domain", "fn.localhost."}, "is not a DNS label"},
		{"log size not a size", []string{"--log-max-size", "big"}, `--log-max-size "big": want a size`},
		{"log size too small", []string{"--log-max-size", "100"}, "at least 1Ki"},
		{"log size not whole bytes", []string{"--log-max-size", "0.5"}, "a whole number of bytes"},
		{"records size not a size", []string{"--records-max-size", "lots"}, `--records-max-size "lots": want a size`},
		{"records size negative", []string{"--records-max-size", "-1Mi"}, "want a whole number of bytes"},
		{"records size too small", []string{"--records-max-size", "1Ki"}, "want at least 1Mi"},
		{"spool size zero", []string{"--spool-max-size", "0"}, "--spool-max-size \"0\": want at least 1Mi"},
		{"spool size not a size", []string{"--spool-max-size", "1 GB"}, "--spool-max-size \"1 GB\": want a size"},
		{"no log files", []string{"--log-max-files", "0"}, "--log-max-files must be at least 1"},
		{"zero source gc grace", []string{"--source-gc-grace", "0s"}, "--source-gc-grace must be positive"},
		{"negative source gc interval", []string{"--source-gc-interval", "-1h"}, "--source-gc-interval not negative"},
		{"default limit not a quantity", []string{"--default-limits", "memory=big"}, `--default-limits (SLESS_DEFAULT_LIMITS): memory=big: "big" is not a quantity`},
		{"default request over the maximum", []string{"--default-requests", "cpu=4", "--max-resources", "cpu=2"}, "--default-requests (SLESS_DEFAULT_REQUESTS): cpu=4 is over --max-resources (SLESS_MAX_RESOURCES)'s 2"},
		{"maximum not a pair", []string{"--max-resources", "memory"}, `--max-resources (SLESS_MAX_RESOURCES): "memory" is not name=quantity`},
		{"short token", []string{"--dev-token", "short"}, "--dev-token must be at least 16 characters"},
		{"callback allow-list bad CIDR", []string{"--callback-allow", "10.0.0.0/33"}, `--callback-allow: callback allow-list entry "10.0.0.0/33": not a CIDR`},
		{"callback allow-list URL", []string{"--callback-allow", "127.0.0.1,http://hooks.example.com"}, `--callback-allow: callback allow-list entry "http://hooks.example.com": want a CIDR, an IP address or a host name`},
		{"callback allow-list host with a port", []string{"--callback-allow", "hooks.example.com:80"}, "want a CIDR, an IP address or a host name"},
		{"bad address", append([]string{"--addr", "not-an-address"}, token...), "listen on not-an-address"},
		{"address in use", append([]string{"--addr", busy.Addr().String()}, token...), "address already in use"},
		{"data dir is a file", append([]string{"--data-dir", file}, token...), "data directory"},
		{"data dir in use", append([]string{"--data-dir", held, "--addr", "127.0.0.1:0"}, token...), "another sless dev is using this data directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if !strings.Contains(strings.Join(args, " "), "--data-dir") {
				args = append(args, "--data-dir", filepath.Join(dir, "data-"+strings.ReplaceAll(c.name, " ", "-")))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := runDev(ctx, args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("runDev(%q) = %v, want an error with %q", args, err, c.want)
			}
		})
	}
}

// A keep-alive connection that sends no next request is closed after
// --idle-conn-timeout, as sless api closes it.
func TestDevClosesIdleConnections(t *testing.T) {
	addr := startDev(t, "--idle-conn-timeout", "300ms")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle keep-alive connection: %v, want closed by the server (EOF) after --idle-conn-timeout", err)
	}
}

// startDev runs sless dev on a free loopback port with a fresh data
// directory and args until the test ends, and returns its address once it
// listens.
func startDev(t *testing.T, args ...string) string {
	t.Helper()
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, append([]string{"--addr", addr, "--data-dir", t.TempDir(), "--dev-token", "0123456789abcdef0123", "--quiet"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sless dev: %v", err)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("sless dev does not listen on %s: %v", addr, err)
		}
	}
}
