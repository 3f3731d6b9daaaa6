package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	amqp "github.com/rabbitmq/amqp091-go"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// runsHandler answers every call with what it got; a body asking to fail
// raises, so a job run of it exits non-zero.
const runsHandler = `def handler(event, context):
    body = event.get("body")
    if isinstance(body, dict) and body.get("fail"):
        raise RuntimeError("asked to fail")
    return {"got": body, "function": context.function_name}
`

// runsApp is an ASGI app: HTTP calls get their method and path back,
// WebSocket messages are echoed.
const runsApp = `async def app(scope, receive, send):
    if scope["type"] == "websocket":
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": "echo: " + message.get("text", "")})
    if scope["type"] != "http":
        return
    body = ('{"method": "%s", "path": "%s"}' % (scope["method"], scope["path"])).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
`

// runsWorkloads: on the real node, beside buildsAndServesFunctions, the
// other ways sless runs code, with `sless controller` and `sless api`
// installed from config/: FunctionJob runs as batch Job pods of the
// function's image, their exit codes and results in the
// FunctionJob's status and their runs in the function's invocation
// history; a Python ASGI SlessService answers HTTP and a WebSocket echo
// through sless-api's /svc/, the call in the service's history; a cron
// trigger's pod and a queue trigger's consumer pod (the sless image,
// RabbitMQ on the host side of the node's veth) call the function through
// sless-api's Service, the calls recorded as theirs.
func runsWorkloads(t *testing.T, s *nodeapi.Serving) {
	s.Deploy("runs", runsHandler)
	// At once: the cron trigger's wait for its minute covers the others.
	together(t, subtest{"NodeFunctionJob", func(t *testing.T) {
		s := s.For(t)
		ok, fail := nodeJob(t, s, "runs-ok", `{"n": 1}`), nodeJob(t, s, "runs-fail", `{"fail": true}`)
		got := awaitJobsDone(t, s, ok, fail)
		if j := got[ok]; j.Status.Phase != slessv1alpha1.JobPhaseSucceeded || j.Status.ExitCode == nil || *j.Status.ExitCode != 0 || !strings.Contains(j.Status.Output, `"n": 1`) && !strings.Contains(j.Status.Output, `"n":1`) {
			t.Errorf("run that succeeds: %s exit %v output %q message %q", j.Status.Phase, j.Status.ExitCode, j.Status.Output, j.Status.Message)
		}
		if j := got[fail]; j.Status.Phase != slessv1alpha1.JobPhaseFailed || j.Status.ExitCode == nil || *j.Status.ExitCode != 1 || !strings.Contains(j.Status.Output, "asked to fail") {
			t.Errorf("run that fails: %s exit %v output %q message %q", j.Status.Phase, j.Status.ExitCode, j.Status.Output, j.Status.Message)
		}
		// sless controller records each run, 200 for success and 500 for
		// failure.
		statuses := map[int]int{}
		for _, r := range awaitTriggerCalls(t, s, "runs", invoke.TriggerJob, 2, time.Minute) {
			statuses[r.Status]++
		}
		if statuses[http.StatusOK] != 1 || statuses[http.StatusInternalServerError] != 1 {
			t.Errorf("job runs' records have statuses %v, want one 200 and one 500", statuses)
		}
	}}, subtest{"NodeServiceHTTPAndWebSocket", func(t *testing.T) {
		s := s.For(t)
		s.DeployService("web", runsApp)
		c := &http.Client{Timeout: 2 * time.Minute}
		status, body := s.Call(c, s.API.URL+"/svc/"+s.NS+"/web/hello", "")
		var got struct{ Method, Path string }
		if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.Method != "GET" || got.Path != "/hello" {
			t.Fatalf("HTTP call through /svc/: %d %s", status, body)
		}
		recs := s.AwaitServiceRecords("web", 1)
		if r := recs[len(recs)-1]; r.Trigger != invoke.TriggerService || r.Status != http.StatusOK || r.Function != "web" {
			t.Errorf("the service call's record: %+v", r)
		}
		url := "ws" + strings.TrimPrefix(s.API.URL, "http") + "/svc/" + s.NS + "/web/ws"
		d := websocket.Dialer{HandshakeTimeout: time.Minute}
		conn, resp, err := d.Dial(url, http.Header{"Authorization": {"Bearer " + nodeapi.Token(t, s.NS)}})
		if err != nil {
			t.Fatalf("WebSocket through /svc/: %v (response %+v)", err, resp)
		}
		defer conn.Close()
		for _, msg := range []string{"one", "two"} {
			if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			typ, b, err := conn.ReadMessage()
			if err != nil || typ != websocket.TextMessage || string(b) != "echo: "+msg {
				t.Fatalf("WebSocket echo of %q: %d %q %v", msg, typ, b, err)
			}
		}
	}}, subtest{"NodeCronTrigger", func(t *testing.T) {
		s := s.For(t)
		cron := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "every-minute", Namespace: s.NS},
			Spec: slessv1alpha1.TriggerSpec{Function: "runs", Type: slessv1alpha1.TriggerTypeCron, Schedule: "* * * * *",
				Payload: &apiextensionsv1.JSON{Raw: []byte(`{"from": "cron"}`)}}}
		if err := s.Node.Kube.Client.Create(context.Background(), cron); err != nil {
			t.Fatal(err)
		}
		r := awaitTriggerCall(t, s, "runs", invoke.TriggerCron, 3*time.Minute)
		if r.Status != http.StatusOK {
			t.Errorf("cron run's call: %+v", r)
		}
	}}, subtest{"NodeQueueTrigger", func(t *testing.T) {
		s := s.For(t)
		mq, err := testbed.StartRabbitMQOn(testbed.NodeHostIP)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mq.Stop)
		ctx := context.Background()
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "amqp", Namespace: s.NS},
			StringData: map[string]string{kube.ConnectionURLKey: mq.URL}}
		if err := s.Node.Kube.Client.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
		q := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: s.NS},
			Spec: slessv1alpha1.TriggerSpec{Function: "runs", Type: slessv1alpha1.TriggerTypeQueue,
				Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "amqp", Queue: "orders"}}}
		if err := s.Node.Kube.Client.Create(ctx, q); err != nil {
			t.Fatal(err)
		}
		publishWhenConsumed(t, mq.URL, "orders", `{"order": 7}`)
		r := awaitTriggerCall(t, s, "runs", invoke.TriggerQueue, 2*time.Minute)
		if r.Status != http.StatusOK {
			t.Errorf("consumer's call: %+v", r)
		}
	}})
}

// nodeJob creates a FunctionJob of the function runs with payload.
func nodeJob(t *testing.T, s *nodeapi.Serving, name, payload string) string {
	t.Helper()
	j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "runs", RunID: 1, Payload: &apiextensionsv1.JSON{Raw: []byte(payload)},
			TimeoutSeconds: ptr.To(int32(60))}}
	if err := s.Node.Kube.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return name
}

// awaitJobsDone waits until the FunctionJobs names have finished their
// runs and returns them by name.
func awaitJobsDone(t *testing.T, s *nodeapi.Serving, names ...string) map[string]*slessv1alpha1.FunctionJob {
	t.Helper()
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	out := map[string]*slessv1alpha1.FunctionJob{}
	for len(out) < len(names) {
		for _, name := range names {
			j := &slessv1alpha1.FunctionJob{}
			if err := s.Node.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, j); err != nil {
				t.Fatal(err)
			}
			if j.Status.Phase == slessv1alpha1.JobPhaseSucceeded || j.Status.Phase == slessv1alpha1.JobPhaseFailed {
				out[name] = j
			} else if time.Now().After(deadline) {
				t.Fatalf("FunctionJob %s not done after 3 min: %s %+v", name, j.Status.Phase, j.Status.Conditions)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("FunctionJob runs %v done in %v", names, time.Since(start).Round(time.Millisecond))
	return out
}

// awaitTriggerCall waits for a record of a call of function fn by a
// trigger of type kind and returns it; it logs how long that took from
// its start (the cron trigger's creation, the queue message's publication).
func awaitTriggerCall(t *testing.T, s *nodeapi.Serving, fn, kind string, within time.Duration) invoke.Invocation {
	t.Helper()
	return awaitTriggerCalls(t, s, fn, kind, 1, within)[0]
}

// awaitTriggerCalls waits for n records of calls of function fn by a
// trigger of type kind and returns them, newest first.
func awaitTriggerCalls(t *testing.T, s *nodeapi.Serving, fn, kind string, n int, within time.Duration) []invoke.Invocation {
	t.Helper()
	start := time.Now()
	for {
		recs, err := s.API.Calls(context.Background(), s.NS, fn)
		if err != nil {
			t.Fatal(err)
		}
		var out []invoke.Invocation
		for _, r := range recs {
			if r.Trigger == kind {
				out = append(out, r)
			}
		}
		if len(out) >= n {
			t.Logf("%d %s call(s) recorded %v after the wait for them began", len(out), kind, time.Since(start).Round(time.Millisecond))
			return out
		}
		if time.Since(start) > within {
			t.Fatalf("%d %s calls of %s within %v, want %d; records %+v", len(out), kind, fn, within, n, recs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// publishWhenConsumed waits until queue has a consumer (the trigger's
// pod declares it) and publishes body to it: published earlier, before
// the queue exists, the message would be dropped.
func publishWhenConsumed(t *testing.T, url, queue, body string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		// A passive declare of a queue that is not there closes the
		// channel: a fresh one each try.
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err == nil && q.Consumers > 0 {
			err := ch.PublishWithContext(context.Background(), "", queue, false, false,
				amqp.Publishing{ContentType: "application/json", Body: []byte(body)})
			_ = ch.Close()
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		_ = ch.Close()
		if time.Now().After(deadline) {
			t.Fatalf("queue %s has no consumer after 3 min (last %v)", queue, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
