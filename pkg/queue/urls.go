package queue

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// CheckURLs checks a comma-separated list of broker URLs: each must parse,
// name a host and use one of schemes. example shows the shape in messages
// ("nats://host:4222"). Messages never show a URL's user information.
func CheckURLs(list, example string, schemes ...string) []error {
	if list == "" {
		return []error{errors.New("the server URL is required")}
	}
	var errs []error
	for _, u := range strings.Split(list, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil || pu.Host == "" {
			errs = append(errs, fmt.Errorf("server URL %q is not a URL like %s", RedactURL(u), example))
			continue
		}
		if !slices.Contains(schemes, pu.Scheme) {
			errs = append(errs, fmt.Errorf("server URL %q: scheme must be %s", RedactURL(u), orList(schemes)))
		}
	}
	return errs
}

// RedactURL drops the user information of each URL of a comma-separated
// list, for messages.
func RedactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, raw := range parts {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			parts[i] = "(an invalid URL)"
			continue
		}
		u.User = nil
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
