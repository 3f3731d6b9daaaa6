package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/runs"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	servicerec "github.com/sless-dev/sless/pkg/reconciler/service"
	"github.com/sless-dev/sless/pkg/secrets"
)

// servingKind is one kind's serving path: its process server, the resolver the
// invoke proxy asks, and the loop that reconciles the kind.
type servingKind struct {
	kind     string
	server   *serving.Server
	resolver *serving.Resolver
	loop     *apiserver.Loop
}

// enqueue asks the kind's loop to look at an object again; the loop is made
// after the builder and server that call this.
func (s *servingKind) enqueue(ns, name string) {
	if s.loop != nil {
		s.loop.Enqueue(ns, name)
	}
}

// startServing makes the builder, a process server and resolver each for
// Functions and SlessServices, and their reconcile loops.
func (p *platform) startServing(ctx context.Context) error {
	p.fns = &servingKind{kind: slessv1alpha1.KindFunction}
	p.svcs = &servingKind{kind: slessv1alpha1.KindSlessService}
	// A build may be a Function's or a SlessService's (the builder keys
	// builds by digest, not kind): its end looks at both of that name.
	builder, err := build.New(filepath.Join(p.opts.DataDir, "builds"), p.opts.Tools, func(ns, name string) {
		p.fns.enqueue(ns, name)
		p.svcs.enqueue(ns, name)
	})
	if err != nil {
		return err
	}
	p.builder = builder
	p.onClose(builder.Close)
	builder.Logger = p.opts.Logger
	builder.Procs = p.procs
	// Functions and SlessServices run on two servers, so that one of each
	// of a name in a namespace keep their revisions, state and logs apart
	// (on a cluster they would contend for one Knative Service).
	if err := p.serve(ctx, p.fns, "function", ""); err != nil {
		return err
	}
	if err := p.serve(ctx, p.svcs, "service", serving.ServicesDir); err != nil {
		return err
	}
	reconciler := &function.Reconciler{
		Client:  p.store,
		Builder: builder,
		Server:  p.fns.server,
		Store:   p.blobs,
		Config:  function.Config{PublicBaseURL: p.baseURL, FunctionDomain: p.opts.FunctionDomain},

		TracerProvider: p.opts.TracerProvider,
	}
	p.loop(p.fns, "function", reconciler)
	// SlessServices take the Function's reconciler, as on a cluster, with
	// the same builder and a server of their own.
	svcrec := servicerec.NewReconciler(p.store, builder, p.svcs.server, p.blobs, reconciler.Config, nil)
	svcrec.TracerProvider = p.opts.TracerProvider
	p.loop(p.svcs, "slessservice", svcrec)
	// A secret set or rotated reconciles the functions and services whose
	// env refers to it: their next revision runs with the new value.
	// A Secret or ConfigMap changed rewrites the files of the volumes
	// that show it, as the kubelet does.
	p.onClose(p.store.Subscribe(func(ev apiserver.Event) {
		if ev.GVK.Group != "" || (ev.GVK.Kind != "Secret" && ev.GVK.Kind != "ConfigMap") {
			return
		}
		if ev.GVK.Kind == "Secret" {
			go enqueueReferring(ctx, p.store, ev.Key, p.fns.enqueue, p.svcs.enqueue, p.opts.Logger)
		}
		go func() {
			for _, srv := range []*serving.Server{p.fns.server, p.svcs.server} {
				if err := srv.RefreshVolumes(ctx, ev.Key.Namespace, ev.GVK.Kind, ev.Key.Name); err != nil {
					p.opts.Logger.Warn("update volume files", "namespace", ev.Key.Namespace, "kind", ev.GVK.Kind, "name", ev.Key.Name, "error", err)
				}
			}
		}()
	}))
	return nil
}

// serve starts s's process server, keeping its files under sub, and its
// resolver.
func (p *platform) serve(ctx context.Context, s *servingKind, kind, sub string) error {
	data := p.opts.DataDir
	s.server = serving.NewServer(serving.ServerOptions{
		Kind:        kind,
		Dir:         p.builder.Dir,
		IdleTimeout: p.opts.IdleTimeout,
		Tools:       p.opts.Tools,
		LogDir:      filepath.Join(data, "logs", sub),
		LogMaxBytes: p.opts.LogMaxBytes,
		LogMaxFiles: p.opts.LogMaxFiles,
		Console:     p.opts.Echo,
		ResolveEnv:  envFromStore(p.secrets),
		// Each instance's volumes: Secret and ConfigMap files, emptyDirs.
		VolumeDir:    filepath.Join(data, "volumes", sub),
		ResolveFiles: filesFromStore(p.secrets),
		Address:      func(ns, name string) string { return "local://" + path.Join(sub, ns, name) },
		OnChange:     s.enqueue,
		StateDir:     filepath.Join(data, "serving", sub),
		Logger:       p.opts.Logger,
		Procs:        p.procs,
		// As the controller's Knative Services on a cluster.
		DefaultResources: p.opts.Resources.Defaults,
		// The state records env values resolved from secrets.
		SealState: func(k types.NamespacedName, plain []byte) []byte {
			return p.sealer.SealFile(path.Join("serving", sub, k.String()), plain)
		},
		OpenState: func(k types.NamespacedName, b []byte) ([]byte, error) {
			return p.sealer.OpenFile(path.Join("serving", sub, k.String()), b)
		},
	})
	p.onClose(s.server.Close)
	// The server serves again the revisions it kept; one of an object no
	// longer stored (deleted while its removal could not be recorded) must
	// not linger.
	stored, err := keysOf(ctx, p.store, s.kind)
	if err != nil {
		return err
	}
	for _, k := range s.server.Functions() {
		if !slices.Contains(stored, k) {
			s.server.Remove(k.Namespace, k.Name)
		}
	}
	if s.kind == slessv1alpha1.KindSlessService {
		s.resolver, err = serving.NewServiceResolver(ctx, p.store, s.server)
	} else {
		s.resolver, err = serving.NewResolver(ctx, p.store, s.server)
	}
	if err != nil {
		return err
	}
	p.onClose(s.resolver.Close)
	return nil
}

// loop makes s's reconcile loop; an object deleted stops its processes.
func (p *platform) loop(s *servingKind, name string, r reconcile.Reconciler) {
	s.loop = p.newLoop(name, s.kind, r)
	s.loop.OnDeleted = func(k types.NamespacedName) { s.server.Remove(k.Namespace, k.Name) }
}

func (p *platform) newLoop(name, kind string, r reconcile.Reconciler) *apiserver.Loop {
	l := apiserver.NewLoop(name, p.store, slessv1alpha1.SchemeGroupVersion.WithKind(kind).GroupKind(), r, p.opts.Logger)
	if p.loops == nil {
		p.loops = map[string]*apiserver.Loop{}
	}
	p.loops[kind] = l
	return l
}

// startRuns runs cron, queue, nats and mqtt triggers and FunctionJobs in process,
// recorded like invokes.
func (p *platform) startRuns(recorder *invoke.Recorder) {
	p.runs = runs.New(p.store, p.fns.server, recorder)
	p.runs.Broker, p.runs.NATS, p.runs.Kafka, p.runs.MQTT, p.runs.Logger = p.opts.AMQPURL, p.opts.NATSURL, p.opts.KafkaBrokers, p.opts.MQTTURL, p.opts.Logger
	p.runs.TracerProvider = p.opts.TracerProvider
	p.onClose(p.runs.Close)
	p.newLoop("trigger", "Trigger", p.runs.TriggerReconciler())
	p.newLoop("functionjob", "FunctionJob", p.runs.JobReconciler())
}

// runLoops starts every loop on the objects stored, so a restart reconciles
// them all; stop waits for them. They run until stopped, not until ctx is
// done, so that the front door drains first.
func (p *platform) runLoops(ctx context.Context) (stop func(), err error) {
	loopCtx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	stop = func() { cancel(); running.Wait() }
	for kind, l := range p.loops {
		existing, err := keysOf(ctx, p.store, kind)
		if err != nil {
			stop()
			return nil, err
		}
		running.Add(1)
		go func() {
			defer running.Done()
			l.Run(loopCtx, existing, 2)
		}()
	}
	return stop, nil
}

// keysOf lists the stored objects of a kind.
func keysOf(ctx context.Context, store *apiserver.Store, kind string) ([]types.NamespacedName, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind(kind + "List"))
	if err := store.List(ctx, list); err != nil {
		return nil, err
	}
	keys := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		keys = append(keys, types.NamespacedName{Namespace: list.Items[i].GetNamespace(), Name: list.Items[i].GetName()})
	}
	return keys, nil
}

// envFromStore resolves secretKeyRef and configMapKeyRef entries from
// Secrets and ConfigMaps kept in the local store.
func envFromStore(store client.Reader) func(ctx context.Context, ns string, src *corev1.EnvVarSource) (string, error) {
	return func(ctx context.Context, ns string, src *corev1.EnvVarSource) (string, error) {
		switch {
		case src.SecretKeyRef != nil:
			s := &corev1.Secret{}
			if err := store.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.SecretKeyRef.Name}, s); err != nil {
				return "", fmt.Errorf("secret %s: %w", src.SecretKeyRef.Name, err)
			}
			if v, ok := s.Data[src.SecretKeyRef.Key]; ok {
				return string(v), nil
			}
			if v, ok := s.StringData[src.SecretKeyRef.Key]; ok {
				return v, nil
			}
			return "", fmt.Errorf("secret %s has no key %s", src.SecretKeyRef.Name, src.SecretKeyRef.Key)
		case src.ConfigMapKeyRef != nil:
			cm := &corev1.ConfigMap{}
			if err := store.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.ConfigMapKeyRef.Name}, cm); err != nil {
				return "", fmt.Errorf("configmap %s: %w", src.ConfigMapKeyRef.Name, err)
			}
			if v, ok := cm.Data[src.ConfigMapKeyRef.Key]; ok {
				return v, nil
			}
			return "", fmt.Errorf("configmap %s has no key %s", src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key)
		}
		return "", errors.New("only secretKeyRef and configMapKeyRef are available in local mode")
	}
}

// filesFromStore gives the keys of a Secret or ConfigMap kept in the local
// store, for volumes.
func filesFromStore(store client.Reader) func(ctx context.Context, ns, kind, name string) (map[string][]byte, error) {
	return func(ctx context.Context, ns, kind, name string) (map[string][]byte, error) {
		key := types.NamespacedName{Namespace: ns, Name: name}
		out := map[string][]byte{}
		if kind == serving.FilesSecret {
			sec := &corev1.Secret{}
			if err := store.Get(ctx, key, sec); err != nil {
				return nil, fmt.Errorf("secret %s: %w", name, err)
			}
			for k, v := range sec.Data {
				out[k] = v
			}
			for k, v := range sec.StringData {
				out[k] = []byte(v)
			}
			return out, nil
		}
		cm := &corev1.ConfigMap{}
		if err := store.Get(ctx, key, cm); err != nil {
			return nil, fmt.Errorf("configmap %s: %w", name, err)
		}
		for k, v := range cm.Data {
			out[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			out[k] = v
		}
		return out, nil
	}
}

// enqueueReferring reconciles the functions and services of secret's
// namespace whose env refers to it.
func enqueueReferring(ctx context.Context, store *apiserver.Store, secret types.NamespacedName, enqueueFn, enqueueSvc func(ns, name string), log *slog.Logger) {
	fns := &slessv1alpha1.FunctionList{}
	if err := store.List(ctx, fns, client.InNamespace(secret.Namespace)); err != nil {
		log.Warn("find functions referring to a secret", "namespace", secret.Namespace, "secret", secret.Name, "error", err)
	}
	for _, fn := range fns.Items {
		if slices.Contains(secrets.Referenced(fn.Spec.CoreEnv()), secret.Name) {
			enqueueFn(fn.Namespace, fn.Name)
		}
	}
	svcs := &slessv1alpha1.SlessServiceList{}
	if err := store.List(ctx, svcs, client.InNamespace(secret.Namespace)); err != nil {
		log.Warn("find services referring to a secret", "namespace", secret.Namespace, "secret", secret.Name, "error", err)
	}
	for i := range svcs.Items {
		if slices.Contains(secrets.Referenced(svcs.Items[i].BuildSpec().CoreEnv()), secret.Name) {
			enqueueSvc(svcs.Items[i].Namespace, svcs.Items[i].Name)
		}
	}
}

// revisions lists a workload's revisions from the server of its kind.
type revisions struct{ fns, svcs *serving.Server }

func (r revisions) ListRevisions(ctx context.Context, w slessv1alpha1.Workload) ([]adapter.RevisionInfo, error) {
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return r.svcs.ListRevisions(ctx, w)
	}
	return r.fns.ListRevisions(ctx, w)
}
