package frontdoor_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	ping "knative.dev/networking/test/test_images/grpc-ping/proto"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/routing"
)

// pinger answers as Knative's conformance image grpc-ping does, with a
// trailer on every call; "fail" fails a call before any message (a
// trailers-only answer), "abort" fails a stream after its messages.
type pinger struct {
	ping.UnimplementedPingServiceServer
}

func (pinger) Ping(ctx context.Context, req *ping.Request) (*ping.Response, error) {
	if req.Msg == "fail" {
		return nil, status.Error(codes.FailedPrecondition, "told to fail")
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs("x-pinged", req.Msg)); err != nil {
		return nil, err
	}
	return &ping.Response{Msg: req.Msg + " - pong"}, nil
}

func (pinger) PingStream(stream ping.PingService_PingStreamServer) error {
	n := 0
	defer func() { stream.SetTrailer(metadata.Pairs("x-pings", strconv.Itoa(n))) }()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if req.Msg == "abort" {
			return status.Error(codes.Aborted, "told to abort")
		}
		n++
		if err := stream.Send(&ping.Response{Msg: req.Msg + " - pong"}); err != nil {
			return err
		}
	}
}

// A gRPC client speaks h2c to the front door; an Ingress routes its calls
// to a gRPC server over h2c, unary and bidirectional streams alike, with
// the status and trailers the server sends. A Function's Ingress holds the
// call to its policy and records it, and the stream still works.
func TestDoorRoutesGRPC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gs := grpc.NewServer()
	ping.RegisterPingServiceServer(gs, pinger{})
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(backend)
	defer gs.Stop()
	port := backend.Addr().(*net.TCPAddr).Port

	// The backend's Service, as the proxy's watch sees it: its cluster IP
	// is the loopback, and its port is marked h2c as Knative marks one.
	table := &routing.Table{}
	table.SetService(types.NamespacedName{Namespace: "default", Name: "ping"}, routing.Service{ClusterIP: "127.0.0.1", Ports: []routing.ServicePort{{Port: port, Name: "h2c", H2C: true}}})
	for _, ing := range []*v1alpha1.Ingress{
		grpcIngress("ping", "ping.example.com", port, nil),
		grpcIngress("hello", "hello.example.com", port, map[string]string{routing.LabelFunction: "hello"}),
	} {
		c, err := routing.Compile(ing)
		if err != nil {
			t.Fatal(err)
		}
		table.Set(c)
	}
	hello := invoke.ResolverFunc(func(_ context.Context, ns, name string) (invoke.Target, error) {
		if ns != "default" || name != "hello" {
			return invoke.Target{}, invoke.ErrNotFound
		}
		return invoke.Target{Ready: true, Timeout: time.Minute, Revision: "hello-00001"}, nil
	})
	door, history := openDoor(ctx, t, invoke.Options{Resolver: hello, Routes: table}, false)
	defer door.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- door.Serve(ctx, ln) }()

	for _, tc := range []struct {
		host  string
		token bool
	}{{"ping.example.com", false}, {"hello.example.com", true}} {
		t.Run(tc.host, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///"+tc.host,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", ln.Addr().String())
				}))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := ping.NewPingServiceClient(conn)
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			defer ccancel()
			if tc.token {
				cctx = metadata.AppendToOutgoingContext(cctx, "authorization", "Bearer "+testToken)
			}
			checkGRPC(cctx, t, client)
		})
	}

	// Without a token, the Function's host refuses the call before the
	// backend, and the gRPC client hears so.
	conn, err := grpc.NewClient("passthrough:///hello.example.com", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ping.NewPingServiceClient(conn).Ping(ctx, &ping.Request{Msg: "x"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call without a token: %v, want Unauthenticated", err)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	door.Close() // flushes the recorder
	page, err := history.List(context.Background(), invoke.Query{Namespace: "default", Function: "hello", Limit: invoke.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	// The Function's calls are recorded (ping, fail, stream, abort); the
	// plain Ingress's are not, being no workload of sless's.
	if len(page.Items) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(page.Items), page.Items)
	}
	for _, rec := range page.Items {
		if rec.Status != 200 || rec.Trigger != invoke.TriggerHTTP || rec.Revision != "hello-00001" || rec.Error != "" {
			t.Fatalf("record %+v", rec)
		}
	}
	if page, err := history.List(context.Background(), invoke.Query{Namespace: "default", Function: "ping"}); err != nil || len(page.Items) != 0 {
		t.Fatalf("records of the plain Ingress: %+v (%v)", page.Items, err)
	}
}

// checkGRPC makes a unary call, a failing one, a bidirectional stream of
// ping-pongs, and a stream the server aborts.
func checkGRPC(ctx context.Context, t *testing.T, client ping.PingServiceClient) {
	t.Helper()
	var trailer metadata.MD
	resp, err := client.Ping(ctx, &ping.Request{Msg: "one"}, grpc.Trailer(&trailer))
	if err != nil || resp.Msg != "one - pong" || trailer.Get("x-pinged")[0] != "one" {
		t.Fatalf("Ping: %v %v, trailer %v", resp, err, trailer)
	}
	if _, err := client.Ping(ctx, &ping.Request{Msg: "fail"}); status.Code(err) != codes.FailedPrecondition ||
		status.Convert(err).Message() != "told to fail" {
		t.Fatalf("a failing Ping: %v, want FailedPrecondition: told to fail", err)
	}

	// Each answer is awaited before the next message goes: a proxy that
	// held either direction back would stall the stream.
	stream, err := client.PingStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const pings = 20
	for i := range pings {
		msg := "ping " + strconv.Itoa(i)
		if err := stream.Send(&ping.Request{Msg: msg}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		resp, err := stream.Recv()
		if err != nil || resp.Msg != msg+" - pong" {
			t.Fatalf("Recv %d: %v %v", i, resp, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream's end: %v, want io.EOF", err)
	}
	if got := stream.Trailer().Get("x-pings"); len(got) != 1 || got[0] != strconv.Itoa(pings) {
		t.Fatalf("the stream's trailer: %v", stream.Trailer())
	}

	stream, err = client.PingStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"first", "abort"} {
		if err := stream.Send(&ping.Request{Msg: msg}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := stream.Recv(); err != nil || resp.Msg != "first - pong" {
		t.Fatalf("Recv before the abort: %v %v", resp, err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Aborted {
		t.Fatalf("the aborted stream: %v, want Aborted", err)
	}
	if got := stream.Trailer().Get("x-pings"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("the aborted stream's trailer: %v", stream.Trailer())
	}
}

// grpcIngress routes host to the Service ping's port, with labels.
func grpcIngress(name, host string, port int, labels map[string]string) *v1alpha1.Ingress {
	return &v1alpha1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1, Labels: labels},
		Spec: v1alpha1.IngressSpec{Rules: []v1alpha1.IngressRule{{
			Hosts:      []string{host},
			Visibility: v1alpha1.IngressVisibilityExternalIP,
			HTTP: &v1alpha1.HTTPIngressRuleValue{Paths: []v1alpha1.HTTPIngressPath{{
				Splits: []v1alpha1.IngressBackendSplit{{
					IngressBackend: v1alpha1.IngressBackend{ServiceNamespace: "default", ServiceName: "ping", ServicePort: intstr.FromInt(port)},
					Percent:        100,
				}},
			}}},
		}}},
	}
}
