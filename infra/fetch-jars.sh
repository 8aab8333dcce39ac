#!/usr/bin/env bash
# Fetch the pinned Apache Kafka broker jars (infra/pom.xml) into infra/.jars/kafka/, once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/fetch-maven.sh" "$here/pom.xml" kafka
