package queue

import (
	"strings"
	"testing"
)

func TestCheckURLs(t *testing.T) {
	cases := []struct {
		list string
		want []string
	}{
		{"tcp://h:1883", nil},
		{"tcp://h:1883, ssl://u:p@h2:8883", nil},
		{"", []string{"the server URL is required"}},
		{"h:1883", []string{`server URL "h:1883" is not a URL like tcp://host:1883`}},
		{"tcp://", []string{`server URL "tcp:" is not a URL like tcp://host:1883`}},
		{"amqp://u:secret@h", []string{`server URL "amqp://h": scheme must be tcp or ssl`}},
		{"tcp://h,%zz", []string{`server URL "(an invalid URL)" is not a URL like tcp://host:1883`}},
	}
	for _, tc := range cases {
		errs := CheckURLs(tc.list, "tcp://host:1883", "tcp", "ssl")
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("CheckURLs(%q) = %q, want %q", tc.list, got, tc.want)
		}
	}
	if got := RedactURL("nats://u:p@a:1,tls://b:2"); got != "nats://a:1,tls://b:2" {
		t.Errorf("RedactURL = %q", got)
	}
}
