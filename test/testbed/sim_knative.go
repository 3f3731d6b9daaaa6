package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ServeMode says how the Knative simulator treats new generations of
// Services in a namespace.
type ServeMode int

const (
	// ServeReady makes each new revision Ready after the policy's Delay.
	ServeReady ServeMode = iota
	// ServeFail makes each new revision fail with the policy's Reason and
	// Message (e.g. an image that cannot be pulled) after the Delay.
	ServeFail
	// ServeHold leaves each new revision deploying until Ready or Fail is called.
	ServeHold
)

// ServePolicy is how the simulator treats Services of one namespace.
type ServePolicy struct {
	Mode  ServeMode
	Delay time.Duration
	// Reason and Message of a ServeFail; "RevisionFailed" and a generic
	// message when empty.
	Reason  string
	Message string
	// URL gives the URL a Ready Service reports as status.url and
	// status.address.url, e.g. an httptest.Server's. Without it a Service
	// reports Knative's cluster-local http://<name>.<namespace>.svc.cluster.local.
	URL func(svc *servingv1.Service) string
	// TagURL gives the URL of a tagged traffic target, e.g. a server that
	// plays that revision; Knative's cluster-local
	// http://<tag>-<name>.<namespace>.svc.cluster.local without it.
	TagURL func(svc *servingv1.Service, tag string) string
}

// KnativeSim plays Knative Serving's Service controller against a test
// apiserver: for each new generation of a serving.knative.dev/v1 Service it
// reports a created revision (the template's metadata.name, else Knative's
// <service>-<generation, 5 digits>), then marks it Ready with a URL and
// address, or failed with a reason, in Knative's status shape: conditions
// Ready, ConfigurationsReady and RoutesReady, observedGeneration,
// latestCreatedRevisionName, latestReadyRevisionName and traffic. As in
// Knative, a failed or deploying revision leaves the previous ready one
// serving. Each revision is also a Revision object, labelled with its
// Service, carrying status.containerStatuses (each container's image
// pinned by digest, as Knative resolves tags when it creates a revision;
// the simulator plays the registry: a tag's digest is the sha256 of the
// reference) and a Ready condition. spec.traffic is routed as Knative's
// Route does it (see route). A new generation that keeps the template of
// the ready revision changes the routing only. No Route or Pod objects are
// created. Knative's own
// defaulting and validation are in force on the apiserver (webhook.go), as
// on a cluster.
type KnativeSim struct {
	kube   *Kube
	cache  client.Reader
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	policies map[string]ServePolicy
	// since is when the simulator saw each generation; condition times are
	// only precise to the second.
	since map[genKey]time.Time
}

type genKey struct {
	types.NamespacedName
	generation int64
}

var (
	knativeOnce   sync.Once
	knativeShared *KnativeSim
	knativeErr    error
)

// SharedKnative is the package's Knative simulator on SharedKube, started on
// first use. Namespaces without a policy get Ready Services at once.
func SharedKnative(t testing.TB) *KnativeSim {
	t.Helper()
	k := SharedKube(t)
	knativeOnce.Do(func() {
		knativeShared, knativeErr = StartKnativeSim(k)
		if knativeErr == nil {
			sharedMu.Lock()
			atExit(knativeShared.Stop)
			sharedMu.Unlock()
		}
	})
	if knativeErr != nil {
		t.Fatalf("testbed: Knative simulator: %v", knativeErr)
	}
	return knativeShared
}

// StartKnativeSim starts a simulator on k; call Stop when done.
func StartKnativeSim(k *Kube) (*KnativeSim, error) {
	s := &KnativeSim{kube: k, policies: map[string]ServePolicy{}, since: map[genKey]time.Time{}}
	mgr, err := simManager(k)
	if err != nil {
		return nil, err
	}
	s.cache = mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).
		Named("sim-knative").
		For(&servingv1.Service{}).
		Complete(reconcile.Func(s.reconcile))
	if err != nil {
		return nil, err
	}
	return s, runManager(mgr, &s.cancel, &s.done)
}

// Stop ends the simulator.
func (s *KnativeSim) Stop() {
	s.cancel()
	<-s.done
}

// SetPolicy sets how Services in namespace ns roll out from now on.
func (s *KnativeSim) SetPolicy(ns string, p ServePolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies[ns] = p
}

func (s *KnativeSim) policy(ns string) ServePolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policies[ns]
}

// RevisionName is the revision Knative creates for the Service's current
// generation.
func RevisionName(svc *servingv1.Service) string {
	if n := svc.Spec.Template.Name; n != "" {
		return n
	}
	return fmt.Sprintf("%s-%05d", svc.Name, svc.Generation)
}

func (s *KnativeSim) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &servingv1.Service{}
	if err := s.cache.Get(ctx, req.NamespacedName, svc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !svc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if svc.Status.ObservedGeneration != svc.Generation {
		if s.keepsTemplate(ctx, svc) {
			// Knative's Configuration has nothing to do; only the Route
			// takes the new traffic.
			return reconcile.Result{}, s.update(ctx, req.Namespace, req.Name, func(svc *servingv1.Service) error {
				svc.Status.ObservedGeneration = svc.Generation
				return s.route(ctx, svc)
			})
		}
		// A new generation: its revision is created and deploying; the
		// previous ready revision, if any, keeps the traffic.
		if err := s.createRevision(ctx, svc); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, s.update(ctx, req.Namespace, req.Name, func(svc *servingv1.Service) error {
			if svc.Status.ObservedGeneration == svc.Generation {
				return nil
			}
			s.markDeploying(svc)
			return s.route(ctx, svc)
		})
	}
	ready := svc.Status.GetCondition(servingv1.ServiceConditionReady)
	if ready == nil || !ready.IsUnknown() {
		return reconcile.Result{}, nil
	}
	p := s.policy(req.Namespace)
	if p.Mode == ServeHold {
		return reconcile.Result{}, nil
	}
	if wait := time.Until(s.seenAt(svc).Add(p.Delay)); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if p.Mode == ServeFail {
		return reconcile.Result{}, s.Fail(ctx, req.Namespace, req.Name, p.Reason, p.Message)
	}
	return reconcile.Result{}, s.Ready(ctx, req.Namespace, req.Name)
}

// keepsTemplate says whether svc's new generation keeps the template of
// its latest revision: the same name, or no name and the same spec (Knative
// numbers unnamed revisions by the Configuration's generation, which a
// traffic change leaves alone).
func (s *KnativeSim) keepsTemplate(ctx context.Context, svc *servingv1.Service) bool {
	latest := svc.Status.LatestCreatedRevisionName
	if latest == "" {
		return false
	}
	if svc.Spec.Template.Name != "" {
		return svc.Spec.Template.Name == latest
	}
	rev := &servingv1.Revision{}
	if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: latest}, rev); err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(rev.Spec, svc.Spec.Template.Spec)
}

// createRevision makes sure the Revision of svc's current template exists,
// with the image digests resolved. Knative reuses a named revision whose
// template is unchanged. The test apiserver runs no garbage collector, so a
// Revision left by a deleted Service of the same name is removed here, as
// the collector would have.
func (s *KnativeSim) createRevision(ctx context.Context, svc *servingv1.Service) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: RevisionName(svc)}
	rev := &servingv1.Revision{}
	err := s.kube.Client.Get(ctx, key, rev)
	if err == nil && !metav1.IsControlledBy(rev, svc) {
		if err := s.kube.Client.Delete(ctx, rev); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete stale Revision %s: %w", key, err)
		}
		err = apierrors.NewNotFound(servingv1.Resource("revisions"), key.Name)
	}
	if apierrors.IsNotFound(err) {
		rev = &servingv1.Revision{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				// Knative's also carry serving.knative.dev/configuration,
				// which its webhook takes only on a Revision a Configuration
				// owns; the simulator makes no Configuration.
				Labels: map[string]string{"serving.knative.dev/service": svc.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: servingv1.SchemeGroupVersion.String(), Kind: "Service",
					Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}},
			},
			Spec: svc.Spec.Template.Spec,
		}
		// A test's Ready or Fail may create it beside the reconcile.
		if err = s.kube.Client.Create(ctx, rev); apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("Revision %s: %w", key, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.kube.Client.Get(ctx, key, rev); err != nil {
			return err
		}
		if len(rev.Status.ContainerStatuses) > 0 {
			return nil
		}
		for _, c := range rev.Spec.Containers {
			rev.Status.ContainerStatuses = append(rev.Status.ContainerStatuses, servingv1.ContainerStatus{Name: c.Name, ImageDigest: ResolvedImage(c.Image)})
		}
		return s.kube.Client.Status().Update(ctx, rev)
	})
	if err != nil {
		return fmt.Errorf("status of Revision %s: %w", key, err)
	}
	return nil
}

// ResolvedImage is image pinned by digest as the simulator resolves it: an
// image that names a digest stays as it is; a tag (":latest" when none) is
// replaced by the sha256 of the whole reference.
func ResolvedImage(image string) string {
	if strings.Contains(image, "@sha256:") {
		return image
	}
	repo := image
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		repo = image[:i]
	} else {
		image += ":latest"
	}
	sum := sha256.Sum256([]byte(image))
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

func (s *KnativeSim) seenAt(svc *servingv1.Service) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.since[genKey{types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, svc.Generation}]; ok {
		return t
	}
	return svc.Status.GetCondition(servingv1.ServiceConditionReady).LastTransitionTime.Inner.Time
}

func (s *KnativeSim) markDeploying(svc *servingv1.Service) {
	s.mu.Lock()
	s.since[genKey{types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, svc.Generation}] = time.Now()
	s.mu.Unlock()
	rev := RevisionName(svc)
	svc.Status.ObservedGeneration = svc.Generation
	svc.Status.LatestCreatedRevisionName = rev
	cs := svc.GetConditionSet().Manage(&svc.Status)
	cs.InitializeConditions()
	cs.MarkUnknown(servingv1.ServiceConditionConfigurationsReady, "Deploying", fmt.Sprintf("Revision %q is deploying.", rev))
}

// Ready makes the Service's latest revision Ready and routes its traffic.
func (s *KnativeSim) Ready(ctx context.Context, ns, name string) error {
	p := s.policy(ns)
	return s.finish(ctx, ns, name, func(rs *servingv1.RevisionStatus) {
		rs.MarkResourcesAvailableTrue()
		rs.MarkContainerHealthyTrue()
	}, func(svc *servingv1.Service) error {
		svc.Status.LatestReadyRevisionName = svc.Status.LatestCreatedRevisionName
		target := fmt.Sprintf("http://%s.%s.svc.cluster.local", svc.Name, svc.Namespace)
		if p.URL != nil {
			target = p.URL(svc)
		}
		u, err := apis.ParseURL(target)
		if err != nil {
			return fmt.Errorf("knative simulator: policy URL %q: %w", target, err)
		}
		svc.Status.URL = u
		svc.Status.Address = &duckv1.Addressable{URL: u.DeepCopy()}
		svc.GetConditionSet().Manage(&svc.Status).MarkTrue(servingv1.ServiceConditionConfigurationsReady)
		return nil
	})
}

// Fail makes the Service's latest revision fail, as Knative reports e.g. an
// image it cannot pull. An earlier ready revision keeps serving; when the
// revision that fails is the one serving (its container crashes), the
// route has none left, and the Service's Ready takes the route's words.
func (s *KnativeSim) Fail(ctx context.Context, ns, name, reason, message string) error {
	if reason == "" {
		reason = "RevisionFailed"
	}
	return s.finish(ctx, ns, name, func(rs *servingv1.RevisionStatus) {
		rs.MarkContainerHealthyFalse(reason, message)
	}, func(svc *servingv1.Service) error {
		msg := message
		if msg == "" {
			msg = fmt.Sprintf("Revision %q failed.", svc.Status.LatestCreatedRevisionName)
		}
		svc.GetConditionSet().Manage(&svc.Status).MarkFalse(servingv1.ServiceConditionConfigurationsReady, reason, "%s", msg)
		return nil
	})
}

// Crash makes the Service's latest revision's container exit with code
// and message, in Knative's words: the Revision's ContainerHealthy and
// the Configuration's Ready (MarkLatestCreatedFailed) as its controllers
// write them, the route then as Fail leaves it.
func (s *KnativeSim) Crash(ctx context.Context, ns, name string, code int32, message string) error {
	revReason, revMessage := servingv1.ExitCodeReason(code), servingv1.RevisionContainerExitingMessage(message)
	return s.finish(ctx, ns, name, func(rs *servingv1.RevisionStatus) {
		rs.MarkContainerHealthyFalse(revReason, revMessage)
	}, func(svc *servingv1.Service) error {
		var cfg servingv1.ConfigurationStatus
		cfg.MarkLatestCreatedFailed(svc.Status.LatestCreatedRevisionName, revMessage)
		c := cfg.GetCondition(servingv1.ConfigurationConditionReady)
		svc.GetConditionSet().Manage(&svc.Status).MarkFalse(servingv1.ServiceConditionConfigurationsReady, c.Reason, "%s", c.Message)
		return nil
	})
}

// finish ends the rollout of the Service's latest revision: the Revision's
// conditions by mark, then the Service's status by mutate, then its
// traffic routed again.
func (s *KnativeSim) finish(ctx context.Context, ns, name string, mark func(*servingv1.RevisionStatus), mutate func(*servingv1.Service) error) error {
	svc := &servingv1.Service{}
	if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
		return err
	}
	rev := svc.Status.LatestCreatedRevisionName
	if svc.Status.ObservedGeneration != svc.Generation {
		// Called before the simulator saw the generation.
		rev = RevisionName(svc)
		if err := s.createRevision(ctx, svc); err != nil {
			return err
		}
	}
	if err := s.markRevision(ctx, ns, rev, mark); err != nil {
		return err
	}
	return s.update(ctx, ns, name, func(svc *servingv1.Service) error {
		if svc.Status.ObservedGeneration != svc.Generation {
			s.markDeploying(svc)
		}
		if err := mutate(svc); err != nil {
			return err
		}
		return s.route(ctx, svc)
	})
}

// markRevision writes the conditions of Revision name, as Knative's
// revision reconciler does once its deployment is up or has failed.
func (s *KnativeSim) markRevision(ctx context.Context, ns, name string, mark func(*servingv1.RevisionStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rev := &servingv1.Revision{}
		if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, rev); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := rev.Status.DeepCopy()
		rev.Status.InitializeConditions()
		mark(&rev.Status)
		rev.Status.ObservedGeneration = rev.Generation
		if equality.Semantic.DeepEqual(before, &rev.Status) {
			return nil
		}
		return s.kube.Client.Status().Update(ctx, rev)
	})
}

// route plays Knative's Route for svc: each spec.traffic target resolves
// to a revision (latestRevision to the latest ready one), targets of the
// same tag, revision and sense are merged, and a tag gets its own URL. A
// target that cannot serve (no such revision, another Service's, not
// ready) leaves the traffic as it was, with RoutesReady saying why in
// Knative's words; a split whose merged targets are fewer than the spec's
// is never Ready, as Knative's Service reconciler compares the counts.
func (s *KnativeSim) route(ctx context.Context, svc *servingv1.Service) error {
	cs := svc.GetConditionSet().Manage(&svc.Status)
	spec := svc.Spec.Traffic
	if len(spec) == 0 {
		spec = []servingv1.TrafficTarget{{LatestRevision: ptr.To(true), Percent: ptr.To[int64](100)}}
	}
	var out []servingv1.TrafficTarget
	var bad *routeError
	for _, t := range spec {
		latest := ptr.Deref(t.LatestRevision, t.RevisionName == "")
		rev, err := s.routable(ctx, svc, t.RevisionName, latest)
		if err != nil {
			// Knative reports the first bad target, unless a later one has
			// failed for good.
			if bad == nil || (err.failed && !bad.failed) {
				bad = err
			}
			continue
		}
		r := servingv1.TrafficTarget{Tag: t.Tag, RevisionName: rev, LatestRevision: ptr.To(latest), Percent: ptr.To(ptr.Deref(t.Percent, 0))}
		if i := slices.IndexFunc(out, func(o servingv1.TrafficTarget) bool {
			return o.Tag == r.Tag && o.RevisionName == r.RevisionName && *o.LatestRevision == latest
		}); i >= 0 {
			out[i].Percent = ptr.To(*out[i].Percent + *r.Percent)
			continue
		}
		if t.Tag != "" {
			u, err := apis.ParseURL(s.tagURL(svc, t.Tag))
			if err != nil {
				return fmt.Errorf("knative simulator: tag URL of %q: %w", t.Tag, err)
			}
			r.URL = u
		}
		out = append(out, r)
	}
	switch {
	case bad != nil && bad.failed:
		cs.MarkFalse(servingv1.ServiceConditionRoutesReady, bad.reason, "%s", bad.message)
	case bad != nil:
		cs.MarkUnknown(servingv1.ServiceConditionRoutesReady, bad.reason, "%s", bad.message)
	case len(out) != len(spec):
		svc.Status.Traffic = out
		svc.Status.MarkRouteNotYetReady()
	default:
		svc.Status.Traffic = out
		cs.MarkTrue(servingv1.ServiceConditionRoutesReady)
	}
	return nil
}

// routeError is why a traffic target cannot serve; failed when it will not
// come right by waiting.
type routeError struct {
	reason, message string
	failed          bool
}

// routable is the revision a traffic target sends its calls to, as
// Knative's Route resolves and checks it.
func (s *KnativeSim) routable(ctx context.Context, svc *servingv1.Service, name string, latest bool) (string, *routeError) {
	if latest {
		name = svc.Status.LatestReadyRevisionName
		if name == "" {
			if svc.Status.GetCondition(servingv1.ServiceConditionConfigurationsReady).IsFalse() {
				return "", &routeError{"RevisionMissing", fmt.Sprintf("Configuration %q does not have any ready Revision.", svc.Name), true}
			}
			return "", &routeError{"RevisionMissing", fmt.Sprintf("Configuration %q is waiting for a Revision to become ready.", svc.Name), false}
		}
	}
	rev := &servingv1.Revision{}
	if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: name}, rev); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &routeError{"RevisionMissing", fmt.Sprintf("Revision %q referenced in traffic not found.", name), true}
		}
		return "", &routeError{"Unknown", err.Error(), false}
	}
	if owner := rev.Labels["serving.knative.dev/service"]; owner != svc.Name {
		if owner == "" {
			return "", &routeError{"RevisionNotOwned", fmt.Sprintf("Revision %q does not belong to Service %q.", name, svc.Name), true}
		}
		return "", &routeError{"RevisionNotOwned", fmt.Sprintf("Revision %q belongs to Service %q, not Service %q.", name, owner, svc.Name), true}
	}
	switch c := rev.Status.GetCondition(servingv1.RevisionConditionReady); {
	case c.IsTrue():
		return name, nil
	case c.IsFalse():
		return "", &routeError{"RevisionMissing", fmt.Sprintf("Revision %q failed to become ready.", name), true}
	default:
		return "", &routeError{"RevisionMissing", fmt.Sprintf("Revision %q is not yet ready.", name), false}
	}
}

func (s *KnativeSim) tagURL(svc *servingv1.Service, tag string) string {
	if p := s.policy(svc.Namespace); p.TagURL != nil {
		return p.TagURL(svc, tag)
	}
	return fmt.Sprintf("http://%s-%s.%s.svc.cluster.local", tag, svc.Name, svc.Namespace)
}

func (s *KnativeSim) update(ctx context.Context, ns, name string, mutate func(*servingv1.Service) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc := &servingv1.Service{}
		if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
			return err
		}
		before := svc.Status.DeepCopy()
		if err := mutate(svc); err != nil {
			return err
		}
		if equalServiceStatus(before, &svc.Status) {
			return nil
		}
		return s.kube.Client.Status().Update(ctx, svc)
	})
}

func equalServiceStatus(a, b *servingv1.ServiceStatus) bool {
	// LastTransitionTime only moves when a condition's status changes, so a
	// deep comparison is a change check.
	return equality.Semantic.DeepEqual(a, b)
}
