#!/usr/bin/env bash
# Run a command (the test suite) against podman's Docker-compatible API, the way `make test`
# does: install podman if it is missing, start its API service on a private socket, build the
# test images, run the command with testcontainers pointed at the socket, then remove every
# container the command left behind and stop the service, whether the command passed or not.
# If podman cannot start, this fails loudly: the suite never falls back to another broker.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers/containers.conf}"
label="rmq-kafka-adapter.test"

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
  echo "with-podman: installing podman and runc from Debian..."
  apt-get update -qq && apt-get install -y -qq podman runc >/dev/null
fi

# One run at a time on a machine: the cleanup below removes every container the suite labels,
# so a second run beside this one would lose its brokers. A later run waits for this one.
exec 9>"${TMPDIR:-/tmp}/rmq-kafka-adapter-podman.lock"
if ! flock -n 9; then
  echo "with-podman: another run holds podman; waiting for it to finish..."
  flock 9
fi

state="$(mktemp -d "${TMPDIR:-/tmp}/rmq-podman.XXXXXX")"
socket="$state/podman.sock"
podman system service --time=0 "unix://$socket" >"$state/service.log" 2>&1 &
service=$!

cleanup() {
  local ids
  ids="$(podman ps -aq --filter "label=$label" 2>/dev/null || true)"
  if [[ -n "$ids" ]]; then
    echo "with-podman: removing containers left behind: $(echo $ids)"
    podman rm -f $ids >/dev/null 2>&1 || true
  fi
  ids="$(podman network ls -q --filter "label=$label" 2>/dev/null || true)"
  if [[ -n "$ids" ]]; then
    echo "with-podman: removing networks left behind: $(echo $ids)"
    podman network rm -f $ids >/dev/null 2>&1 || true
  fi
  kill "$service" 2>/dev/null || true
  wait "$service" 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for _ in $(seq 1 100); do
  if [[ -S "$socket" ]] && curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then
    break
  fi
  if ! kill -0 "$service" 2>/dev/null; then
    echo "with-podman: podman's API service exited:" >&2; cat "$state/service.log" >&2; exit 1
  fi
  sleep 0.1
done
curl -sf --unix-socket "$socket" http://d/_ping >/dev/null || {
  echo "with-podman: podman's API service did not answer within 10 s:" >&2
  cat "$state/service.log" >&2; exit 1; }
echo "with-podman: podman $(podman version --format '{{.Client.Version}}') answers at $socket"

"$here/images.sh"

export DOCKER_HOST="unix://$socket"
export TESTCONTAINERS_RYUK_DISABLED=true        # the reaper image cannot be pulled here
export TESTCONTAINERS_CONNECTION_MODE=docker_host TC_HOST=localhost
export RMQ_TEST_KAFKA=testcontainers
"$@"
