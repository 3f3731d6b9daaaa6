#!/usr/bin/env bash
# Builds the real binaries the tests run against, from the Go module proxy only,
# and caches them so that a second run is a no-op:
#   kube-apiserver and etcd  (envtest's control plane)
#   versitygw                (a real S3-compatible server, posix back end)
# Prints the asset directory on stdout; progress goes to stderr.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
VERSITYGW_VERSION=${VERSITYGW_VERSION:-1.8.0}

cache=${SLESS_ASSETS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sless/assets}
dir="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-vgw-$VERSITYGW_VERSION"
mkdir -p "$dir"
# Concurrent test runs share the cache: one builds, the others wait for it.
exec 9>"$dir/.lock"
flock 9
log() { echo "test-assets: $*" >&2; }

build_kube_apiserver() {
  [ -x "$dir/kube-apiserver" ] && return
  local work; work=$(mktemp -d)
  local start=$SECONDS
  log "building kube-apiserver v$KUBE_VERSION from the Go module proxy (about 4 min cold)"
  (
    cd "$work"
    go mod init sless.local/kube-apiserver-build >/dev/null 2>&1
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
    # k8s.io/kubernetes replaces its staging modules with local paths; point each at
    # the published module of the same release instead.
    local staging_version="v0.${KUBE_VERSION#1.}"
    {
      echo "require k8s.io/kubernetes v$KUBE_VERSION"
      grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
    } >> go.mod
    cat > main.go <<'GO'
package main

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"
GO
    go mod tidy >&2
    local pkg=k8s.io/component-base/version
    local ld="-s -w -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)"
    go build -ldflags "$ld" -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
    mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
  )
  rm -rf "$work"
  log "kube-apiserver built in $((SECONDS - start)) s"
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

case "${1:-all}" in
  all) build_etcd; build_versitygw; build_kube_apiserver ;;
  kube-apiserver) build_kube_apiserver ;;
  etcd) build_etcd ;;
  versitygw) build_versitygw ;;
  *) echo "usage: $0 [all|kube-apiserver|etcd|versitygw]" >&2; exit 2 ;;
esac
echo "$dir"
