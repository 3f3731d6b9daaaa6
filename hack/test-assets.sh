#!/usr/bin/env bash
# Builds the real binaries the tests run against, from the Go module proxy only,
# and caches them so that a second run is a no-op:
#   kube-apiserver and etcd  (envtest's control plane)
#   kubectl                  (the client users type, of the apiserver's release)
#   versitygw                (a real S3-compatible server, posix back end)
#   Knative Serving's and Tekton Pipelines' controllers, at the versions
#   go.mod pins (the real-primitives test bed runs them; `controllers`),
#   and Knative's queue-proxy (bench/invoke runs it; `controllers` or
#   `queue-proxy`, which prints the binary's path)
#   a real node's programs (`node`; the node bed runs them): kubelet,
#   kube-proxy, kube-controller-manager and kube-scheduler of the
#   apiserver's release; containerd, containerd-shim-runc-v2 and ctr;
#   kaniko's executor; CoreDNS
#   the static programs the node's images hold (`images`): Knative's
#   activator, autoscaler and queue, Tekton's entrypoint, nop,
#   workingdirinit and sidecarlogresults; distribution's registry
#   (`registry`, which prints its path); `sless-static` builds sless itself
#   the same way and prints its path
#   Jaeger v2 (`jaeger`, which prints its path): the tracing back end the
#   traces e2e reads spans back from
#   the test images of Knative's ingress conformance suite
#   (`conformance-images`: runtime, wsserver, grpc-ping, timeout, httpproxy
#   and retry from knative.dev/networking/test/test_images, static)
# Prints the asset directory on stdout (for `controllers` and `node`,
# theirs; `node-dir` prints the node directory without building); progress
# goes to stderr. `all`, the default, builds every set but the node's
# images' programs (the node's own programs included).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
VERSITYGW_VERSION=${VERSITYGW_VERSION:-1.8.0}
# Kubernetes 1.36 wants containerd 2.x (Debian's 1.6 is too old).
CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.3.7}
KANIKO_VERSION=${KANIKO_VERSION:-1.23.2}
COREDNS_VERSION=${COREDNS_VERSION:-1.15.0}

cache=${SLESS_ASSETS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sless/assets}
dir="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-vgw-$VERSITYGW_VERSION"
# Concurrent test runs share the cache: one builds, the others wait for it.
# The controllers' directory has a lock of its own (lock_ctrl_dir).
lock_dir() {
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9
}
log() { echo "test-assets: $*" >&2; }

# kube_build builds one command of k8s.io/kubernetes at $KUBE_VERSION into the
# directory $3 (the asset directory when absent). The packages it imports
# (named in $2) are what `go mod tidy` resolves.
kube_build() {
  local cmd=$1 imports=$2 dir=${3:-$dir}
  [ -x "$dir/$cmd" ] && return
  local work; work=$(mktemp -d)
  local start=$SECONDS
  log "building $cmd v$KUBE_VERSION from the Go module proxy (about 4 min cold)"
  (
    cd "$work"
    go mod init "sless.local/$cmd-build" >/dev/null 2>&1
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
    # k8s.io/kubernetes replaces its staging modules with local paths; point each at
    # the published module of the same release instead.
    local staging_version="v0.${KUBE_VERSION#1.}"
    {
      echo "require k8s.io/kubernetes v$KUBE_VERSION"
      grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
    } >> go.mod
    {
      echo "package main"
      echo
      for p in $imports; do echo "import _ \"$p\""; done
    } > main.go
    go mod tidy >&2
    # Keeps k8s.io/kubernetes required when no package of its own is imported
    # (kubectl's main imports only staging modules).
    go get "k8s.io/kubernetes/cmd/$cmd@v$KUBE_VERSION" >&2
    local pkg=k8s.io/component-base/version
    local ld="-s -w -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)"
    go build -ldflags "$ld" -o "$dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2
    mv "$dir/$cmd.tmp" "$dir/$cmd"
  )
  rm -rf "$work"
  log "$cmd built in $((SECONDS - start)) s"
}

build_kube_apiserver() {
  kube_build kube-apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
}

# kubectl's main package imports these (k8s.io/kubernetes/cmd/kubectl).
build_kubectl() {
  kube_build kubectl "k8s.io/component-base/cli k8s.io/kubectl/pkg/cmd k8s.io/kubectl/pkg/cmd/util k8s.io/client-go/plugin/pkg/client/auth"
}

build_etcd() {
  [ -x "$dir/etcd" ] && return
  local work; work=$(mktemp -d)
  local start=$SECONDS
  log "building etcd v$ETCD_VERSION from the Go module proxy"
  (
    cd "$work"
    go mod init sless.local/etcd-build >/dev/null 2>&1
    cat > main.go <<'GO'
package main

import _ "go.etcd.io/etcd/server/v3/etcdmain"
GO
    go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
    go mod tidy >&2
    go build -ldflags "-s -w" -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
    mv "$dir/etcd.tmp" "$dir/etcd"
  )
  rm -rf "$work"
  log "etcd built in $((SECONDS - start)) s"
}

build_versitygw() {
  [ -x "$dir/versitygw" ] && return
  local start=$SECONDS
  log "installing versitygw v$VERSITYGW_VERSION from the Go module proxy"
  GOBIN="$dir" go install -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@v$VERSITYGW_VERSION" >&2
  log "versitygw built in $((SECONDS - start)) s"
}

# The controllers' versions are the ones go.mod pins, so the bed runs the
# code whose API types sless is built against.
root=$(cd "$(dirname "$0")/.." && pwd)
modversion() { (cd "$root" && go list -m -f '{{.Version}}' "$1"); }
SERVING_VERSION=$(modversion knative.dev/serving)
PIPELINE_VERSION=$(modversion github.com/tektoncd/pipeline)
ctrl_dir="$cache/serving-$SERVING_VERSION-pipeline-$PIPELINE_VERSION"

# ctrl_build builds one command of Knative or Tekton into $3/$name ($3 is
# $ctrl_dir when absent), unless it is there, in a throwaway module holding
# sless's go.mod and go.sum, so shared dependencies resolve to the versions
# sless itself uses; -mod=mod adds what only the commands need. Static
# and path-trimmed, as Knative's and Tekton's releases are (ko's defaults):
# the controllers and the images' programs then compile the libraries they
# share once. Callers hold the lock on the directory.
ctrl_build() {
  local name=$1 pkg=$2 ctrl_dir=${3:-$ctrl_dir}
  [ -x "$ctrl_dir/$name" ] && return
  local work; work=$(mktemp -d)
  local start=$SECONDS
  log "building $name ($pkg) from the Go module proxy"
  (
    cd "$work"
    sed 's|^module .*|module sless.local/controllers-build|' "$root/go.mod" > go.mod
    cp "$root/go.sum" go.sum
    CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$ctrl_dir/$name.tmp" "$pkg" >&2
    mv "$ctrl_dir/$name.tmp" "$ctrl_dir/$name"
  )
  rm -rf "$work"
  log "$name built in $((SECONDS - start)) s"
}

lock_ctrl_dir() {
  mkdir -p "$ctrl_dir"
  exec 8>"$ctrl_dir/.lock"
  flock 8
}

# build_controllers builds Knative Serving's and Tekton Pipelines'
# controllers (about 5 min cold together) and Knative's queue-proxy, each
# only when missing: a cache made before the queue-proxy was added gets it.
build_controllers() {
  lock_ctrl_dir
  ctrl_build knative-controller knative.dev/serving/cmd/controller
  ctrl_build tekton-controller github.com/tektoncd/pipeline/cmd/controller
  ctrl_build knative-queue knative.dev/serving/cmd/queue
}

# build_queue_proxy builds only Knative's queue-proxy, the sidecar in front
# of every Knative revision's container (bench/invoke runs it beside sless's
# proxy).
build_queue_proxy() {
  lock_ctrl_dir
  ctrl_build knative-queue knative.dev/serving/cmd/queue
}

# The node's programs have a directory of their own, keyed by every version
# in it, so the control plane's cache stays valid when one of them moves.
node_dir="$cache/node-k8s-$KUBE_VERSION-containerd-$CONTAINERD_VERSION-kaniko-$KANIKO_VERSION-coredns-$COREDNS_VERSION"

lock_node_dir() {
  mkdir -p "$node_dir"
  exec 7>"$node_dir/.lock"
  flock 7
}

# go_install installs the packages $3... at version $2 (main packages of one
# module) into directory $1, statically linked (CGO_ENABLED=0) with the extra
# linker flags in $GO_INSTALL_LDFLAGS, unless all are there. Each binary
# reaches its name by a rename, so a reader never sees half a file. Callers
# hold the directory's lock.
go_install() {
  local out=$1 version=$2; shift 2
  local missing=() p
  for p in "$@"; do [ -x "$out/${p##*/}" ] || missing+=("$p@$version"); done
  [ ${#missing[@]} -eq 0 ] && return
  local bin; bin=$(mktemp -d "$out/.install.XXXXXX")
  local start=$SECONDS
  log "installing ${*##*/} $version from the Go module proxy"
  CGO_ENABLED=0 GOBIN="$bin" go install -ldflags "-s -w ${GO_INSTALL_LDFLAGS:-}" "${missing[@]}" >&2
  for p in "$@"; do
    if [ -e "$bin/${p##*/}" ]; then mv "$bin/${p##*/}" "$out/${p##*/}"; fi
  done
  rm -rf "$bin"
  log "${*##*/} built in $((SECONDS - start)) s"
}

# module_build builds package $2 at version $3 as the file $4 in a throwaway
# module named for $1: go get, then a static (CGO_ENABLED=0) go build with
# the extra linker flags $5. Callers hold the lock on $4's directory.
module_build() {
  local name=$1 pkg=$2 version=$3 out=$4 ld=${5:-}
  [ -x "$out" ] && return
  local work; work=$(mktemp -d)
  local start=$SECONDS
  log "building $name $version from the Go module proxy"
  (
    cd "$work"
    go mod init "sless.local/$name-build" >/dev/null 2>&1
    go get "$pkg@$version" >&2
    CGO_ENABLED=0 go build -ldflags "-s -w $ld" -o "$out.tmp" "$pkg" >&2
    mv "$out.tmp" "$out"
  )
  rm -rf "$work"
  log "$name built in $((SECONDS - start)) s"
}

# kaniko_build builds kaniko's executor into the node directory in a
# throwaway module, since `go install ...@version` fails on it: the module is
# archived and the proxy refuses the version list Go reads to tell a
# deprecation. Its version is set, as upstream builds it. Callers hold the
# lock on $node_dir.
kaniko_build() {
  local kaniko=github.com/GoogleContainerTools/kaniko
  module_build kaniko "$kaniko/cmd/executor" "v$KANIKO_VERSION" "$node_dir/executor" \
    "-X $kaniko/pkg/version.version=v$KANIKO_VERSION"
}

# build_node builds a real node's programs (about 15 min cold on 2 cores):
# the Kubernetes ones share the apiserver's module and build caches.
build_node() {
  lock_node_dir
  rm -rf "$node_dir"/.install.* "$node_dir"/*.tmp # left by a run that was killed
  kube_build kubelet k8s.io/kubernetes/cmd/kubelet/app "$node_dir"
  kube_build kube-proxy k8s.io/kubernetes/cmd/kube-proxy/app "$node_dir"
  kube_build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager/app "$node_dir"
  kube_build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler/app "$node_dir"
  local ctrd=github.com/containerd/containerd/v2
  GO_INSTALL_LDFLAGS="-X $ctrd/version.Version=v$CONTAINERD_VERSION" go_install "$node_dir" "v$CONTAINERD_VERSION" \
    "$ctrd/cmd/containerd" "$ctrd/cmd/containerd-shim-runc-v2" "$ctrd/cmd/ctr"
  kaniko_build
  coredns_build
}

# coredns_build builds CoreDNS with only the plugins the node's Corefile
# names (test/testbed/node_cluster.go), CoreDNS's own way of choosing
# plugins at compile time: its main with every plugin also compiles the
# cloud providers' SDKs the node never calls. Callers hold the lock on
# $node_dir.
COREDNS_PLUGINS="bind errors kubernetes"
coredns_build() {
  [ -x "$node_dir/coredns" ] && return
  local work; work=$(mktemp -d)
  local start=$SECONDS coredns=github.com/coredns/coredns p
  log "building coredns v$COREDNS_VERSION ($COREDNS_PLUGINS) from the Go module proxy"
  (
    cd "$work"
    go mod init sless.local/coredns-build >/dev/null 2>&1
    {
      echo "package main"
      echo
      echo "import ("
      echo "	\"$coredns/core/dnsserver\""
      echo "	\"$coredns/coremain\""
      for p in $COREDNS_PLUGINS; do echo "	_ \"$coredns/plugin/$p\""; done
      echo ")"
      echo
      echo "func init() {"
      echo "	if err := dnsserver.SetDirectives([]string{$(printf '"%s", ' $COREDNS_PLUGINS)}); err != nil {"
      echo "		panic(err)"
      echo "	}"
      echo "}"
      echo
      echo "func main() { coremain.Run() }"
    } > main.go
    go get "$coredns@v$COREDNS_VERSION" >&2
    go mod tidy >&2
    CGO_ENABLED=0 go build -ldflags "-s -w" -o "$node_dir/coredns.tmp" . >&2
    mv "$node_dir/coredns.tmp" "$node_dir/coredns"
  )
  rm -rf "$work"
  log "coredns built in $((SECONDS - start)) s"
}

# The real node's images (test/testbed/images*.go) are assembled from static
# programs (CGO_ENABLED=0: the images have no libc): Knative's data plane and
# Tekton's step programs at the versions go.mod pins, and the bed's registry
# (distribution, run as a process: in sless's module it would move
# OpenTelemetry and gRPC under Kubernetes' and Knative's libraries).
REGISTRY_VERSION=${REGISTRY_VERSION:-3.1.2}
img_dir="$cache/images-serving-$SERVING_VERSION-pipeline-$PIPELINE_VERSION"

build_image_programs() {
  mkdir -p "$img_dir"
  exec 6>"$img_dir/.lock"
  flock 6
  local p
  for p in activator autoscaler queue; do
    ctrl_build "$p" "knative.dev/serving/cmd/$p" "$img_dir"
  done
  for p in entrypoint nop workingdirinit sidecarlogresults; do
    ctrl_build "$p" "github.com/tektoncd/pipeline/cmd/$p" "$img_dir"
  done
}

# build_conformance_programs builds the programs of the test images Knative's
# ingress conformance suite runs (about 1 min cold: they share most of their
# dependencies with the data plane above), at the knative.dev/networking
# go.mod pins, in a directory of their own so other node tests never wait
# for them.
NETWORKING_VERSION=$(modversion knative.dev/networking)
conf_dir="$cache/images-networking-$NETWORKING_VERSION"
build_conformance_programs() {
  mkdir -p "$conf_dir"
  exec 3>"$conf_dir/.lock"
  flock 3
  local p
  for p in runtime wsserver grpc-ping timeout httpproxy retry; do
    ctrl_build "$p" "knative.dev/networking/test/test_images/$p" "$conf_dir"
  done
}

# build_registry builds distribution's registry, in a directory of its own
# so the bed's registry does not wait for the image programs.
reg_dir="$cache/registry-$REGISTRY_VERSION"
build_registry() {
  mkdir -p "$reg_dir"
  exec 4>"$reg_dir/.lock"
  flock 4
  [ -x "$reg_dir/registry" ] && return
  local bin; bin=$(mktemp -d "$reg_dir/.install.XXXXXX")
  local start=$SECONDS dist=github.com/distribution/distribution/v3
  log "installing registry v$REGISTRY_VERSION from the Go module proxy"
  CGO_ENABLED=0 GOBIN="$bin" go install -ldflags "-s -w -X $dist/version.version=v$REGISTRY_VERSION" \
    "$dist/cmd/registry@v$REGISTRY_VERSION" >&2
  mv "$bin/registry" "$reg_dir/registry"
  rm -rf "$bin"
  log "registry built in $((SECONDS - start)) s"
}

# build_jaeger builds Jaeger v2 (the module's v1.75.0 is Jaeger 2.12: v1 tags
# name the module's versions) in a throwaway module, in a directory of its own.
JAEGER_VERSION=${JAEGER_VERSION:-1.75.0}
jaeger_dir="$cache/jaeger-$JAEGER_VERSION"
build_jaeger() {
  mkdir -p "$jaeger_dir"
  exec 10>"$jaeger_dir/.lock"
  flock 10
  module_build jaeger github.com/jaegertracing/jaeger/cmd/jaeger "v$JAEGER_VERSION" "$jaeger_dir/jaeger"
}

# build_sless_static builds sless from this checkout, statically linked, for
# the trigger and job pods' image: every time (Go's build cache makes an
# unchanged tree quick), since the tree changes between runs.
build_sless_static() {
  local out="$cache/sless-static"
  mkdir -p "$out"
  exec 5>"$out/.lock"
  flock 5
  # The build line of the Dockerfile at the root. hack/test.sh vets with
  # these flags, so that a fresh run compiles the libraries once.
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags timetzdata \
    -ldflags "-s -w -X main.version=testbed -X main.commit=unknown" -o "$out/sless.tmp" ./cmd/sless) >&2
  mv "$out/sless.tmp" "$out/sless"
  echo "$out/sless"
}

case "${1:-all}" in
  controllers|queue-proxy|node|node-dir|images|conformance-images|registry|sless-static|jaeger) ;;
  *) lock_dir ;;
esac
case "${1:-all}" in
  all) build_etcd; build_versitygw; build_kube_apiserver; build_kubectl; build_controllers; build_node ;;
  controllers) build_controllers; echo "$ctrl_dir"; exit 0 ;;
  node) build_node; echo "$node_dir"; exit 0 ;;
  node-dir) echo "$node_dir"; exit 0 ;;
  images) build_image_programs; echo "$img_dir"; exit 0 ;;
  conformance-images) build_conformance_programs; echo "$conf_dir"; exit 0 ;;
  registry) build_registry; echo "$reg_dir/registry"; exit 0 ;;
  jaeger) build_jaeger; echo "$jaeger_dir/jaeger"; exit 0 ;;
  sless-static) build_sless_static; exit 0 ;;
  queue-proxy) build_queue_proxy; echo "$ctrl_dir/knative-queue"; exit 0 ;;
  kube-apiserver) build_kube_apiserver ;;
  kubectl) build_kubectl ;;
  etcd) build_etcd ;;
  versitygw) build_versitygw ;;
  *) echo "usage: $0 [all|kube-apiserver|kubectl|etcd|versitygw|controllers|queue-proxy|node|node-dir|images|conformance-images|registry|jaeger|sless-static]" >&2; exit 2 ;;
esac
echo "$dir"
