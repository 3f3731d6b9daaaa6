package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	tektonconfig "github.com/tektoncd/pipeline/pkg/apis/config"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonv1alpha1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1alpha1"
	tektonv1beta1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1beta1"
	resolutionv1alpha1 "github.com/tektoncd/pipeline/pkg/apis/resolution/v1alpha1"
	resolutionv1beta1 "github.com/tektoncd/pipeline/pkg/apis/resolution/v1beta1"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	"knative.dev/pkg/apis"
	"knative.dev/pkg/configmap"
	webhookjson "knative.dev/pkg/webhook/json"
	"knative.dev/pkg/webhook/resourcesemantics"
	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	servingconfig "knative.dev/serving/pkg/apis/config"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	servingv1beta1 "knative.dev/serving/pkg/apis/serving/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KnativeNameChangeMessage is how Knative's webhook refuses a Service
// update that changes a named revision template but keeps its name: a
// revision is immutable and the name says which one serves.
const KnativeNameChangeMessage = "Saw the following changes without a name change (-old +new)"

// project is one upstream webhook the test bed's admission server stands in
// for, with what its cmd/webhook/main.go gives knative.dev/pkg's admission
// controllers: the kinds, the decoding and the config store.
type project struct {
	// name is the defaulting webhook's name; the validating one's is
	// "validation." + name. Refusals quote it, as on a cluster.
	name string
	// path prefixes the server's paths for this project.
	path string
	// namespace holds the project's config maps.
	namespace string
	// strict refuses fields the Go types lack (Tekton); Knative relies on
	// its CRD schemas instead.
	strict bool
	types  map[schema.GroupVersionKind]resourcesemantics.GenericCRD
	// configure builds the project's config from its config maps as the
	// upstream config store does, and returns what puts it into a context.
	configure func([]corev1.ConfigMap, configmap.Logger) func(context.Context) context.Context
}

var servingProject = &project{
	name: "webhook.serving.knative.dev", path: "/serving", namespace: "knative-serving",
	types: map[schema.GroupVersionKind]resourcesemantics.GenericCRD{
		servingv1.SchemeGroupVersion.WithKind("Revision"):                   &servingv1.Revision{},
		servingv1.SchemeGroupVersion.WithKind("Configuration"):              &servingv1.Configuration{},
		servingv1.SchemeGroupVersion.WithKind("Route"):                      &servingv1.Route{},
		servingv1.SchemeGroupVersion.WithKind("Service"):                    &servingv1.Service{},
		autoscalingv1alpha1.SchemeGroupVersion.WithKind("PodAutoscaler"):    &autoscalingv1alpha1.PodAutoscaler{},
		autoscalingv1alpha1.SchemeGroupVersion.WithKind("Metric"):           &autoscalingv1alpha1.Metric{},
		networkingv1alpha1.SchemeGroupVersion.WithKind("Certificate"):       &networkingv1alpha1.Certificate{},
		networkingv1alpha1.SchemeGroupVersion.WithKind("Ingress"):           &networkingv1alpha1.Ingress{},
		networkingv1alpha1.SchemeGroupVersion.WithKind("ServerlessService"): &networkingv1alpha1.ServerlessService{},
		servingv1beta1.SchemeGroupVersion.WithKind("DomainMapping"):         &servingv1beta1.DomainMapping{},
	},
	configure: func(cms []corev1.ConfigMap, log configmap.Logger) func(context.Context) context.Context {
		store := servingconfig.NewStore(log)
		feed(store.WatchConfigs, cms)
		// Knative's store leaves a config whose map is missing nil; its
		// webhook would not start without the map. Such a config is the default.
		cfg := servingconfig.FromContextOrDefaults(store.ToContext(context.Background()))
		return func(ctx context.Context) context.Context { return servingconfig.ToContext(ctx, cfg) }
	},
}

var tektonProject = &project{
	name: "webhook.pipeline.tekton.dev", path: "/tekton", namespace: "tekton-pipelines", strict: true,
	types: map[schema.GroupVersionKind]resourcesemantics.GenericCRD{
		tektonv1alpha1.SchemeGroupVersion.WithKind("VerificationPolicy"):    &tektonv1alpha1.VerificationPolicy{},
		tektonv1alpha1.SchemeGroupVersion.WithKind("StepAction"):            &tektonv1alpha1.StepAction{},
		tektonv1beta1.SchemeGroupVersion.WithKind("Pipeline"):               &tektonv1beta1.Pipeline{},
		tektonv1beta1.SchemeGroupVersion.WithKind("Task"):                   &tektonv1beta1.Task{},
		tektonv1beta1.SchemeGroupVersion.WithKind("TaskRun"):                &tektonv1beta1.TaskRun{},
		tektonv1beta1.SchemeGroupVersion.WithKind("PipelineRun"):            &tektonv1beta1.PipelineRun{},
		tektonv1beta1.SchemeGroupVersion.WithKind("CustomRun"):              &tektonv1beta1.CustomRun{},
		tektonv1beta1.SchemeGroupVersion.WithKind("StepAction"):             &tektonv1beta1.StepAction{},
		tektonv1.SchemeGroupVersion.WithKind("Task"):                        &tektonv1.Task{},
		tektonv1.SchemeGroupVersion.WithKind("Pipeline"):                    &tektonv1.Pipeline{},
		tektonv1.SchemeGroupVersion.WithKind("TaskRun"):                     &tektonv1.TaskRun{},
		tektonv1.SchemeGroupVersion.WithKind("PipelineRun"):                 &tektonv1.PipelineRun{},
		resolutionv1alpha1.SchemeGroupVersion.WithKind("ResolutionRequest"): &resolutionv1alpha1.ResolutionRequest{},
		resolutionv1beta1.SchemeGroupVersion.WithKind("ResolutionRequest"):  &resolutionv1beta1.ResolutionRequest{},
	},
	configure: func(cms []corev1.ConfigMap, log configmap.Logger) func(context.Context) context.Context {
		store := tektonconfig.NewStore(log)
		feed(store.WatchConfigs, cms)
		return store.ToContext // Tekton's store gives a missing map's defaults itself
	},
}

// defaulting is the mutating webhook: the object decoded into its Go type,
// SetDefaults in knative.dev/pkg's context, and a JSON patch to the result.
func (a *admissionServer) defaulting(ctx context.Context, p *project, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ctx, err := a.configured(ctx, p)
	if err != nil {
		return refuse("mutation failed: %v", err)
	}
	newObj, oldObj, err := p.decode(req)
	if err != nil {
		return refuse("mutation failed: %v", err)
	}
	if oldObj != nil {
		// The baseline is the old object defaulted, so that the webhook's
		// own earlier defaults never count as a change.
		oldObj.SetDefaults(ctx)
		ctx = withinUpdate(ctx, oldObj, req.SubResource)
	} else {
		ctx = apis.WithinCreate(ctx)
	}
	ctx = apis.WithUserInfo(ctx, &req.UserInfo)
	// knative.dev/pkg adds creator annotations itself only to apis.HasSpec
	// kinds, which none of these is: Knative's SetDefaults sets its own.
	newObj.SetDefaults(ctx)

	after, err := json.Marshal(newObj)
	if err != nil {
		return refuse("mutation failed: %v", err)
	}
	// One patch from the bytes sent to the defaulted object: upstream's
	// round-trip patch and defaults patch together.
	patch, err := jsonpatch.CreatePatch(req.Object.Raw, after)
	if err != nil {
		return refuse("mutation failed: %v", err)
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return refuse("mutation failed: %v", err)
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: b, PatchType: &pt}
}

// validation is the validating webhook: Validate in knative.dev/pkg's
// context; error-level field errors refuse, warning-level ones are warnings.
func (a *admissionServer) validation(ctx context.Context, p *project, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ctx, err := a.configured(ctx, p)
	if err != nil {
		return refuse("validation failed: %v", err)
	}
	newObj, oldObj, err := p.decode(req)
	if err != nil {
		return refuse("decoding request failed: %v", err)
	}
	ctx = apis.WithUserInfo(ctx, &req.UserInfo)
	if req.DryRun != nil && *req.DryRun {
		ctx = apis.WithDryRun(ctx)
	}
	if oldObj != nil {
		ctx = withinUpdate(ctx, oldObj, req.SubResource)
	} else {
		ctx = apis.WithinCreate(ctx)
	}

	fe := newObj.Validate(ctx)
	var warnings []string
	if w := fe.Filter(apis.WarningLevel); w != nil {
		for _, e := range w.WrappedErrors() {
			// A control character would make the apiserver drop the warning.
			warnings = append(warnings, strings.Split(e.Error(), "\n")...)
		}
	}
	if e := fe.Filter(apis.ErrorLevel); e != nil {
		resp := refuse("validation failed: %v", e)
		resp.Warnings = warnings
		return resp
	}
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// decode reads the request's object and old object (nil on create) into
// the Go type of its kind, as knative.dev/pkg's webhook decodes them.
func (p *project) decode(req *admissionv1.AdmissionRequest) (newObj, oldObj resourcesemantics.GenericCRD, err error) {
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	handler, ok := p.types[gvk]
	if !ok {
		return nil, nil, fmt.Errorf("unhandled kind: %v", gvk)
	}
	if len(req.Object.Raw) == 0 {
		return nil, nil, fmt.Errorf("the new object may not be nil")
	}
	newObj = handler.DeepCopyObject().(resourcesemantics.GenericCRD)
	if err := webhookjson.Decode(req.Object.Raw, newObj, p.strict); err != nil {
		return nil, nil, fmt.Errorf("cannot decode incoming new object: %w", err)
	}
	if len(req.OldObject.Raw) != 0 {
		oldObj = handler.DeepCopyObject().(resourcesemantics.GenericCRD)
		if err := webhookjson.Decode(req.OldObject.Raw, oldObj, p.strict); err != nil {
			return nil, nil, fmt.Errorf("cannot decode incoming old object: %w", err)
		}
	}
	return newObj, oldObj, nil
}

func withinUpdate(ctx context.Context, old any, subResource string) context.Context {
	if subResource == "" {
		return apis.WithinUpdate(ctx, old)
	}
	return apis.WithinSubResourceUpdate(ctx, old, subResource)
}

// configured is ctx with p's config as its webhook would hold it now: built
// from the project's config maps as the informer of reader sees them, the
// defaults where there are none. As upstream's config store, it is built
// again only when a config map changes.
func (a *admissionServer) configured(ctx context.Context, p *project) (context.Context, error) {
	cms := &corev1.ConfigMapList{}
	if err := a.reader.List(ctx, cms, client.InNamespace(p.namespace)); err != nil {
		return nil, fmt.Errorf("config maps of %s: %w", p.namespace, err)
	}
	slices.SortFunc(cms.Items, func(x, y corev1.ConfigMap) int { return strings.Compare(x.Name, y.Name) })
	var key strings.Builder
	for _, cm := range cms.Items {
		key.WriteString(cm.Name + "@" + cm.ResourceVersion + ";")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.configs[p]
	if !ok || c.key != key.String() {
		log := &storeLog{}
		c = builtConfig{key: key.String(), attach: p.configure(cms.Items, log), err: log.err}
		a.configs[p] = c
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.attach(ctx), nil
}

// builtConfig is a project's config as built from the config maps named
// in key (name@resourceVersion of each).
type builtConfig struct {
	key    string
	attach func(context.Context) context.Context
	err    error
}

// feed hands a config store the config maps it watches, as the upstream
// webhook's informer does when it starts.
func feed(watchConfigs func(configmap.Watcher), cms []corev1.ConfigMap) {
	if len(cms) == 0 {
		return
	}
	w := &configmap.ManualWatcher{Namespace: cms[0].Namespace}
	watchConfigs(w)
	for i := range cms {
		w.OnChange(&cms[i])
	}
}

func refuse(format string, args ...any) *admissionv1.AdmissionResponse {
	st := apierrors.NewBadRequest(fmt.Sprintf(format, args...)).Status()
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &st}
}

// storeLog keeps the first error a config store reports: the upstream
// webhook would exit on a config map it cannot read (Fatalf) and its
// config-validation webhook refuses one.
type storeLog struct{ err error }

func (l *storeLog) Debugf(string, ...any) {}
func (l *storeLog) Infof(string, ...any)  {}
func (l *storeLog) Fatalf(f string, args ...any) {
	l.Errorf(f, args...)
}
func (l *storeLog) Errorf(f string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf(f, args...)
	}
}
