package resources

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"knative.dev/serving/pkg/apis/config"
)

func TestDisabledFeatures(t *testing.T) {
	all := &corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}, Tolerations: []corev1.Toleration{{Key: "k"}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}, PriorityClassName: "low", RuntimeClassName: ptr.To("gvisor")}
	tests := []struct {
		name string
		pod  *corev1.PodSpec
		data map[string]string
		want []string
	}{
		{"no placement needs nothing", &corev1.PodSpec{}, nil, nil},
		{"Knative's defaults: every flag off", all, nil, []string{"kubernetes.podspec-nodeselector", "kubernetes.podspec-tolerations",
			"kubernetes.podspec-affinity", "kubernetes.podspec-priorityclassname", "kubernetes.podspec-runtimeclassname"}},
		{"enabled and allowed both do", all, map[string]string{"kubernetes.podspec-nodeselector": "enabled", "kubernetes.podspec-tolerations": "allowed",
			"kubernetes.podspec-affinity": "Enabled", "kubernetes.podspec-priorityclassname": "enabled"}, []string{"kubernetes.podspec-runtimeclassname"}},
		{"a selector alone", &corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}}, map[string]string{"kubernetes.podspec-tolerations": "enabled"},
			[]string{"kubernetes.podspec-nodeselector"}},
	}
	vols := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ro", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "a", ReadOnly: true}}},
		{Name: "rw", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "b"}}},
	}}
	tests = append(tests, []struct {
		name string
		pod  *corev1.PodSpec
		data map[string]string
		want []string
	}{
		{"Knative's defaults: emptyDir on, claims off", vols, nil, []string{"kubernetes.podspec-persistent-volume-claim", "kubernetes.podspec-persistent-volume-write"}},
		{"claims on, writes allowed is not enough", vols, map[string]string{"kubernetes.podspec-persistent-volume-claim": "enabled",
			"kubernetes.podspec-persistent-volume-write": "allowed"}, []string{"kubernetes.podspec-persistent-volume-write"}},
		{"emptyDir turned off", vols, map[string]string{"kubernetes.podspec-volumes-emptydir": "disabled", "kubernetes.podspec-persistent-volume-claim": "enabled",
			"kubernetes.podspec-persistent-volume-write": "enabled"}, []string{"kubernetes.podspec-volumes-emptydir"}},
		{"a Secret needs no flag", &corev1.PodSpec{Volumes: vols.Volumes[:1]}, nil, nil},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			features, err := config.NewFeaturesConfigFromMap(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range DisabledFeatures(RequiredFeatures(tc.pod), features) {
				got = append(got, f.Flag)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("disabled (-want +got):\n%s", d)
			}
		})
	}
	msg := DisabledFeaturesMessage([]Feature{{"kubernetes.podspec-nodeselector", "nodeSelector"}})
	want := `spec.nodeSelector needs Knative's kubernetes.podspec-nodeselector, disabled in ConfigMap knative-serving/config-features; ` +
		`a cluster admin turns it on with: kubectl patch configmap config-features -n knative-serving --type merge -p '{"data":{"kubernetes.podspec-nodeselector":"enabled"}}'`
	if msg != want {
		t.Errorf("message:\n got %s\nwant %s", msg, want)
	}
	msg = DisabledFeaturesMessage(RequiredFeatures(&corev1.PodSpec{Volumes: vols.Volumes[3:]}))
	want = `spec.volumes[0].persistentVolumeClaim, spec.volumes[0].persistentVolumeClaim.readOnly: false needs Knative's kubernetes.podspec-persistent-volume-claim, ` +
		`kubernetes.podspec-persistent-volume-write, disabled in ConfigMap knative-serving/config-features; a cluster admin turns it on with: kubectl patch configmap config-features ` +
		`-n knative-serving --type merge -p '{"data":{"kubernetes.podspec-persistent-volume-claim":"enabled","kubernetes.podspec-persistent-volume-write":"enabled"}}'`
	if msg != want {
		t.Errorf("message:\n got %s\nwant %s", msg, want)
	}
	if !strings.Contains(msg, "kubectl patch") {
		t.Error("no command")
	}
}
