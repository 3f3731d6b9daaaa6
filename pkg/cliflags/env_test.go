package cliflags

import (
	"flag"
	"strings"
	"testing"
)

// A variable sets its flag's default; the command line still wins; a value
// the flag cannot hold names the variable.
func TestBindEnv(t *testing.T) {
	parse := func(args ...string) (int, bool, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("workers", 2, "")
		b := fs.Bool("path-style", true, "")
		if err := BindEnv(fs, "workers", "SLESS_T_WORKERS", "path-style", "SLESS_T_PATH_STYLE"); err != nil {
			return 0, false, err
		}
		err := fs.Parse(args)
		return *n, *b, err
	}
	if n, b, err := parse(); err != nil || n != 2 || !b {
		t.Fatalf("unset: %d %v %v, want the defaults", n, b, err)
	}
	t.Setenv("SLESS_T_WORKERS", "7")
	t.Setenv("SLESS_T_PATH_STYLE", "false")
	if n, b, err := parse(); err != nil || n != 7 || b {
		t.Fatalf("from the environment: %d %v %v, want 7 false", n, b, err)
	}
	if n, _, err := parse("-workers", "3"); err != nil || n != 3 {
		t.Fatalf("flag over variable: %d %v, want 3", n, err)
	}
	t.Setenv("SLESS_T_WORKERS", "seven")
	if _, _, err := parse(); err == nil || !strings.Contains(err.Error(), `SLESS_T_WORKERS="seven" (the default of -workers)`) {
		t.Fatalf("bad value: %v", err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	if err := BindEnv(fs, "missing", "SLESS_T_WORKERS"); err == nil {
		t.Fatal("a variable bound to no flag was accepted")
	}
}
