package main

import (
	"strings"
	"testing"
)

func TestParseAPIAsyncInputs(t *testing.T) {
	for _, c := range []struct {
		name, amqp string
		args       []string
		want       string
	}{
		{"broker without a database", "amqp://guest:guest@broker/", nil, "SLESS_ASYNC_AMQP_URL needs -database-url"},
		{"bad allow-list entry", "", []string{"-callback-allow", "10.0.0.0/99"}, "-callback-allow"},
		{"broker and database", "amqp://guest:guest@broker/", []string{"-database-url", "postgres://db/sless"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("SLESS_ASYNC_AMQP_URL", c.amqp)
			_, err := parseAPI(c.args)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}
