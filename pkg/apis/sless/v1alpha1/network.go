package v1alpha1

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateNetwork checks spec.network as the CRD schema does.
func validateNetwork(n *NetworkSpec, p *field.Path) field.ErrorList {
	if n == nil {
		return nil
	}
	var errs field.ErrorList
	p = p.Child("network")
	switch n.Egress {
	case "", EgressAll, EgressNone, EgressListed:
	default:
		errs = append(errs, field.NotSupported(p.Child("egress"), n.Egress, []string{EgressAll, EgressNone, EgressListed}))
	}
	if (len(n.Allow) > 0) != (n.Egress == EgressListed) {
		errs = append(errs, field.Invalid(p.Child("allow"), len(n.Allow), "egress: listed takes a non-empty allow list, and allow is for egress: listed only"))
	}
	ap := p.Child("allow")
	if len(n.Allow) > MaxEgressRules {
		errs = append(errs, field.TooMany(ap, len(n.Allow), MaxEgressRules))
	}
	for i, r := range n.Allow {
		ip := ap.Index(i)
		if r.CIDR == "" && len(r.Ports) == 0 {
			errs = append(errs, field.Required(ip, "an allow entry names a cidr, ports or both"))
		}
		if r.CIDR != "" {
			if pre, err := netip.ParsePrefix(r.CIDR); len(r.CIDR) > 49 || err != nil || pre.Masked().String() != r.CIDR {
				errs = append(errs, field.Invalid(ip.Child("cidr"), r.CIDR, "cidr must be an address range in its canonical form, such as 10.0.0.0/8 or 192.0.2.7/32"))
			}
		}
		pp := ip.Child("ports")
		if len(r.Ports) > MaxEgressPorts {
			errs = append(errs, field.TooMany(pp, len(r.Ports), MaxEgressPorts))
		}
		for j, port := range r.Ports {
			if port.Port < 1 || port.Port > 65535 {
				errs = append(errs, field.Invalid(pp.Index(j).Child("port"), port.Port, "must be between 1 and 65535"))
			}
			switch port.Protocol {
			case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
			default:
				errs = append(errs, field.NotSupported(pp.Index(j).Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}))
			}
		}
	}
	return errs
}
