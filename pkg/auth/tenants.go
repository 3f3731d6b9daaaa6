package auth

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TenantPrefixes are the prefixes of the namespaces a namespace claim may
// name: derived, the prefix of namespaces derived from subjects (given
// its '-', as NamespaceFor writes it), then more. Each must start a
// namespace name, and none may take in default or kube-*.
func TenantPrefixes(derived string, more []string) ([]string, error) {
	if !strings.HasSuffix(derived, "-") {
		derived += "-"
	}
	out := append([]string{derived}, more...)
	for _, p := range out {
		if msgs := validation.IsDNS1123Label(strings.TrimSuffix(p, "-")); len(msgs) > 0 {
			return nil, fmt.Errorf("tenant namespace prefix %q does not start a namespace name: %s", p, msgs[0])
		}
		if strings.HasPrefix("default", p) || strings.HasPrefix("kube-", p) || strings.HasPrefix(p, "kube-") {
			return nil, fmt.Errorf("tenant namespace prefix %q would make default or kube-* a tenant's namespace", p)
		}
	}
	return out, nil
}
