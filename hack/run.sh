#!/usr/bin/env bash
# make run: build sless, start `sless dev` (local mode: no Kubernetes, no
# Docker), deploy examples/functions/hello-python through the REST API, call
# it, print the answer and the URL, and leave the server running.
#
# Environment: SLESS_ADDR (default 127.0.0.1:8080), SLESS_DATA_DIR (default
# .data), SLESS_IDLE_TIMEOUT (default 60s).
set -euo pipefail
cd "$(dirname "$0")/.."

addr=${SLESS_ADDR:-127.0.0.1:8080}
data=${SLESS_DATA_DIR:-.data}
idle=${SLESS_IDLE_TIMEOUT:-60s}
base="http://$addr"
mkdir -p "$data" bin

command -v go >/dev/null || { echo "make run needs go on PATH" >&2; exit 1; }
bash hack/deps.sh python3 # the example function is Python

echo "building bin/sless ..."
make --no-print-directory build
go build -o bin/devdeploy ./hack/devdeploy

pidfile="$data/sless-dev.pid"
log="$data/sless-dev.log"
running=""
if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  running=$(cat "$pidfile")
  echo "sless dev already runs (pid $running); restarting it with the new build"
  kill -TERM "$running"
  for _ in $(seq 1 100); do kill -0 "$running" 2>/dev/null || break; sleep 0.1; done
fi

echo "starting sless dev on $base (data in $data, log in $log) ..."
nohup bin/sless dev --addr "$addr" --data-dir "$data" --idle-timeout "$idle" >"$log" 2>&1 &
pid=$!
echo "$pid" >"$pidfile"

# Wait for the API: the serving line in the log, or the process's end.
for _ in $(seq 1 300); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "sless dev exited:" >&2; cat "$log" >&2; exit 1
  fi
  grep -q "sless dev: serving on" "$log" && break
  sleep 0.1
done
grep -q "sless dev: serving on" "$log" || { echo "sless dev did not start in 30s:" >&2; cat "$log" >&2; exit 1; }

bin/devdeploy -url "$base" -token-file "$data/dev-token" \
  -f examples/functions/hello-python/function.yaml -query "name=sless" || {
  echo "--- sless dev log ($log) ---" >&2; tail -n 40 "$log" >&2; exit 1; }

cat <<MSG

sless dev keeps running (pid $pid): REST API at $base/v1, each function at its own host,
http://{name}.{namespace}.fn.localhost:${addr##*:} (curl and browsers resolve *.localhost
themselves), and for API clients at $base/fn/{namespace}/{name}.
Its log: $log.  Stop it with: kill $pid
Use it with the CLI: bin/sless login --server $base --token-file $data/dev-token
                     bin/sless new --lang python hello && bin/sless deploy hello
MSG
