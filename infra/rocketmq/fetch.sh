#!/usr/bin/env bash
# Fetch Apache RocketMQ 5.4.0 (namesrv, proxy with its embedded broker, tools) from Maven Central
# (through Maven) into infra/.jars/rocketmq/, once. The cache key is the pom's hash: a new pin
# fetches again. Only bench/rocketmq.py uses these jars.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$here/../.jars/rocketmq"
stamp="$dest/.pom.sha256"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "rocketmq/fetch.sh: Maven (mvn) is missing; install it (apt-get install maven)" >&2; exit 1; }
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
echo "rocketmq/fetch.sh: fetching RocketMQ 5.4.0 (namesrv, proxy, tools) from Maven Central..."
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dest.tmp"
echo "$want" > "$dest.tmp/.pom.sha256"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "rocketmq/fetch.sh: $(ls "$dest" | wc -l) jars in infra/.jars/rocketmq"
