package resources

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

var cfg = Config{
	KnativeNamespace: "knative-serving",
	API:              Peer{Namespace: "sless-system", Selector: map[string]string{"app.kubernetes.io/component": "api"}},
	BuildEgress:      []slessv1alpha1.EgressRule{{Ports: []slessv1alpha1.EgressPort{{Port: 443, Protocol: corev1.ProtocolTCP}}}},
}

func port(proto corev1.Protocol, n int32) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(n)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func peer(ns string, sel map[string]string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: sel},
	}
}

var dnsRule = networkingv1.NetworkPolicyEgressRule{
	To:    []networkingv1.NetworkPolicyPeer{peer("kube-system", map[string]string{"k8s-app": "kube-dns"})},
	Ports: []networkingv1.NetworkPolicyPort{port("UDP", 53), port("TCP", 53)},
}

var managed = map[string]string{"app.kubernetes.io/managed-by": "sless"}

func TestMakeIngressPolicy(t *testing.T) {
	serve := []networkingv1.NetworkPolicyPort{port("TCP", 8012), port("TCP", 8013), port("TCP", 8112)}
	want := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "sless-ingress", Namespace: "team-a", Labels: managed},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: managed},
			PolicyTypes: []networkingv1.PolicyType{"Ingress"},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{peer("knative-serving", map[string]string{"app": "activator"})}, Ports: serve},
				{From: []networkingv1.NetworkPolicyPeer{peer("knative-serving", map[string]string{"app": "autoscaler"})}, Ports: []networkingv1.NetworkPolicyPort{port("TCP", 9090)}},
				{From: []networkingv1.NetworkPolicyPeer{peer("sless-system", map[string]string{"app.kubernetes.io/component": "api"})}, Ports: serve},
			},
		},
	}
	if d := cmp.Diff(want, MakeIngressPolicy("team-a", cfg)); d != "" {
		t.Errorf("ingress policy (-want +got):\n%s", d)
	}
}

func TestMakeBuildPolicy(t *testing.T) {
	want := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "sless-builds", Namespace: "team-a", Labels: managed},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: managed,
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tekton.dev/pipelineRun", Operator: "Exists"}}},
			PolicyTypes: []networkingv1.PolicyType{"Egress"},
			Egress:      []networkingv1.NetworkPolicyEgressRule{dnsRule, {Ports: []networkingv1.NetworkPolicyPort{port("TCP", 443)}}},
		},
	}
	if d := cmp.Diff(want, MakeBuildPolicy("team-a", cfg)); d != "" {
		t.Errorf("build policy (-want +got):\n%s", d)
	}
}

func function(name string, n *slessv1alpha1.NetworkSpec) *slessv1alpha1.Function {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: "u1"}}
	fn.Spec.Network = n
	return fn
}

func TestMakeEgressPolicy(t *testing.T) {
	listed := &slessv1alpha1.NetworkSpec{Egress: "listed", Allow: []slessv1alpha1.EgressRule{
		{CIDR: "10.0.0.0/8", Ports: []slessv1alpha1.EgressPort{{Port: 5432}, {Port: 514, Protocol: "UDP"}}},
		{Ports: []slessv1alpha1.EgressPort{{Port: 443}}},
		{CIDR: "2001:db8::/32"},
	}}
	cases := []struct {
		name  string
		w     slessv1alpha1.Workload
		def   string
		rules []networkingv1.NetworkPolicyEgressRule // nil: no policy
		owner string
	}{
		{name: "unset, site default all", w: function("f", nil)},
		{name: "all", w: function("f", &slessv1alpha1.NetworkSpec{Egress: "all"}), def: "none"},
		{name: "none", w: function("f", &slessv1alpha1.NetworkSpec{Egress: "none"}), rules: []networkingv1.NetworkPolicyEgressRule{dnsRule}, owner: "sless.dev/function"},
		{name: "unset, site default none", w: function("f", nil), def: "none", rules: []networkingv1.NetworkPolicyEgressRule{dnsRule}, owner: "sless.dev/function"},
		{name: "listed", w: function("f", listed), rules: []networkingv1.NetworkPolicyEgressRule{dnsRule,
			{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}}, Ports: []networkingv1.NetworkPolicyPort{port("TCP", 5432), port("UDP", 514)}},
			{Ports: []networkingv1.NetworkPolicyPort{port("TCP", 443)}},
			{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32"}}}},
		}, owner: "sless.dev/function"},
		{name: "service", w: &slessv1alpha1.SlessService{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "team-a", UID: "u1"},
			Spec: slessv1alpha1.SlessServiceSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Network: &slessv1alpha1.NetworkSpec{Egress: "none"}}}},
			rules: []networkingv1.NetworkPolicyEgressRule{dnsRule}, owner: "sless.dev/service"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := MakeEgressPolicy(c.w, c.def)
			if c.rules == nil {
				if got != nil {
					t.Fatalf("policy %s made for egress that is not limited", got.Name)
				}
				return
			}
			labels := map[string]string{"app.kubernetes.io/managed-by": "sless", c.owner: "f"}
			kind := strings.TrimPrefix(c.owner, "sless.dev/")
			want := &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "sless-egress-" + kind + "-f", Namespace: "team-a", Labels: labels,
					OwnerReferences: got.OwnerReferences},
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: metav1.LabelSelector{MatchLabels: labels, MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "tekton.dev/pipelineRun", Operator: "DoesNotExist"}, {Key: "sless.dev/trigger", Operator: "DoesNotExist"}}},
					PolicyTypes: []networkingv1.PolicyType{"Egress"},
					Egress:      c.rules,
				},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("egress policy (-want +got):\n%s", d)
			}
			if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "u1" || *got.OwnerReferences[0].Controller != true {
				t.Errorf("owner references %+v, want the workload as controller", got.OwnerReferences)
			}
		})
	}
}

func ports(ps ...int32) []slessv1alpha1.EgressRule {
	var out []slessv1alpha1.EgressPort
	for _, p := range ps {
		out = append(out, slessv1alpha1.EgressPort{Port: p, Protocol: "TCP"})
	}
	return []slessv1alpha1.EgressRule{{Ports: out}}
}

func TestBuildEgressFor(t *testing.T) {
	cases := []struct {
		registry, s3 string
		want         []slessv1alpha1.EgressRule
	}{
		{"registry.example.com/sless", "https://s3.amazonaws.com", ports(443)},
		{"registry.example.com/sless", "", ports(443)},
		{"10.201.0.1:5000/sless", "http://minio.minio.svc:9000", ports(443, 5000, 9000)},
		{"registry.local:5000", "http://minio.minio.svc", ports(80, 443, 5000)},
		{"[fd00::1]:5001/x", "https://s3.example.com:8443", ports(443, 5001, 8443)},
	}
	for _, c := range cases {
		if d := cmp.Diff(c.want, BuildEgressFor(c.registry, c.s3)); d != "" {
			t.Errorf("BuildEgressFor(%q, %q) (-want +got):\n%s", c.registry, c.s3, d)
		}
	}
}

func TestParseEgress(t *testing.T) {
	good := []struct {
		in   string
		want []slessv1alpha1.EgressRule
	}{
		{"", nil},
		{":443", ports(443)},
		{"10.0.0.0/8:5000, 192.0.2.7/32", []slessv1alpha1.EgressRule{
			{CIDR: "10.0.0.0/8", Ports: []slessv1alpha1.EgressPort{{Port: 5000, Protocol: "TCP"}}}, {CIDR: "192.0.2.7/32"}}},
		{"2001:db8::/32:443,fd00::/8", []slessv1alpha1.EgressRule{
			{CIDR: "2001:db8::/32", Ports: []slessv1alpha1.EgressPort{{Port: 443, Protocol: "TCP"}}}, {CIDR: "fd00::/8"}}},
	}
	for _, c := range good {
		got, err := ParseEgress(c.in)
		if err != nil {
			t.Errorf("ParseEgress(%q): %v", c.in, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("ParseEgress(%q) (-want +got):\n%s", c.in, d)
		}
	}
	bad := []struct{ in, msg string }{
		{"443", "canonical form"},
		{"example.com:443", "canonical form"},
		{"10.1.2.3/8", "canonical form"},
		{"10.0.0.0/8:0", "canonical form"},
		{":70000", "port must be a number"},
		{":https", "port must be a number"},
	}
	for _, c := range bad {
		_, err := ParseEgress(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("ParseEgress(%q) = %v, want an error naming the entry and saying %q", c.in, err, c.msg)
		}
	}
}

func TestMissingPodSecurityLabels(t *testing.T) {
	all := PodSecurityLabels()
	if d := cmp.Diff(all, MissingPodSecurityLabels(nil)); d != "" {
		t.Errorf("a bare namespace lacks (-want +got):\n%s", d)
	}
	if all[LabelEnforce] != "baseline" || all[LabelWarn] != "restricted" || all[LabelAudit] != "restricted" || all[LabelEnforceVersion] != "v1.33" {
		t.Errorf("levels %v, want enforce baseline, audit and warn restricted, pinned to v1.33", all)
	}
	// An admin's level stays; only what is unset is added.
	got := MissingPodSecurityLabels(map[string]string{LabelEnforce: "privileged", LabelWarn: "baseline"})
	if _, ok := got[LabelEnforce]; ok {
		t.Errorf("the admin's enforce level would be replaced: %v", got)
	}
	if _, ok := got[LabelWarn]; ok {
		t.Errorf("the admin's warn level would be replaced: %v", got)
	}
	if got[LabelAudit] != "restricted" || got[LabelEnforceVersion] != "v1.33" || len(got) != 4 {
		t.Errorf("missing %v, want audit, and the three versions", got)
	}
}
