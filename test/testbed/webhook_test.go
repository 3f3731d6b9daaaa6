package testbed_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

const webhookDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func webhookFunction(ns, name string) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "x"}}},
			},
		},
	}
}

func webhookService(ns, name string) *servingv1.Service {
	return resources.MakeService(webhookFunction(ns, name), "registry.example/"+ns+"/"+name+"@"+webhookDigest, resources.Config{})
}

func webhookPipelineRun(ns, name string) *tektonv1.PipelineRun {
	in := adapter.BuildInput{Digest: webhookDigest, Location: "s3://contexts/" + name + ".tar.gz"}
	return resources.MakePipelineRun(webhookFunction(ns, name), in, 0, resources.Config{Registry: "registry.example/sless"})
}

// What sless builds passes Knative's and Tekton's admission and is stored
// with their defaults, the creator being whoever wrote it.
func TestUpstreamDefaulting(t *testing.T) {
	k := testbed.SharedKube(t)
	ns := k.Namespace(t)
	ctx := context.Background()
	review := &authenticationv1.SelfSubjectReview{}
	if err := k.Client.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo.Username

	for _, tc := range []struct {
		name  string
		obj   client.Object
		check func(t *testing.T, stored client.Object)
	}{
		{"MakeService", webhookService(ns, "defaulted"), func(t *testing.T, o client.Object) {
			svc := o.(*servingv1.Service)
			spec := svc.Spec.Template.Spec
			c := spec.Containers[0]
			switch {
			case spec.ContainerConcurrency == nil || *spec.ContainerConcurrency != 0:
				t.Errorf("containerConcurrency %v, want 0", spec.ContainerConcurrency)
			case c.ReadinessProbe == nil || c.ReadinessProbe.SuccessThreshold != 1:
				t.Errorf("readiness probe %+v, want successThreshold 1", c.ReadinessProbe)
			case spec.EnableServiceLinks == nil || *spec.EnableServiceLinks:
				t.Errorf("enableServiceLinks %v, want false", spec.EnableServiceLinks)
			case len(svc.Spec.Traffic) != 1 || !ptr.Deref(svc.Spec.Traffic[0].LatestRevision, false) || ptr.Deref(svc.Spec.Traffic[0].Percent, 0) != 100:
				t.Errorf("traffic %+v, want 100%% to the latest revision", svc.Spec.Traffic)
			case svc.Annotations[serving.CreatorAnnotation] != user || svc.Annotations[serving.UpdaterAnnotation] != user:
				t.Errorf("annotations %v, want creator and last modifier %q", svc.Annotations, user)
			}
		}},
		{"MakePipelineRun", webhookPipelineRun(ns, "defaulted"), func(t *testing.T, o client.Object) {
			pr := o.(*tektonv1.PipelineRun)
			if got := pr.Spec.TaskRunTemplate.ServiceAccountName; got != "default" {
				t.Errorf("taskRunTemplate.serviceAccountName %q, want Tekton's default", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := k.Client.Create(ctx, tc.obj); err != nil {
				t.Fatalf("refused: %v", err)
			}
			stored := tc.obj.DeepCopyObject().(client.Object)
			if err := k.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), stored); err != nil {
				t.Fatal(err)
			}
			tc.check(t, stored)
		})
	}
}

// What only Knative's or Tekton's own code refuses is refused, with their
// words; what their CRD schema refuses, the apiserver refuses.
func TestUpstreamRefusals(t *testing.T) {
	k := testbed.SharedKube(t)
	ns := k.Namespace(t)
	ctx := context.Background()
	const knative = `admission webhook "validation.webhook.serving.knative.dev" denied the request: validation failed: `
	const tekton = `admission webhook "validation.webhook.pipeline.tekton.dev" denied the request: validation failed: `

	for _, tc := range []struct {
		name  string
		write func(c client.Client) error
		code  int32
		want  string
	}{
		{"Service port named http", func(c client.Client) error {
			svc := webhookService(ns, "port")
			svc.Spec.Template.Spec.Containers[0].Ports[0].Name = "http"
			return c.Create(ctx, svc)
		}, http.StatusBadRequest, knative + "Port name http is not allowed: spec.template.spec.containers[0].ports\nName must be empty, or one of: 'h2c', 'http1'"},
		{"Service template changed under its revision name", func(c client.Client) error {
			svc := webhookService(ns, "renamed")
			if err := c.Create(ctx, svc); err != nil {
				return err
			}
			svc.Spec.Template.Spec.Containers[0].Env = append(svc.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "MORE", Value: "1"})
			return c.Update(ctx, svc)
		}, http.StatusBadRequest, knative + testbed.KnativeNameChangeMessage + ": spec.template.metadata.name"},
		{"PipelineRun param given twice", func(c client.Client) error {
			pr := webhookPipelineRun(ns, "twice")
			pr.Spec.Params = append(pr.Spec.Params, pr.Spec.Params[0])
			return c.Create(ctx, pr)
		}, http.StatusBadRequest, tekton + `expected exactly one, got both: spec.params[CONTEXT].name`},
		{"PipelineRun result from a missing task", func(c client.Client) error {
			pr := webhookPipelineRun(ns, "result")
			pr.Spec.PipelineSpec.Results[0].Value = *tektonv1.NewStructuredValues("$(tasks.missing.results.IMAGE_DIGEST)")
			return c.Create(ctx, pr)
		}, http.StatusBadRequest, tekton + `invalid value: referencing a nonexistent task: spec.pipelineSpec.results[0].value`},
		{"PipelineRun step name not a DNS label", func(c client.Client) error {
			pr := webhookPipelineRun(ns, "step")
			pr.Spec.PipelineSpec.Tasks[0].TaskSpec.Steps[0].Name = "Image_URL"
			return c.Create(ctx, pr)
		}, http.StatusBadRequest, tekton + `invalid value "Image_URL": spec.pipelineSpec.tasks[0].taskSpec.steps[0].name` + "\nTask step name must be a valid DNS Label"},
		{"Service containerConcurrency a string", func(c client.Client) error {
			// Mutating admission comes before the schema: Knative's
			// defaulting cannot read it.
			u, err := unstructuredService(webhookService(ns, "string"))
			if err != nil {
				return err
			}
			if err := unstructured.SetNestedField(u.Object, "many", "spec", "template", "spec", "containerConcurrency"); err != nil {
				return err
			}
			return c.Create(ctx, u)
		}, http.StatusBadRequest, `admission webhook "webhook.serving.knative.dev" denied the request: mutation failed: cannot decode incoming new object: ` +
			`json: cannot unmarshal string into Go struct field RevisionSpec.spec.ConfigurationSpec.template.spec.containerConcurrency of type int64`},
		{"Service env variable given twice (CRD schema)", func(c client.Client) error {
			svc := webhookService(ns, "env")
			ctr := &svc.Spec.Template.Spec.Containers[0]
			ctr.Env = append(ctr.Env, ctr.Env[0])
			return c.Create(ctx, svc)
		}, http.StatusUnprocessableEntity, `Service.serving.knative.dev "env" is invalid: spec.template.spec.containers[0].env[4]: Duplicate value: {"name":"SLESS_FUNCTION_NAME"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write(k.Client)
			var status apierrors.APIStatus
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.As(err, &status) || status.Status().Code != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %v\nwant %d and %q", err, tc.code, tc.want)
			}
		})
	}
}

func unstructuredService(svc *servingv1.Service) (*unstructured.Unstructured, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(svc)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetAPIVersion(servingv1.SchemeGroupVersion.String())
	u.SetKind("Service")
	return u, nil
}

// Knative's warning-level field errors reach the client as warnings, not
// refusals; sless's Services, restricted as Pod Security asks, draw none.
func TestUpstreamWarnings(t *testing.T) {
	k := testbed.SharedKube(t)
	ns := k.Namespace(t)
	create := func(svc *servingv1.Service) []string {
		t.Helper()
		warnings := &warningLog{}
		cfg := rest.CopyConfig(k.Config)
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: k.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(context.Background(), svc, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		return warnings.all()
	}
	if got := create(webhookService(ns, "restricted")); len(got) != 0 {
		t.Errorf("sless's Service drew warnings %q", got)
	}
	bare := webhookService(ns, "bare")
	bare.Spec.Template.Spec.Containers[0].SecurityContext = nil
	want := "Kubernetes default value is insecure, Knative may default this to secure in a future release: spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation"
	if got := create(bare); !strings.Contains(strings.Join(got, "\n"), want) {
		t.Fatalf("warnings %q, want %q among them", got, want)
	}
}

type warningLog struct {
	mu  sync.Mutex
	got []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warningLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// The projects' config maps, when a cluster has them, decide the defaults
// and limits, as their webhooks' config stores do: read through an
// informer, so a change is seen soon after it is stored, not at once.
func TestUpstreamConfigMaps(t *testing.T) {
	k := testbed.SharedKube(t)
	ns := k.Namespace(t)
	ctx := context.Background()
	// configured answers what the webhooks default now: a Service's
	// containerConcurrency and a PipelineRun's service account.
	configured := func() (int64, string) {
		svc := webhookService(ns, "configured")
		svc.Spec.Template.Spec.TimeoutSeconds = nil
		if err := k.Client.Create(ctx, svc, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		pr := webhookPipelineRun(ns, "configured")
		if err := k.Client.Create(ctx, pr, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(svc.Spec.Template.Spec.ContainerConcurrency, -1), pr.Spec.TaskRunTemplate.ServiceAccountName
	}
	await := func(what string, cc int64, sa string) {
		t.Helper()
		var gotCC int64
		var gotSA string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			gotCC, gotSA = configured()
			return gotCC == cc && gotSA == sa, nil
		})
		if err != nil {
			t.Fatalf("%s: containerConcurrency %d and serviceAccountName %q, want %d and %q", what, gotCC, gotSA, cc, sa)
		}
	}
	defaultCC, defaultSA := configured()

	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "knative-serving", Name: "config-defaults"},
			Data: map[string]string{"container-concurrency": "7", "revision-timeout-seconds": "10", "max-revision-timeout-seconds": "20"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tekton-pipelines", Name: "config-defaults"},
			Data: map[string]string{"default-service-account": "builder"}},
	}
	t.Cleanup(func() {
		for _, cm := range cms {
			if err := k.Client.Delete(context.Background(), cm); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete config map %s/%s: %v", cm.Namespace, cm.Name, err)
			}
		}
		// Later tests on this apiserver expect the defaults back.
		await("after the config maps are deleted", defaultCC, defaultSA)
	})
	for _, cm := range cms {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cm.Namespace}}
		if err := k.Client.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := k.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	await("with config-defaults", 7, "builder")

	svc := webhookService(ns, "configured")
	svc.Spec.Template.Spec.TimeoutSeconds = nil
	if err := k.Client.Create(ctx, svc, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(svc.Spec.Template.Spec.TimeoutSeconds, -1); got != 10 {
		t.Errorf("timeoutSeconds %d, want config-defaults' 10", got)
	}
	err := k.Client.Create(ctx, webhookService(ns, "too-long"), client.DryRunAll)
	if want := "expected 0 <= 30 <= 20: spec.template.spec.timeoutSeconds"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a 30 s timeout above the 20 s maximum: %v, want %q", err, want)
	}
}
