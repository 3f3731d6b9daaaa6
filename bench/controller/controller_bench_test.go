// Package controller benchmarks `sless controller` on the test bed: how long
// it takes 1,000 Functions to get their Knative Services, against how long
// the same apiserver takes to store 1,000 plain ConfigMaps, and the
// controller's heap afterwards. The controller runs as its own process (the
// real binary), so its heap is its own; the Tekton and Knative simulators
// finish builds and rollouts at once.
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/controller/
//
// SLESS_BENCH_FUNCTIONS changes the count (default 1000).
package controller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	// controller-runtime warns on stderr when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

func count() int {
	if n, err := strconv.Atoi(os.Getenv("SLESS_BENCH_FUNCTIONS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// createAll creates n objects with 16 writers and returns how long it took.
func createAll(b *testing.B, c client.Client, n int, mk func(i int) client.Object) time.Duration {
	b.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := c.Create(context.Background(), mk(i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

type controllerProcess struct {
	cmd     *exec.Cmd
	metrics string
	log     string
}

func startController(b *testing.B, k *testbed.Kube, s3srv *testbed.S3Server, bucket string) *controllerProcess {
	b.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "sless")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sless")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/sless: %v\n%s", err, out)
	}
	mport, _ := testbed.FreePort()
	pport, _ := testbed.FreePort()
	p := &controllerProcess{metrics: "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics", log: filepath.Join(dir, "log")}
	logf, err := os.Create(p.log)
	if err != nil {
		b.Fatal(err)
	}
	p.cmd = exec.Command(bin, "controller",
		"-metrics-bind-address", "127.0.0.1:"+strconv.Itoa(mport),
		"-health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(pport),
		"-leader-elect=false", "-concurrency", "8", "-kube-api-qps", "500", "-kube-api-burst", "1000",
		"-s3-endpoint", "http://"+s3srv.Endpoint, "-s3-bucket", bucket,
		"-registry", "registry.bench.local/sless", "-public-base-url", "https://fn.bench.local")
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig,
		"SLESS_S3_ACCESS_KEY="+s3srv.AccessKey, "SLESS_S3_SECRET_KEY="+s3srv.SecretKey)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		_ = p.cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(pport) + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(p.log)
			b.Fatalf("controller not ready: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric reads one unlabelled gauge from the controller's /metrics.
func (p *controllerProcess) metric(b *testing.B, name string) float64 {
	b.Helper()
	resp, err := http.Get(p.metrics)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	b.Fatalf("metric %s not found", name)
	return 0
}

func BenchmarkFunctionsToKnativeServices(b *testing.B) {
	n := count()
	k := testbed.SharedKube(b)
	s3srv := testbed.SharedS3(b)
	testbed.SharedTekton(b)
	testbed.SharedKnative(b)
	bucket := s3srv.Bucket(b)
	p := startController(b, k, s3srv, bucket)
	heapIdle := p.metric(b, "go_memstats_heap_inuse_bytes")
	cpu0 := p.metric(b, "process_cpu_seconds_total")

	for i := 0; i < b.N; i++ {
		// Baseline: the apiserver storing n small objects.
		cmNS := k.Namespace(b)
		dCM := createAll(b, k.Client, n, func(i int) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmNS, Name: fmt.Sprintf("cm-%04d", i)},
				Data: map[string]string{"main.py": fmt.Sprintf("def handler(event, context):\n    return %d\n", i)}}
		})

		// The controller: each Function is stored, its source becomes a
		// build context in S3, a PipelineRun (finished by the simulator)
		// and then a Knative Service.
		fnNS := k.Namespace(b)
		start := time.Now()
		dCreate := createAll(b, k.Client, n, func(i int) client.Object {
			return &slessv1alpha1.Function{
				ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: fmt.Sprintf("fn-%04d", i)},
				Spec: slessv1alpha1.FunctionSpec{Runtime: "python3.12", Entrypoint: "main.handler",
					Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
						"main.py": fmt.Sprintf("def handler(event, context):\n    return %d\n", i)}}}},
			}
		})
		deadline := time.Now().Add(20 * time.Minute)
		var have int
		for {
			l := &servingv1.ServiceList{}
			if err := k.Client.List(context.Background(), l, client.InNamespace(fnNS)); err != nil {
				b.Fatal(err)
			}
			if have = len(l.Items); have >= n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d Knative Services after 20 minutes", have, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		dFn := time.Since(start)
		heap := p.metric(b, "go_memstats_heap_inuse_bytes")
		reconciles := p.metric(b, `controller_runtime_reconcile_total{controller="function",result="success"}`) +
			p.metric(b, `controller_runtime_reconcile_total{controller="function",result="requeue"}`) +
			p.metric(b, `controller_runtime_reconcile_total{controller="function",result="error"}`)
		reconcileSeconds := p.metric(b, `controller_runtime_reconcile_time_seconds_sum{controller="function"}`)
		errors := p.metric(b, `controller_runtime_reconcile_total{controller="function",result="error"}`)
		cpu := p.metric(b, "process_cpu_seconds_total") - cpu0
		b.Logf("function reconciles: %.0f (%.1f per Function), %.0f errors, mean %.1f ms; controller CPU %.1f s (%.1f ms per Function)",
			reconciles, reconciles/float64(n), errors, 1000*reconcileSeconds/reconciles, cpu, 1000*cpu/float64(n))
		b.ReportMetric(1000*cpu/float64(n), "controller-cpu-ms/fn")

		b.ReportMetric(dFn.Seconds()/dCM.Seconds(), "fn/configmap-ratio")
		b.ReportMetric(dFn.Seconds(), "fn-s")
		b.ReportMetric(dCreate.Seconds(), "fn-create-s")
		b.ReportMetric(dCM.Seconds(), "configmap-s")
		b.ReportMetric(heap/(1<<20), "heap-MiB")
		b.ReportMetric(heap/heapIdle, "heap/idle-ratio")
		b.Logf("%d Functions → Knative Services in %v (created in %v); %d ConfigMaps in %v; ratio %.1f; controller heap in use %.1f MiB (idle %.1f MiB)",
			n, dFn.Round(time.Millisecond), dCreate.Round(time.Millisecond), n, dCM.Round(time.Millisecond), dFn.Seconds()/dCM.Seconds(), heap/(1<<20), heapIdle/(1<<20))
	}
}
