package console

import (
	"errors"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/pkg/secrets"
)

func kindPath(ns, plural string) string { return Prefix + "namespaces/" + ns + "/" + plural + "/" }

type servicesData struct {
	page
	Services []slessv1alpha1.SlessService
	More     bool
}

func (c *Console) serviceList(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PathValue("ns")
	var list slessv1alpha1.SlessServiceList
	if !c.listIn(w, r, &list, "services") {
		return
	}
	c.render(w, r, http.StatusOK, "services", servicesData{page: pageOf(s, ns, "Services"), Services: list.Items, More: list.Continue != ""})
}

type serviceData struct {
	page
	Svc        *slessv1alpha1.SlessService
	Path       string
	Conditions []metav1.Condition
	Charts     *chartsData
	Logs       *logsView
	Build      string
}

func (c *Console) servicePage(w http.ResponseWriter, r *http.Request, s *session) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	svc := &slessv1alpha1.SlessService{}
	if !c.getObject(w, r, svc, "service") {
		return
	}
	path := kindPath(ns, "services") + name
	d := serviceData{page: pageOf(s, ns, name), Svc: svc, Path: path, Conditions: svc.Status.Conditions,
		Charts: c.charts(r, ns, name, path, true)}
	if c.opts.Logs != nil {
		d.Logs = &logsView{URL: path + "/logs"}
		if svc.Status.BuildRef != "" {
			d.Build = path + "/build"
		}
	}
	status := http.StatusOK
	if d.Charts != nil && d.Charts.Error != "" {
		status = http.StatusBadRequest
	}
	c.render(w, r, status, "service", d)
}

// getObject reads the object the path names into obj, answering 404 when
// there is none; false when it answered.
func (c *Console) getObject(w http.ResponseWriter, r *http.Request, obj client.Object, noun string) bool {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	err := c.opts.Objects.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		c.fail(w, r, http.StatusNotFound, "Not found", "There is no "+noun+" "+name+" in namespace "+ns+".")
		return false
	}
	if err != nil {
		c.storeFailed(w, r, "get "+noun, err)
		return false
	}
	return true
}

// listIn lists the path's namespace into list, at most maxListed; false
// when it answered an error.
func (c *Console) listIn(w http.ResponseWriter, r *http.Request, list client.ObjectList, what string) bool {
	if err := c.opts.Objects.List(r.Context(), list, client.InNamespace(r.PathValue("ns")), client.Limit(maxListed)); err != nil {
		c.storeFailed(w, r, "list "+what, err)
		return false
	}
	return true
}

type triggersData struct {
	page
	Triggers []slessv1alpha1.Trigger
	More     bool
}

func (c *Console) triggerList(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PathValue("ns")
	var list slessv1alpha1.TriggerList
	if !c.listIn(w, r, &list, "triggers") {
		return
	}
	c.render(w, r, http.StatusOK, "triggers", triggersData{page: pageOf(s, ns, "Triggers"), Triggers: list.Items, More: list.Continue != ""})
}

type jobsData struct {
	page
	Jobs []jobView
	More bool
}

// jobView is a FunctionJob with its function's recent runs: the records of
// trigger job, each linked to its log lines.
type jobView struct {
	Job  *slessv1alpha1.FunctionJob
	Runs []invoke.Invocation
	// Logs links the function's page at the run's lines; "" when the
	// server keeps no logs.
	Logs string
}

func (c *Console) jobList(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PathValue("ns")
	var list slessv1alpha1.FunctionJobList
	if !c.listIn(w, r, &list, "jobs") {
		return
	}
	d := jobsData{page: pageOf(s, ns, "Jobs"), More: list.Continue != ""}
	for i := range list.Items {
		j := &list.Items[i]
		v := jobView{Job: j}
		if c.opts.Logs != nil {
			v.Logs = fnPath(ns, j.Spec.Function)
		}
		if c.opts.History != nil {
			p, err := c.opts.History.List(r.Context(), invoke.Query{Namespace: ns, Function: j.Spec.Function, Trigger: invoke.TriggerJob, Limit: lastShown})
			if err != nil {
				c.log.Warn("console: list job runs", "namespace", ns, "job", j.Name, "error", err)
			}
			for _, rec := range p.Items {
				v.Runs = append(v.Runs, invoke.InvocationOf(rec))
			}
		}
		d.Jobs = append(d.Jobs, v)
	}
	c.render(w, r, http.StatusOK, "jobs", d)
}

type secretsData struct {
	page
	Secrets   []secrets.Info
	Available bool
	More      bool
}

// secretList shows names, keys and versions: the values never leave the
// store, as in the API.
func (c *Console) secretList(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PathValue("ns")
	d := secretsData{page: pageOf(s, ns, "Secrets"), Available: c.opts.Secrets != nil}
	if c.opts.Secrets != nil {
		var list corev1.SecretList
		if err := c.opts.Secrets.List(r.Context(), &list, client.InNamespace(ns), client.Limit(maxListed),
			client.MatchingLabelsSelector{Selector: secrets.Selector()}); err != nil {
			c.storeFailed(w, r, "list secrets", err)
			return
		}
		for i := range list.Items {
			d.Secrets = append(d.Secrets, secrets.InfoOf(&list.Items[i]))
		}
		d.More = list.Continue != ""
	}
	c.render(w, r, http.StatusOK, "secrets", d)
}

type buildData struct {
	page
	Kind, Name, Back string
	Build            string
	URL              string
}

// buildPage is the log of the latest build of a function or service, live
// while it runs.
func (c *Console) buildPage(service bool) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		wl, plural := c.workloadOf(service)
		if !c.getObject(w, r, wl, plural[:len(plural)-1]) {
			return
		}
		ns, name := wl.GetNamespace(), wl.GetName()
		back := kindPath(ns, plural) + name
		if c.opts.Logs == nil {
			c.fail(w, r, http.StatusNotFound, "Not found", "This server keeps no logs.")
			return
		}
		d := buildData{page: pageOf(s, ns, name+": build"), Kind: wl.WorkloadKind(), Name: name, Back: back,
			Build: wl.WorkloadStatus().BuildRef}
		if d.Build != "" {
			d.URL = back + "/build/stream"
		}
		c.render(w, r, http.StatusOK, "build", d)
	}
}

func (c *Console) workloadOf(service bool) (slessv1alpha1.Workload, string) {
	if service {
		return &slessv1alpha1.SlessService{}, "services"
	}
	return &slessv1alpha1.Function{}, "functions"
}

// buildStream streams the latest build's log as the live logs panel
// streams a function's: server-sent events of escaped lines, ending when
// the build does.
func (c *Console) buildStream(service bool) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if c.opts.Logs == nil {
			c.fail(w, r, http.StatusNotFound, "Not found", "This server keeps no logs.")
			return
		}
		wl, plural := c.workloadOf(service)
		if !c.getObject(w, r, wl, plural[:len(plural)-1]) {
			return
		}
		build := wl.WorkloadStatus().BuildRef
		if build == "" {
			c.fail(w, r, http.StatusNotFound, "Not found", wl.WorkloadKind()+" "+wl.GetName()+" has no build yet.")
			return
		}
		c.streamLines(w, r, logs.Query{Follow: true, Tail: -1}, func(q logs.Query, emit logs.Emit) error {
			lines := 0
			counted := func(l logs.Line) error { lines++; return emit(l) }
			if err := c.opts.Logs.Build(r.Context(), wl, build, q, counted); err != nil {
				return err
			}
			if lines == 0 && q.Since.IsZero() {
				// A build with nothing to install writes nothing: say so
				// rather than leave the panel blank.
				if err := emit(logs.Line{Text: "The build wrote no output."}); err != nil {
					return err
				}
			}
			// The build ended: the page stops listening rather than
			// reconnecting for ever.
			_, err := w.Write([]byte("event: end\ndata: ended\n\n"))
			return err
		}, func(err error) string {
			if errors.Is(err, logs.ErrNotFound) {
				return "This build's log is gone."
			}
			c.log.Warn("console: stream build log", "namespace", wl.GetNamespace(), "name", wl.GetName(), "error", err)
			return "The log stream stopped: the build's log cannot be read now."
		})
	}
}

// since is how long ago t was, for templates; zero for a nil time.
func since(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// serviceLogStream is the live logs panel of a SlessService.
func (c *Console) serviceLogStream(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.Logs == nil {
		c.fail(w, r, http.StatusNotFound, "Not found", "This server keeps no logs.")
		return
	}
	svc := &slessv1alpha1.SlessService{}
	if !c.getObject(w, r, svc, "service") {
		return
	}
	c.streamLines(w, r, logs.Query{Follow: true, Tail: liveTail}, func(q logs.Query, emit logs.Emit) error {
		return c.opts.Logs.Function(r.Context(), svc, q, emit)
	}, func(err error) string {
		c.log.Warn("console: stream logs", "namespace", svc.Namespace, "service", svc.Name, "error", err)
		return "The log stream stopped: the logs cannot be read now."
	})
}
