// Package resources builds what the sandbox reconciler keeps in each
// namespace of sless's workloads: the NetworkPolicies that fence sless's
// pods and the Pod Security Admission labels of tenant namespaces. The
// builders are pure: the same inputs give the same objects.
package resources

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"knative.dev/serving/pkg/networking"

	adapterresources "github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
)

// Labels of the pods and namespaces the policies name.
const (
	// LabelNamespaceName is the label the apiserver puts on every Namespace
	// (Kubernetes 1.22 and later): its name.
	LabelNamespaceName = "kubernetes.io/metadata.name"
	// LabelPipelineRun is on the pods Tekton runs for a PipelineRun.
	LabelPipelineRun = "tekton.dev/pipelineRun"
	// LabelTrigger is on the pods of a trigger (cron runs, consumers).
	LabelTrigger = "sless.dev/trigger"
	// LabelApp is what Knative's own manifests select the activator and
	// autoscaler pods by.
	LabelApp = "app"
)

// DNS is where pods whose egress is limited may still ask names: the
// cluster DNS as kubeadm and most distributions label it.
var DNS = Peer{Namespace: "kube-system", Selector: map[string]string{"k8s-app": "kube-dns"}}

// Peer is a set of pods in one namespace.
type Peer struct {
	Namespace string
	Selector  map[string]string
}

// Config is the site's network settings.
type Config struct {
	// KnativeNamespace holds Knative Serving's activator and autoscaler.
	KnativeNamespace string
	// API is sless api's pods: its Service's namespace and selector.
	API Peer
	// BuildEgress is what build pods may reach besides DNS: the registry
	// and S3 (BuildEgressFor), or what the site names.
	BuildEgress []slessv1alpha1.EgressRule
	// DefaultEgress is the egress of a workload whose spec names none.
	DefaultEgress string
}

func managedLabels() map[string]string {
	return map[string]string{adapterresources.LabelManagedBy: adapterresources.ManagedBy}
}

func tcp(port int) networkingv1.NetworkPolicyPort {
	p := corev1.ProtocolTCP
	v := intstr.FromInt32(int32(port))
	return networkingv1.NetworkPolicyPort{Protocol: &p, Port: &v}
}

func (p Peer) peer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelNamespaceName: p.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: p.Selector},
	}
}

// MakeIngressPolicy is the default-deny ingress of every pod sless makes
// in ns: only Knative's activator (to the queue-proxy's HTTP, h2c and
// internal-TLS ports), its autoscaler (to the queue-proxy's metrics port) and sless api
// (the same two ports as the activator; it routes to ready pods directly)
// may connect. Kubelet probes are not subject to NetworkPolicy.
func MakeIngressPolicy(ns string, cfg Config) *networkingv1.NetworkPolicy {
	serve := []networkingv1.NetworkPolicyPort{tcp(networking.BackendHTTPPort), tcp(networking.BackendHTTP2Port), tcp(networking.BackendHTTPSPort)}
	knative := func(app string) Peer {
		return Peer{Namespace: cfg.KnativeNamespace, Selector: map[string]string{LabelApp: app}}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: names.IngressPolicy, Namespace: ns, Labels: managedLabels()},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: managedLabels()},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{knative("activator").peer()}, Ports: serve},
				{From: []networkingv1.NetworkPolicyPeer{knative("autoscaler").peer()}, Ports: []networkingv1.NetworkPolicyPort{tcp(networking.AutoscalingQueueMetricsPort)}},
				{From: []networkingv1.NetworkPolicyPeer{cfg.API.peer()}, Ports: serve},
			},
		},
	}
}

// MakeBuildPolicy limits the egress of ns's build pods (Tekton's pods of
// sless's PipelineRuns) to DNS and cfg.BuildEgress.
func MakeBuildPolicy(ns string, cfg Config) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: names.BuildPolicy, Namespace: ns, Labels: managedLabels()},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{
				MatchLabels:      managedLabels(),
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: LabelPipelineRun, Operator: metav1.LabelSelectorOpExists}},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      egress(cfg.BuildEgress),
		},
	}
}

// MakeEgressPolicy limits the egress of w's pods, its revisions' and its
// FunctionJob runs' (not its builds' or triggers'), as spec.network says;
// nil when they may reach anywhere. defaultEgress applies when the spec
// names no egress.
func MakeEgressPolicy(w slessv1alpha1.Workload, defaultEgress string) *networkingv1.NetworkPolicy {
	n := w.BuildSpec().Network
	var rules []slessv1alpha1.EgressRule
	switch slessv1alpha1.EgressOf(n, defaultEgress) {
	case slessv1alpha1.EgressAll:
		return nil
	case slessv1alpha1.EgressListed:
		rules = n.Allow
	}
	labels := managedLabels()
	labels[adapterresources.OwnerLabel(w)] = w.GetName()
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.EgressPolicy(w), Namespace: w.GetNamespace(), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{adapterresources.OwnerReference(w)},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{
				MatchLabels: labels,
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: LabelPipelineRun, Operator: metav1.LabelSelectorOpDoesNotExist},
					{Key: LabelTrigger, Operator: metav1.LabelSelectorOpDoesNotExist},
				},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      egress(rules),
		},
	}
}

// egress is DNS, then one rule per entry of allow.
func egress(allow []slessv1alpha1.EgressRule) []networkingv1.NetworkPolicyEgressRule {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	port := intstr.FromInt32(53)
	out := []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{DNS.peer()},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}},
	}}
	for _, a := range allow {
		r := networkingv1.NetworkPolicyEgressRule{}
		if a.CIDR != "" {
			r.To = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: a.CIDR}}}
		}
		for _, p := range a.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			v := intstr.FromInt32(p.Port)
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v})
		}
		out = append(out, r)
	}
	return out
}

// BuildEgressFor is build pods' default egress: TCP to the ports of the
// registry and of S3 as builds reach them, and 443 for base images and
// package indexes, at any address. Ports behind a cluster Service are its
// pods' (target) ports, which is what NetworkPolicy sees.
func BuildEgressFor(registry, s3Endpoint string) []slessv1alpha1.EgressRule {
	ports := []int32{443}
	if host, _, _ := strings.Cut(registry, "/"); strings.Contains(host, ":") {
		if _, p, ok := cutPort(host); ok {
			ports = append(ports, p)
		}
	}
	if u, err := url.Parse(s3Endpoint); err == nil && u.Host != "" {
		switch {
		case u.Port() != "":
			if p, err := strconv.Atoi(u.Port()); err == nil {
				ports = append(ports, int32(p))
			}
		case u.Scheme == "http":
			ports = append(ports, 80)
		}
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	out := make([]slessv1alpha1.EgressPort, len(ports))
	for i, p := range ports {
		out[i] = slessv1alpha1.EgressPort{Port: p, Protocol: corev1.ProtocolTCP}
	}
	return []slessv1alpha1.EgressRule{{Ports: out}}
}

// cutPort splits host:port, port a number in 1–65535.
func cutPort(s string) (string, int32, bool) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return s, 0, false
	}
	p, err := strconv.Atoi(s[i+1:])
	if err != nil || p < 1 || p > 65535 {
		return s, 0, false
	}
	return s[:i], int32(p), true
}

// ParseEgress reads a site's egress list: entries separated by commas,
// each CIDR, CIDR:PORT or :PORT (TCP), such as
// "10.0.0.0/8:5000,:443,2001:db8::/32:443".
func ParseEgress(s string) ([]slessv1alpha1.EgressRule, error) {
	var out []slessv1alpha1.EgressRule
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		cidr, port, hasPort := cutPort(e)
		if !hasPort && strings.HasPrefix(e, ":") {
			return nil, fmt.Errorf("%q: the port must be a number from 1 to 65535", e)
		}
		r := slessv1alpha1.EgressRule{CIDR: cidr}
		if cidr != "" {
			pre, err := netip.ParsePrefix(cidr)
			if err != nil || pre.Masked().String() != cidr {
				return nil, fmt.Errorf("%q: want CIDR, CIDR:PORT or :PORT, with the CIDR in its canonical form (10.0.0.0/8, 192.0.2.7/32)", e)
			}
		}
		if hasPort {
			r.Ports = []slessv1alpha1.EgressPort{{Port: port, Protocol: corev1.ProtocolTCP}}
		}
		out = append(out, r)
	}
	return out, nil
}

// Pod Security Admission's labels and the levels sless gives tenant
// namespaces.
const (
	LabelEnforce        = "pod-security.kubernetes.io/enforce"
	LabelEnforceVersion = "pod-security.kubernetes.io/enforce-version"
	LabelAudit          = "pod-security.kubernetes.io/audit"
	LabelAuditVersion   = "pod-security.kubernetes.io/audit-version"
	LabelWarn           = "pod-security.kubernetes.io/warn"
	LabelWarnVersion    = "pod-security.kubernetes.io/warn-version"
	// PodSecurityVersion pins the standards' version, so a cluster upgrade
	// does not tighten them under running tenants.
	PodSecurityVersion = "v1.33"
	// EnforcedLevel is baseline, not restricted: builds run in the tenant's
	// namespace, and kaniko must run as root to unpack base images.
	EnforcedLevel = "baseline"
	// AuditedLevel is what sless's own function, job and trigger pods meet.
	AuditedLevel = "restricted"
)

// PodSecurityLabels are the Pod Security Admission labels of a tenant
// namespace.
func PodSecurityLabels() map[string]string {
	return map[string]string{
		LabelEnforce: EnforcedLevel, LabelEnforceVersion: PodSecurityVersion,
		LabelAudit: AuditedLevel, LabelAuditVersion: PodSecurityVersion,
		LabelWarn: AuditedLevel, LabelWarnVersion: PodSecurityVersion,
	}
}

// MissingPodSecurityLabels is what of PodSecurityLabels labels lacks. A
// label already set is the cluster admin's choice and stays, whatever its
// value.
func MissingPodSecurityLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range PodSecurityLabels() {
		if _, ok := labels[k]; !ok {
			out[k] = v
		}
	}
	return out
}
