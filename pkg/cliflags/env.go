package cliflags

import (
	"flag"
	"fmt"
	"os"
)

// EnvOr is the environment variable name, or def when it is unset or empty.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// BindEnv sets flags from environment variables before the command line
// is parsed (so a flag given there still wins). pairs alternate flag name
// and variable name. The flag's own parser reads the value: a value that
// does not parse (SLESS_S3_PATH_STYLE=yes) fails the start, naming the
// variable, where a silent fall back to the default would leave a
// Deployment running with a setting nobody chose.
func BindEnv(fs *flag.FlagSet, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		name, env := pairs[i], pairs[i+1]
		v := os.Getenv(env)
		if v == "" {
			continue
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("bindEnv: no flag -%s for %s", name, env)
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q (the default of -%s): %w", env, v, name, err)
		}
	}
	return nil
}
