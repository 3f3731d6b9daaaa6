package cliflags

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Values gathers repeatable KEY=VALUE and KEY=PATH flags (kubectl's
// --from-literal and --from-file) into one map. A key given twice is
// refused rather than silently taking the last value, and no message
// shows a value: a flag's error waits in Err, where the flag package
// would print the argument whole.
type Values struct {
	Data map[string][]byte
	// Err is the first flag's error.
	Err error
	// CheckKey refuses a key that cannot be one; nil takes any.
	CheckKey func(key string) error
	// ReadFile reads a KEY=PATH's file; os.ReadFile when nil.
	ReadFile func(path string) ([]byte, error)
}

// Literal is the flag.Value of --name KEY=VALUE: the value as given.
func (v *Values) Literal(name string) flag.Value {
	return valueFlag(func(arg string) {
		v.keep(v.add(name, "VALUE", arg, func(rest string) ([]byte, error) { return []byte(rest), nil }))
	})
}

// File is the flag.Value of --name KEY=PATH: the file's bytes.
func (v *Values) File(name string) flag.Value {
	return valueFlag(func(arg string) {
		v.keep(v.add(name, "PATH", arg, func(path string) ([]byte, error) {
			if path == "" {
				return nil, errors.New("no PATH after =")
			}
			if v.ReadFile == nil {
				return os.ReadFile(path)
			}
			return v.ReadFile(path)
		}))
	})
}

func (v *Values) add(name, what, arg string, value func(rest string) ([]byte, error)) error {
	key, rest, ok := strings.Cut(arg, "=")
	if !ok || key == "" {
		return fmt.Errorf("--%s %q: want KEY=%s", name, redact(arg), what)
	}
	if v.CheckKey != nil {
		if err := v.CheckKey(key); err != nil {
			return fmt.Errorf("--%s: key %q: %w", name, key, err)
		}
	}
	if _, dup := v.Data[key]; dup {
		return fmt.Errorf("--%s: key %q is given twice", name, key)
	}
	b, err := value(rest)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", name, key, err)
	}
	if v.Data == nil {
		v.Data = map[string][]byte{}
	}
	v.Data[key] = b
	return nil
}

// keep remembers the first error.
func (v *Values) keep(err error) {
	if v.Err == nil {
		v.Err = err
	}
}

// redact keeps a KEY=VALUE's key and drops its value from a message.
func redact(arg string) string {
	if k, _, ok := strings.Cut(arg, "="); ok {
		return k + "=…"
	}
	if len(arg) > 0 {
		return "…"
	}
	return ""
}

// valueFlag is a flag.Value that hands each argument to set and never
// fails the parse itself.
type valueFlag func(arg string)

func (f valueFlag) String() string       { return "" }
func (f valueFlag) Set(arg string) error { f(arg); return nil }
