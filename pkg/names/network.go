package names

import slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"

// The NetworkPolicies sless keeps in each namespace of its workloads.
const (
	// IngressPolicy admits to sless's pods only the data plane: Knative's
	// activator and autoscaler, and sless api.
	IngressPolicy = "sless-ingress"
	// BuildPolicy limits build pods' egress to the registry and S3.
	BuildPolicy = "sless-builds"
)

// EgressPolicy limits the egress of one workload's pods (spec.network).
// Function and service names are DNS-1035 labels, so the name is a valid
// object name, and the kind keeps a Function and a SlessService of one
// name apart.
func EgressPolicy(w slessv1alpha1.Workload) string {
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return "sless-egress-service-" + w.GetName()
	}
	return "sless-egress-function-" + w.GetName()
}
