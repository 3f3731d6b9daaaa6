#!/usr/bin/env bash
# The test command behind `make test`: the machine's programs, vet,
# formatting, then every test with the race detector. The parts the tests talk
# to (kube-apiserver, etcd, kubectl, versitygw, PostgreSQL, RabbitMQ) are
# built or started by the tests' harness; what cannot be built from the Go
# module proxy comes from Debian's packages (hack/deps.sh installs it when
# missing), Chromium for the web console's browser test among them.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== machine"
bash hack/deps.sh python3 node postgres rabbitmq mqtt chromium realnode
# The console's browser test skips only where no browser can be had; here
# deps.sh has just installed one, so a skip would hide a broken install.
export SLESS_REQUIRE_BROWSER=1
# Likewise the real node: its programs are built below and its packages
# installed above, so a node test that skips hides a broken bed.
export SLESS_REQUIRE_NODE=1
echo "== go vet"
# With the flags of the static sless the node's images hold (test-assets.sh
# sless-static, the Dockerfile's build): that build then reuses vet's
# compiled packages instead of compiling every library again.
CGO_ENABLED=0 go vet -trimpath -tags timetzdata ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi
echo "== go test"
log=$(mktemp)
assets=$(bash hack/test-assets.sh)
# The node's images' programs (the ingress conformance suite's too), the
# registry and Jaeger, here rather than on first use inside a test, where a cold build
# would eat the test timeout.
bash hack/test-assets.sh images >/dev/null
bash hack/test-assets.sh conformance-images >/dev/null
bash hack/test-assets.sh registry >/dev/null
bash hack/test-assets.sh jaeger >/dev/null
set +e
KUBEBUILDER_ASSETS=$assets go test -race -count=1 -timeout "${TEST_TIMEOUT:-45m}" -v ./... >"$log" 2>&1
status=$?
set -e
grep -vE '^(=== (RUN|PAUSE|CONT|NAME)|\s*--- PASS)' "$log" | grep -vE '^\s*$' || true
passed=$(grep -cE '^(    )*--- PASS' "$log" || true)
failed=$(grep -cE '^(    )*--- FAIL' "$log" || true)
echo "$passed passed, $failed failed"
exit "$status"
