// Package knative implements adapter.Server with Knative Serving: one
// cluster-local Knative Service per function, pinned to an image digest.
package knative

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	knativeconfig "knative.dev/serving/pkg/apis/config"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/secrets"
)

// Reasons this server reports besides Knative's own.
const (
	ReasonDeploying = "Deploying"
	ReasonNotOwned  = "NotOwned"
)

// Server is adapter.Server on a cluster with Knative Serving.
type Server struct {
	// Client reads (from the manager's cache) and writes Services.
	Client client.Client
	// APIReader reads past the cache after an AlreadyExists.
	APIReader client.Reader
	Config    resources.Config
}

var (
	_ adapter.Server         = (*Server)(nil)
	_ adapter.RevisionReader = (*Server)(nil)
)

// EnsureService gets or creates fn's Service and updates it only when it
// differs from what MakeService builds in a field sless sets, so neither
// Knative's defaulting nor a controller restart makes a new revision.
func (s *Server) EnsureService(ctx context.Context, fn slessv1alpha1.Workload, image string) (adapter.ServeState, error) {
	st, err := s.ensure(ctx, fn, image)
	if err != nil {
		return st, err
	}
	if st.Image, err = s.servedImage(ctx, fn.GetNamespace(), image, st); err != nil {
		return adapter.ServeState{}, err
	}
	if st.ServingImage, err = s.servingImage(ctx, fn.GetNamespace(), st); err != nil {
		return adapter.ServeState{}, err
	}
	return st, nil
}

// Observe reads fn's Service from the cache and, when the revision that
// serves is not the one fn's status already names, that Revision's image.
func (s *Server) Observe(ctx context.Context, fn slessv1alpha1.Workload) (adapter.ServeState, bool, error) {
	key := client.ObjectKey{Namespace: fn.GetNamespace(), Name: names.Service(fn)}
	svc := &servingv1.Service{}
	switch err := s.Client.Get(ctx, key, svc); {
	case apierrors.IsNotFound(err):
		return adapter.ServeState{}, false, nil
	case err != nil:
		return adapter.ServeState{}, false, fmt.Errorf("Knative Service %s: %w", key, err)
	}
	if !metav1.IsControlledBy(svc, fn) || !svc.DeletionTimestamp.IsZero() {
		return adapter.ServeState{}, false, nil
	}
	st := State(svc)
	switch {
	case st.LatestReadyRevision == "":
	case st.LatestReadyRevision == fn.WorkloadStatus().LatestReadyRevision && fn.WorkloadStatus().ServingImage != "":
		st.ServingImage = fn.WorkloadStatus().ServingImage
	default:
		img, err := s.revisionImage(ctx, fn.GetNamespace(), st.LatestReadyRevision)
		if err != nil {
			return adapter.ServeState{}, false, err
		}
		st.ServingImage = img
	}
	return st, true, nil
}

func (s *Server) ensure(ctx context.Context, fn slessv1alpha1.Workload, image string) (adapter.ServeState, error) {
	want := resources.MakeService(fn, image, s.Config)
	if need := resources.RequiredFeatures(&want.Spec.Template.Spec.PodSpec); len(need) > 0 {
		// Said before Knative's webhook says it less helpfully.
		off, err := s.disabledFeatures(ctx, need)
		if err != nil {
			return adapter.ServeState{}, err
		}
		if len(off) > 0 {
			// A refusal is retried with backoff, so the flag turned on is picked up.
			return adapter.ServeState{}, &adapter.Refusal{Message: resources.DisabledFeaturesMessage(off)}
		}
	}
	versions, err := s.secretVersions(ctx, fn)
	if err != nil {
		return adapter.ServeState{}, err
	}
	resources.StampSecretVersions(want, versions)
	key := client.ObjectKeyFromObject(want)
	svc := &servingv1.Service{}
	err = s.Client.Get(ctx, key, svc)
	if apierrors.IsNotFound(err) {
		err = s.Client.Create(ctx, want)
		switch {
		case err == nil:
			st := State(want)
			st.Created = true
			return st, nil
		case apierrors.IsAlreadyExists(err):
			err = s.APIReader.Get(ctx, key, svc)
		}
	}
	if err != nil {
		return adapter.ServeState{}, fmt.Errorf("Knative Service %s: %w", key, err)
	}
	if !metav1.IsControlledBy(svc, fn) {
		return adapter.ServeState{Failed: true, Reason: ReasonNotOwned,
			Message: fmt.Sprintf("there is an existing Knative Service %q that this Function does not own", svc.Name)}, nil
	}
	if !svc.DeletionTimestamp.IsZero() {
		return adapter.ServeState{Reason: ReasonDeploying,
			Message: fmt.Sprintf("waiting for Knative Service %s, which is being deleted", svc.Name)}, nil
	}
	keepPrewarm(want, svc)
	updated := false
	if Differs(want, svc) {
		upd := svc.DeepCopy()
		upd.Labels = merge(upd.Labels, want.Labels)
		upd.Annotations = merge(upd.Annotations, want.Annotations)
		upd.OwnerReferences = want.OwnerReferences
		upd.Spec.Traffic = want.Spec.Traffic
		// The template is replaced only when it changed: a new name alone
		// (a Function whose traffic changed has a new generation) would make
		// Knative roll out a copy of the serving revision, which then takes
		// the latest target's share.
		if TemplateDiffers(&want.Spec.Template, &svc.Spec.Template) {
			upd.Spec.Template = want.Spec.Template
			taken, err := s.nameTaken(ctx, fn.GetNamespace(), &want.Spec.Template, &svc.Spec.Template)
			if err != nil {
				return adapter.ServeState{}, err
			}
			if taken {
				upd.Spec.Template.Name = retemplated(fn, &want.Spec.Template)
			}
		}
		if err := s.Client.Update(ctx, upd); err != nil {
			return adapter.ServeState{}, fmt.Errorf("update Knative Service %s: %w", key, err)
		}
		svc, updated = upd, true
	}
	st := State(svc)
	st.Updated = updated
	return st, nil
}

// disabledFeatures reads Knative's config-features past the cache (sless
// watches no ConfigMaps there) and returns what of need it keeps off. A
// missing ConfigMap is Knative's defaults.
func (s *Server) disabledFeatures(ctx context.Context, need []resources.Feature) ([]resources.Feature, error) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: resources.KnativeNamespace, Name: knativeconfig.FeaturesConfigName}
	if err := s.APIReader.Get(ctx, key, cm); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Knative's ConfigMap %s: %w", key, err)
	}
	features, err := knativeconfig.NewFeaturesConfigFromMap(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("Knative's ConfigMap %s: %w", key, err)
	}
	return resources.DisabledFeatures(need, features), nil
}

// secretVersions are the resourceVersions of the Secrets w's env refers
// to, read through Client, whose cache holds the Secrets sless makes
// (secrets.CacheSelector); one it does not hold (missing, or a Secret made
// by other means) has none, and its changes roll no revision.
func (s *Server) secretVersions(ctx context.Context, w slessv1alpha1.Workload) (map[string]string, error) {
	out := map[string]string{}
	ns := w.GetNamespace()
	for _, name := range secrets.Referenced(w.BuildSpec().CoreEnv()) {
		sec := &corev1.Secret{}
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
		}
		out[name] = sec.ResourceVersion
	}
	return out, nil
}

// servedImage is image pinned by digest. A built image names its digest
// already. A prebuilt image given by tag is resolved by Knative when it
// creates the revision (status.containerStatuses), so that every pod of a
// revision runs the same image whatever is pushed to the tag later; it is
// read from the revision the Service's template names, and is empty until
// Knative has created that revision and resolved it.
func (s *Server) servedImage(ctx context.Context, ns, image string, st adapter.ServeState) (string, error) {
	if adapter.Pinned(image) {
		return image, nil
	}
	if st.Revision == "" || st.LatestCreatedRevision != st.Revision {
		return "", nil
	}
	return s.revisionImage(ctx, ns, st.Revision)
}

// servingImage is the image of the revision that serves, pinned by digest.
// Once the revision asked for is the ready one, that is image as
// servedImage found it. While a newer revision deploys, or after it failed,
// Knative keeps the last ready revision serving, and that one runs an older
// image: it is read from its Revision.
func (s *Server) servingImage(ctx context.Context, ns string, st adapter.ServeState) (string, error) {
	switch {
	case st.LatestReadyRevision == "":
		return "", nil
	case st.LatestReadyRevision == st.Revision && st.Image != "":
		return st.Image, nil
	}
	return s.revisionImage(ctx, ns, st.LatestReadyRevision)
}

// revisionImage is the image Revision name runs, pinned by digest: the
// digest Knative resolved (status.containerStatuses), else the image of
// its spec when that names a digest; "" while neither is known or when
// the Revision does not exist.
func (s *Server) revisionImage(ctx context.Context, ns, name string) (string, error) {
	rev, err := s.revision(ctx, ns, name)
	if rev == nil || err != nil {
		return "", err
	}
	for _, cs := range rev.Status.ContainerStatuses {
		if cs.Name == resources.ContainerName && adapter.Pinned(cs.ImageDigest) {
			return cs.ImageDigest, nil
		}
	}
	for _, c := range rev.Spec.Containers {
		if c.Name == resources.ContainerName && adapter.Pinned(c.Image) {
			return c.Image, nil
		}
	}
	return "", nil
}

// revision reads Revision name past the cache: a cache would hold every
// Revision in the cluster to serve the few reads sless needs. It is nil
// when the Revision does not exist.
func (s *Server) revision(ctx context.Context, ns, name string) (*servingv1.Revision, error) {
	rev := &servingv1.Revision{}
	err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rev)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("Knative Revision %s/%s: %w", ns, name, err)
	}
	return rev, nil
}

// ReadRevision reads the settings fn's Revision name was made with, from
// that Revision (MakeService wrote them into its template): the function's
// env, resources and timeout as they were then, whatever fn's spec says now.
// A Revision that is not fn's Service's, or lacks the function's container,
// is not found.
func (s *Server) ReadRevision(ctx context.Context, fn slessv1alpha1.Workload, name string) (adapter.RevisionSettings, bool, error) {
	rev, err := s.revision(ctx, fn.GetNamespace(), name)
	if rev == nil || err != nil {
		return adapter.RevisionSettings{}, false, err
	}
	if rev.Labels[serving.ServiceLabelKey] != names.Service(fn) {
		return adapter.RevisionSettings{}, false, nil
	}
	for _, c := range rev.Spec.Containers {
		if c.Name != resources.ContainerName {
			continue
		}
		timeout := int32(slessv1alpha1.DefaultTimeoutSeconds)
		if t := rev.Spec.TimeoutSeconds; t != nil {
			timeout = int32(*t)
		}
		entrypoint := ""
		for _, e := range c.Env {
			if e.Name == "SLESS_ENTRYPOINT" {
				entrypoint = e.Value
			}
		}
		return adapter.RevisionSettings{Env: resources.UserEnv(c.Env), Resources: *c.Resources.DeepCopy(),
			TimeoutSeconds: timeout, Entrypoint: entrypoint, Placement: resources.PlacementOf(&rev.Spec.PodSpec)}, true, nil
	}
	return adapter.RevisionSettings{}, false, nil
}

// Differs says whether the existing Service must be updated to want. It
// compares only what sless sets: fields Knative's webhook defaults (probe
// periods, the port's protocol, the default traffic) are unset in want and ignored,
// and the revision name is ignored so that a Function change that leaves
// the template alone (say, its build timeout) rolls out no new revision.
// Env, annotations, resources and labels are compared exactly, because an
// entry removed from the Function must disappear from the Service.
func Differs(want, have *servingv1.Service) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			return true
		}
	}
	if !equality.Semantic.DeepEqual(want.OwnerReferences, have.OwnerReferences) {
		return true
	}
	if resources.TrafficDiffers(want.Spec.Traffic, have.Spec.Traffic) {
		return true
	}
	return TemplateDiffers(&want.Spec.Template, &have.Spec.Template)
}

// TemplateDiffers is Differs for the revision template alone, whose change
// makes a new revision.
func TemplateDiffers(want, have *servingv1.RevisionTemplateSpec) bool {
	// Semantic.DeepEqual takes nil and empty maps and slices as equal.
	if !equality.Semantic.DeepEqual(want.Labels, have.Labels) || !equality.Semantic.DeepEqual(want.Annotations, have.Annotations) {
		return true
	}
	return specDiffers(&want.Spec, &have.Spec)
}

// specDiffers compares a revision spec sless wrote with one Knative may
// have defaulted.
func specDiffers(want, have *servingv1.RevisionSpec) bool {
	w, h := want.DeepCopy(), have.DeepCopy()
	if len(w.Containers) != len(h.Containers) {
		return true
	}
	// Placement and volumes removed from the Function must leave the
	// Service too; Knative defaults none of it (mounts' readOnly sless sets).
	if !equality.Semantic.DeepEqual(w.NodeSelector, h.NodeSelector) || !equality.Semantic.DeepEqual(w.Tolerations, h.Tolerations) ||
		!equality.Semantic.DeepEqual(w.Affinity, h.Affinity) || w.PriorityClassName != h.PriorityClassName ||
		!equality.Semantic.DeepEqual(w.RuntimeClassName, h.RuntimeClassName) || !equality.Semantic.DeepEqual(w.Volumes, h.Volumes) {
		return true
	}
	for i := range w.Containers {
		wc, hc := &w.Containers[i], &h.Containers[i]
		if !equality.Semantic.DeepEqual(wc.Env, hc.Env) || !equality.Semantic.DeepEqual(wc.Resources, hc.Resources) ||
			!equality.Semantic.DeepEqual(wc.VolumeMounts, hc.VolumeMounts) {
			return true
		}
		// Knative fills in the probe's thresholds and port; only the
		// handler sless chose counts.
		if probePath(wc.ReadinessProbe) != probePath(hc.ReadinessProbe) {
			return true
		}
		wc.ReadinessProbe, hc.ReadinessProbe = nil, nil
	}
	if !equality.Semantic.DeepEqual(w.ContainerConcurrency, h.ContainerConcurrency) && w.ContainerConcurrency != nil {
		return true
	}
	if w.ContainerConcurrency == nil && h.ContainerConcurrency != nil && *h.ContainerConcurrency != 0 {
		// Knative defaults it to 0 (no limit); anything else was ours.
		return true
	}
	return !equality.Semantic.DeepDerivative(*w, *h)
}

// nameTaken says whether the revision name of tmpl, a changed template,
// cannot be used for it: Knative's webhook refuses a changed template that
// keeps the live template's name (have's), and its Configuration fails when
// the name is an existing Revision with another spec. Both happen when the
// template changes while the Function's generation does not — a rebuild
// after a sless upgrade changed the runtime wrapper, a changed controller
// setting — since its revision name is the generation's.
func (s *Server) nameTaken(ctx context.Context, ns string, tmpl, have *servingv1.RevisionTemplateSpec) (bool, error) {
	if tmpl.Name == have.Name {
		return true, nil
	}
	rev, err := s.revision(ctx, ns, tmpl.Name)
	if rev == nil || err != nil {
		return false, err
	}
	return specDiffers(&tmpl.Spec, &rev.Spec), nil
}

// retemplated names tmpl, a changed template whose revision name is
// taken, from its content, keeping the suffix of a held template
// (keepPrewarm) so that the trigger's release finds it.
func retemplated(fn slessv1alpha1.Workload, tmpl *servingv1.RevisionTemplateSpec) string {
	t := tmpl.DeepCopy()
	t.Name = ""
	b, err := json.Marshal(t)
	if err != nil {
		panic(err) // an API type, which always marshals
	}
	name := names.RetemplatedRevision(fn, sha256.Sum256(b))
	if strings.HasSuffix(tmpl.Name, names.WarmRevision("")) {
		name = names.WarmRevision(name)
	}
	return name
}

// keepPrewarm honours cron triggers' pre-warm holds: while the Service
// carries a PrewarmHoldPrefix annotation, the trigger reconciler has raised
// its template's min-scale to at least 1, and an update made for another
// reason must not drop it.
func keepPrewarm(want, have *servingv1.Service) {
	held := false
	for k := range have.Annotations {
		if strings.HasPrefix(k, resources.PrewarmHoldPrefix) {
			held = true
			break
		}
	}
	if !held {
		return
	}
	if n, err := strconv.Atoi(want.Spec.Template.Annotations[resources.AnnotationMinScale]); err == nil && n >= 1 {
		return
	}
	if want.Spec.Template.Annotations == nil {
		want.Spec.Template.Annotations = map[string]string{}
	}
	want.Spec.Template.Annotations[resources.AnnotationMinScale] = "1"
	// Knative refuses a template change that keeps the revision name, and
	// a hold comes and goes without a new generation: the held template
	// gets a name of its own, and dropping the hold returns to the
	// generation's plain revision, which Knative reuses.
	want.Spec.Template.Name = names.WarmRevision(want.Spec.Template.Name)
}

func probePath(p *corev1.Probe) string {
	if p == nil || p.HTTPGet == nil {
		return ""
	}
	return p.HTTPGet.Path
}

func merge(into, from map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

// State reads a Service's status the way sless needs it: Ready only when
// Knative has observed the Service's current generation and the revision
// its template names is the one ready.
func State(svc *servingv1.Service) adapter.ServeState {
	st := adapter.ServeState{
		Revision:              svc.Spec.Template.Name,
		LatestCreatedRevision: svc.Status.LatestCreatedRevisionName,
		LatestReadyRevision:   svc.Status.LatestReadyRevisionName,
		Traffic:               resources.TrafficStatus(svc),
	}
	if a := svc.Status.Address; a != nil && a.URL != nil {
		st.Address = a.URL.String()
	} else if svc.Status.URL != nil {
		st.Address = svc.Status.URL.String()
	}
	want := svc.Spec.Template.Name
	c := svc.Status.GetCondition(servingv1.ServiceConditionReady)
	switch {
	case svc.Status.ObservedGeneration != svc.Generation || svc.Generation == 0 || c == nil:
		st.Reason, st.Message = ReasonDeploying, fmt.Sprintf("Knative has not yet observed generation %d of Service %s", svc.Generation, svc.Name)
	case c.IsFalse():
		st.Failed, st.Reason, st.Message = true, c.Reason, c.Message
	case c.IsTrue() && (want == "" || st.LatestReadyRevision == want):
		st.Ready, st.Reason = true, "Ready"
	case c.IsTrue():
		st.Reason, st.Message = ReasonDeploying, fmt.Sprintf("revision %s is not ready yet; %s serves", want, st.LatestReadyRevision)
	case rollingOut[c.Reason]:
		// Knative's steps of a rollout, each a status write if copied.
		st.Reason, st.Message = ReasonDeploying, fmt.Sprintf("Knative is rolling out revision %s of Service %s", want, svc.Name)
	default:
		st.Reason, st.Message = c.Reason, c.Message
	}
	return st
}

// rollingOut are the reasons Knative gives a Service's Ready while a
// revision comes up as it should; any other is told as Knative tells it.
// OutOfDate is the Service's own while its Configuration or Route has not
// caught up with its spec.
var rollingOut = map[string]bool{"": true, "RevisionMissing": true, "IngressNotConfigured": true, "Deploying": true, "OutOfDate": true}

var _ adapter.RevisionLister = (*Server)(nil)

// ListRevisions lists w's Knative Revisions, oldest first, read past the
// cache as revision reads are.
func (s *Server) ListRevisions(ctx context.Context, w slessv1alpha1.Workload) ([]adapter.RevisionInfo, error) {
	list := &servingv1.RevisionList{}
	if err := s.APIReader.List(ctx, list, client.InNamespace(w.GetNamespace()),
		client.MatchingLabels{serving.ServiceLabelKey: names.Service(w)}); err != nil {
		return nil, fmt.Errorf("list Knative Revisions of %s/%s: %w", w.GetNamespace(), w.GetName(), err)
	}
	out := make([]adapter.RevisionInfo, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, RevisionInfo(&list.Items[i]))
	}
	slices.SortFunc(out, func(a, b adapter.RevisionInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// RevisionInfo is what sless tells of a Knative Revision.
func RevisionInfo(rev *servingv1.Revision) adapter.RevisionInfo {
	info := adapter.RevisionInfo{Name: rev.Name, Created: rev.CreationTimestamp.Time,
		SourceDigest: rev.Annotations[resources.AnnotationSourceDigest]}
	for _, cs := range rev.Status.ContainerStatuses {
		if cs.Name == resources.ContainerName && adapter.Pinned(cs.ImageDigest) {
			info.Image = cs.ImageDigest
		}
	}
	for _, c := range rev.Spec.Containers {
		if info.Image == "" && c.Name == resources.ContainerName && adapter.Pinned(c.Image) {
			info.Image = c.Image
		}
	}
	if c := rev.Status.GetCondition(servingv1.RevisionConditionReady); c != nil {
		info.Ready = c.IsTrue()
		if !info.Ready {
			info.Reason, info.Message = c.Reason, c.Message
		}
	}
	return info
}
