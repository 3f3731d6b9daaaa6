package reconciler

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// The controller writes the policy of the site's maximums, and rewrites
// it when a restart brings other maximums.
func TestEnsurePolicy(t *testing.T) {
	k := testbed.SharedKube(t)
	ctx := context.Background()
	site := func(max string) limits.Site {
		s, err := limits.ParseSite(limits.Setting{}, limits.Setting{}, limits.Setting{Name: "max", Value: max})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	maxVariable := func() string {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := k.Client.Get(ctx, client.ObjectKey{Name: limits.PolicyName}, &p); err != nil {
			t.Fatal(err)
		}
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if err := k.Client.Get(ctx, client.ObjectKey{Name: limits.PolicyName}, &b); err != nil || b.Spec.PolicyName != limits.PolicyName {
			t.Fatalf("binding %+v: %v", b.Spec, err)
		}
		for _, v := range p.Spec.Variables {
			if v.Name == "max" {
				return v.Expression
			}
		}
		t.Fatal("the policy has no variable max")
		return ""
	}
	t.Cleanup(func() {
		_ = k.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: limits.PolicyName}})
		_ = k.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: limits.PolicyName}})
	})
	for _, c := range []struct{ max, want string }{
		{"memory=2Gi", "[['memory', '2Gi']]"},
		{"memory=2Gi", "[['memory', '2Gi']]"},
		{"cpu=4,memory=1Gi", "[['cpu', '4'], ['memory', '1Gi']]"},
		{"", "[]"},
	} {
		if err := ensurePolicy(ctx, k.Client, site(c.max)); err != nil {
			t.Fatalf("%q: %v", c.max, err)
		}
		if got := maxVariable(); !strings.Contains(got, c.want) {
			t.Errorf("after %q the policy's maximums are %s, want %s", c.max, got, c.want)
		}
	}
}
