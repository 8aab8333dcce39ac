#!/usr/bin/env bash
# Fetch the jars of the Spark jobs (infra/spark/pom.xml: the Kafka source and spark-avro for the
# pinned pyspark, Delta Lake, their dependencies) from Maven Central through Maven into
# infra/.jars/spark/, keeping only the files the installed pyspark does not ship already
# (pyspark/jars): the pom's `provided` spark-sql makes the shared dependencies come out under
# pyspark's own file names, so a filter by file name removes every duplicate.
#
# Usage: infra/fetch-spark-jars.sh [PYTHON]   (PYTHON: the venv's interpreter, default .venv/bin/python)
# Cached: the key is the pom's hash plus the pyspark version; a new pin fetches again.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-$here/../.venv/bin/python}"
dest="$here/.jars/spark"
stamp="$dest/.pom.sha256"

[[ -x "$python" ]] || { echo "fetch-spark-jars: no Python at $python; run \`make install\` first" >&2; exit 1; }
pyspark_jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null)" || {
  echo "fetch-spark-jars: pyspark is not installed in $python; run \`make install\` (or pip install 'rmq-kafka-adapter[spark]')" >&2
  exit 1
}
pyspark_version="$("$python" -c 'import pyspark; print(pyspark.__version__)')"
want="$( { cat "$here/spark/pom.xml"; echo "pyspark==$pyspark_version"; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-spark-jars: Maven (mvn) is missing; install it (apt-get install maven)" >&2; exit 1; }

rm -rf "$dest.tmp" "$dest.all" && mkdir -p "$dest.tmp" "$dest.all"
echo "fetch-spark-jars: fetching the Spark Kafka, Avro and Delta jars from Maven Central..."
mvn -q -B -f "$here/spark/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dest.all"
for jar in "$dest.all"/*.jar; do
  [[ -e "$pyspark_jars/$(basename "$jar")" ]] || cp "$jar" "$dest.tmp/"
done
rm -rf "$dest.all"
echo "$want" > "$dest.tmp/.pom.sha256"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "fetch-spark-jars: $(ls "$dest"/*.jar | wc -l) jars in infra/.jars/spark (pyspark $pyspark_version ships the rest)"
