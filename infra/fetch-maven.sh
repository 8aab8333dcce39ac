#!/usr/bin/env bash
# fetch-maven.sh POM NAME: copy the runtime dependencies of POM from Maven Central (through
# Maven) into infra/.jars/NAME/, once. The cache key is the pom's hash: a new pin fetches again.
set -euo pipefail
pom="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
name="$2"
dest="$(cd "$(dirname "$0")" && pwd)/.jars/$name"
stamp="$dest/.pom.sha256"
want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch $name: Maven (mvn) is missing; install it (apt-get install maven)" >&2; exit 1; }
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
echo "fetch $name: fetching its jars from Maven Central..."
mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dest.tmp" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d'
echo "$want" > "$dest.tmp/.pom.sha256"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "fetch $name: $(ls "$dest" | wc -l) jars in infra/.jars/$name"
