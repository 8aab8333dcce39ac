#!/usr/bin/env bash
# Build the images the integration suite runs on, with no registry: a Debian base made by
# debootstrap from Debian's mirror, a Kafka image carrying the pinned jars of infra/pom.xml,
# and a Python image with the adapter's runtime dependencies. Each image is tagged with a hash
# of its inputs and skipped when that tag exists. The names go to infra/.images/{kafka,worker}.
#
#   CONTAINER_ENGINE  podman (default) or docker
#   RMQ_BASE_IMAGE    use this base instead of building one with debootstrap
#                     (e.g. docker.io/library/debian:bookworm-slim where a registry is reachable)
#   DEBIAN_MIRROR     the mirror debootstrap reads (default http://deb.debian.org/debian)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
engine="${CONTAINER_ENGINE:-podman}"
out="$here/.images"
mkdir -p "$out"
if [[ "$engine" == podman ]]; then
  export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers/containers.conf}"
  pull=(--pull=never)
else
  pull=()
fi

exists() { "$engine" image inspect "$1" >/dev/null 2>&1; }
key() { cat "$@" | sha256sum | cut -c1-12; }
say() { echo "images: $*"; }

base="${RMQ_BASE_IMAGE:-localhost/rmq-debian-minbase:bookworm}"
if ! exists "$base"; then
  [[ -z "${RMQ_BASE_IMAGE:-}" ]] || { say "the base image $base is missing" >&2; exit 1; }
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  rootfs="$(mktemp -d)"
  trap 'rm -rf "$rootfs"' EXIT
  say "building $base with debootstrap (about a minute)..."
  debootstrap --variant=minbase bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
  tar -C "$rootfs" -cf - . | "$engine" import - "$base" >/dev/null
  rm -rf "$rootfs"
fi
base_id="$("$engine" image inspect --format '{{.Id}}' "$base")"

# build NAME KEY CONTEXT: build CONTEXT as localhost/NAME:KEY unless it exists; drop older tags.
build() {
  local name="$1" tag="localhost/$1:$2" context="$3"
  if exists "$tag"; then
    say "$tag is up to date"
  else
    say "building $tag..."
    "$engine" build --quiet "${pull[@]}" --network=host --build-arg "BASE=$base" -t "$tag" "$context" >/dev/null
    "$engine" images --format '{{.Repository}}:{{.Tag}}' "localhost/$name" \
      | grep -vx "$tag" | xargs -r "$engine" rmi >/dev/null 2>&1 || true
  fi
  echo "$tag" > "$out/$name"
}

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT

# Kafka: the jars come from infra/fetch-jars.sh (the pom's hash is in their stamp).
"$here/fetch-jars.sh"
kafka_dir="$here/containers/kafka"
kafka_key="$(echo "$base_id" | key - "$kafka_dir"/* "$here/.jars/kafka/.pom.sha256")"
if ! exists "localhost/rmq-kafka:$kafka_key"; then
  mkdir -p "$context/kafka" && cp -r "$kafka_dir"/. "$context/kafka/"
  cp -r "$here/.jars/kafka" "$context/kafka/jars"
fi
build rmq-kafka "$kafka_key" "$context/kafka"

# Worker: the adapter's own wheel, built here, and its runtime dependencies as wheels fetched
# here. The key covers the package's sources, so a code change builds a new image.
worker_dir="$here/containers/worker"
sources="$(cd "$root" && git ls-files -co --exclude-standard adapter pyproject.toml | sort)"
worker_key="$(echo "$base_id" | key - "$worker_dir"/* <(cd "$root" && cat $sources))"
if ! exists "localhost/rmq-worker:$worker_key"; then
  mkdir -p "$context/worker/wheels" && cp -r "$worker_dir"/. "$context/worker/"
  python3 -m pip wheel --quiet --no-deps -w "$context/worker/wheels" "$root"
  python3 - "$root/pyproject.toml" > "$context/worker/requirements.txt" <<'PY'
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))
PY
  python3 -m pip download --quiet --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    -r "$context/worker/requirements.txt" -d "$context/worker/wheels"
fi
build rmq-worker "$worker_key" "$context/worker"
