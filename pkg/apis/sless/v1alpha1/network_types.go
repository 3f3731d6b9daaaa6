package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Egress modes of spec.network.egress.
const (
	// EgressAll lets instances open connections anywhere.
	EgressAll = "all"
	// EgressNone lets instances reach nothing but the cluster's DNS.
	EgressNone = "none"
	// EgressListed lets instances reach the cluster's DNS and what
	// spec.network.allow lists.
	EgressListed = "listed"
)

// Bounds of spec.network, as its CRD markers say.
const (
	MaxEgressRules = 32
	MaxEgressPorts = 16
)

// NetworkSpec is what an instance may reach on the network. What may reach
// it is the platform's: sless api and Knative's data plane only.
//
// +kubebuilder:validation:XValidation:rule="(has(self.allow) && size(self.allow) > 0) == (has(self.egress) && self.egress == 'listed')",message="egress: listed takes a non-empty allow list, and allow is for egress: listed only",fieldPath=".allow"
type NetworkSpec struct {
	// Egress is where instances may open connections: all (anywhere),
	// none (only the cluster's DNS) or listed (the cluster's DNS and the
	// destinations in allow). Unset: the site's default, all unless the
	// operator set another.
	// +kubebuilder:validation:Enum=all;none;listed
	// +optional
	Egress string `json:"egress,omitempty"`

	// Allow lists the destinations of egress: listed.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Allow []EgressRule `json:"allow,omitempty"`
}

// EgressRule is one destination instances may reach: an address range, a
// set of ports, or ports within a range.
//
// +kubebuilder:validation:XValidation:rule="has(self.cidr) || (has(self.ports) && size(self.ports) > 0)",message="an allow entry names a cidr, ports or both"
type EgressRule struct {
	// CIDR is the destinations' address range, in its canonical form
	// (10.0.0.0/8, 2001:db8::/32, 192.0.2.7/32). Unset: any address.
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && string(cidr(self).masked()) == self",message="cidr must be an address range in its canonical form, such as 10.0.0.0/8 or 192.0.2.7/32"
	// +optional
	CIDR string `json:"cidr,omitempty"`

	// Ports are the destination ports. Unset: every port.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Ports []EgressPort `json:"ports,omitempty"`
}

// EgressPort is one destination port.
type EgressPort struct {
	// Port is the port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// Protocol is TCP (the default), UDP or SCTP.
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// EgressOf is the egress mode a workload with network n has, where the
// site's default is def ("" is EgressAll).
func EgressOf(n *NetworkSpec, def string) string {
	if n != nil && n.Egress != "" {
		return n.Egress
	}
	if def == "" {
		return EgressAll
	}
	return def
}

// LimitsEgress reports whether the spec limits what its instances reach
// (egress none or listed); unset is the site's default.
func (s *WorkloadSpec) LimitsEgress() bool {
	return s.Network != nil && (s.Network.Egress == EgressNone || s.Network.Egress == EgressListed)
}
