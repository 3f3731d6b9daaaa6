#!/usr/bin/env bash
# Prints the path of a Terraform-compatible CLI for the provider's acceptance
# tests: `terraform` when one is on PATH, else OpenTofu built from its Go
# module source (the Go module proxy only) into the same cache as
# hack/test-assets.sh. A second run is a no-op. Progress goes to stderr.
#
#   SLESS_TERRAFORM=/path/to/cli   use that CLI, no lookup and no build
#   SLESS_TERRAFORM=tofu           skip `terraform` on PATH and use OpenTofu
set -euo pipefail

TOFU_VERSION=${TOFU_VERSION:-1.12.6}
log() { echo "terraform.sh: $*" >&2; }

if [ -n "${SLESS_TERRAFORM:-}" ] && [ "$SLESS_TERRAFORM" != tofu ]; then
  [ -x "$SLESS_TERRAFORM" ] || { log "SLESS_TERRAFORM=$SLESS_TERRAFORM is not an executable"; exit 1; }
  echo "$SLESS_TERRAFORM"
  exit 0
fi
if [ "${SLESS_TERRAFORM:-}" != tofu ] && command -v terraform >/dev/null 2>&1; then
  command -v terraform
  exit 0
fi

cache=${SLESS_ASSETS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sless/assets}
dir="$cache/opentofu-$TOFU_VERSION"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$dir/tofu" ]; then
  start=$SECONDS
  log "building OpenTofu v$TOFU_VERSION from its Go module source (about 7 min cold)"
  # `go install` refuses the module (it has replace directives), so build
  # inside a writable copy of the downloaded source, where they apply.
  src=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@v$TOFU_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  [ -d "$src" ] || { log "could not download github.com/opentofu/opentofu@v$TOFU_VERSION"; exit 1; }
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  cp -R "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$dir/tofu.tmp" ./cmd/tofu) >&2
  mv "$dir/tofu.tmp" "$dir/tofu"
  log "OpenTofu built in $((SECONDS - start)) s"
fi
echo "$dir/tofu"
