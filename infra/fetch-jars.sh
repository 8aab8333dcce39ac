#!/usr/bin/env bash
# Fetch the pinned Apache Kafka broker jars from Maven Central (through Maven) into
# infra/.jars/kafka/, once. The cache key is the pom's hash: a new pin fetches again.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$here/.jars/kafka"
stamp="$dest/.pom.sha256"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-jars: Maven (mvn) is missing; install it (apt-get install maven)" >&2; exit 1; }
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
echo "fetch-jars: fetching the Kafka broker jars from Maven Central..."
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dest.tmp"
echo "$want" > "$dest.tmp/.pom.sha256"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "fetch-jars: $(ls "$dest" | wc -l) jars in infra/.jars/kafka"
