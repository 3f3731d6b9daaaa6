// Package handlers is the conformance function for the go1.24 runtime (see
// conformance_test.go).
package handlers

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	sless "github.com/sless-dev/sless/runtimes/go1.24"
)

// Boom is the error the /error route returns.
type Boom struct{ msg string }

func (b *Boom) Error() string { return b.msg }

// panicky is a value whose MarshalJSON panics, as buggy encoding code does.
type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("cannot be JSON") }

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// Handle routes by path, like the Python and Node conformance functions.
func Handle(ctx context.Context, ev sless.Event) (any, error) {
	if ev.Path == "/" && ev.Method == "POST" { // job mode
		var payload map[string]any
		if err := ev.Bind(&payload); err != nil {
			return nil, err
		}
		if payload["fail"] == true {
			return nil, &Boom{"job failed on purpose"}
		}
		if payload["nonfinite"] == true {
			return map[string]any{"x": math.NaN()}, nil
		}
		if payload["encodefails"] == true {
			return map[string]any{"x": panicky{}}, nil
		}
		return map[string]any{"job": payload}, nil
	}
	c := sless.FromContext(ctx)
	route := ev.Path
	if strings.HasPrefix(route, "/echo/") {
		route = "/echo"
	}
	switch route {
	case "/echo":
		return map[string]any{"event": ev, "context": map[string]any{
			"functionName": c.FunctionName, "namespace": c.Namespace, "revision": c.Revision,
			"requestId": c.RequestID, "deadlineMs": c.Deadline.UnixMilli(),
			"remainingMs": sless.Remaining(ctx).Milliseconds(),
		}}, nil
	case "/status":
		return &sless.Response{StatusCode: 201, Headers: map[string]string{"X-Custom": "yes", "Content-Type": "text/plain"}, Body: "created"}, nil
	case "/binary":
		return &sless.Response{StatusCode: 200, Headers: map[string]string{"Content-Type": "image/png"}, Body: allBytes()}, nil
	case "/binary64":
		return &sless.Response{StatusCode: 202, Body: base64.StdEncoding.EncodeToString(allBytes()), IsBase64Encoded: true}, nil
	case "/base64":
		return &sless.Response{StatusCode: 200, Body: ev.Query["b"], IsBase64Encoded: true}, nil
	case "/bytes":
		return allBytes(), nil
	case "/error":
		return nil, &Boom{"boom"}
	case "/slow":
		ms, _ := strconv.Atoi(ev.Query["ms"])
		fmt.Printf("slow start ms=%d\n", ms)
		time.Sleep(time.Duration(ms) * time.Millisecond) // ignores ctx on purpose: the wrapper must still answer 504
		return map[string]any{"slept": ms}, nil
	case "/header": // echoes a header the caller chose, as a careless handler would
		name := ev.Query["name"]
		if name == "" {
			name = "X-Echo"
		}
		return &sless.Response{StatusCode: 200, Headers: map[string]string{name: ev.Query["value"]}, Body: "ok"}, nil
	case "/header-value": // a header value of each type, by name
		v := map[string]any{"float": 1.5, "intf": 2.0, "big": 1e21, "small": 1e-7, "micro": 1e-6, "neg": -0.5, "int": 7,
			"bool": true, "null": nil, "list": []any{1.5, nil, false}, "obj": map[string]any{"a": 1}, "nested": []any{[]any{1}},
			"nan": math.NaN(), "inf": math.Inf(1)}[ev.Query["k"]]
		return map[string]any{"statusCode": 200, "headers": map[string]any{"X-V": v}, "body": "ok"}, nil
	case "/headers-list":
		return map[string]any{"statusCode": 200, "headers": map[string]any{
			"X-Multi": []any{"a", "b"}, "Set-Cookie": []string{"c1=1", "c2=2"}, "X-Num": 7}, "body": "ok"}, nil
	case "/framing":
		return &sless.Response{StatusCode: 200, Headers: map[string]string{
			"Content-Length": "0", "Transfer-Encoding": "chunked", "X-Request-Id": "from-handler"}, Body: "framed"}, nil
	case "/code":
		// A float, as a status decoded from JSON would be.
		code, _ := strconv.ParseFloat(ev.Query["c"], 64)
		return map[string]any{"statusCode": code, "body": "x"}, nil
	case "/nonfinite":
		x := map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1)}[ev.Query["v"]]
		if ev.Query["as"] == "body" {
			return &sless.Response{StatusCode: 200, Body: map[string]any{"x": x}}, nil
		}
		return map[string]any{"x": x}, nil
	case "/encode-fails": // the result's own code fails while it is encoded
		return map[string]any{"x": panicky{}}, nil
	case "/nested-bytes":
		return map[string]any{"b": allBytes(), "list": []any{[]byte{1, 2}},
			"lookalike": map[string]any{"type": "Buffer", "data": []int{104, 105}}}, nil
	case "/dep":
		if _, err := uuid.Parse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"); err != nil {
			return nil, err
		}
		return map[string]any{"dep": "DEP!"}, nil
	case "/print-long":
		n, _ := strconv.Atoi(ev.Query["n"])
		fmt.Println(strings.Repeat("L", n))
		return "ok", nil
	case "/write-raw": // written straight to the streams; Go's pipes cannot end a line at the end of the call
		m := ev.Query["marker"]
		os.Stdout.WriteString("raw-out ")
		os.Stdout.WriteString(m + "\n")
		os.Stderr.WriteString("raw-err " + m + "\n")
		return "ok", nil
	case "/print":
		fmt.Println("printed", ev.Query["marker"])
		sless.Logger(ctx).Info("logged " + ev.Query["marker"])
		return "ok", nil
	}
	return &sless.Response{StatusCode: 404, Body: map[string]any{"notFound": ev.Path}}, nil
}
