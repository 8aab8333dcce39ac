#!/bin/sh
# Entry point of the locally built Kafka image. It takes the same settings as the official
# apache/kafka image, so one test fixture drives either: every KAFKA_* variable becomes a
# server property (KAFKA_ dropped, lower case, "_" -> ".", "__" -> "-", "___" -> "_"),
# CLUSTER_ID names the cluster, and the storage is formatted once (a restart keeps the data).
set -eu
conf=/opt/kafka/config/server.properties
mkdir -p /opt/kafka/config
: > "$conf"
env | sort | while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z' 'a-z' \
        | sed -e 's/___/\x01/g' -e 's/__/-/g' -e 's/_/./g' -e 's/\x01/_/g')
  printf '%s=%s\n' "$key" "$value" >> "$conf"
done
grep -q '^log.dirs=' "$conf" || echo 'log.dirs=/var/lib/kafka/data' >> "$conf"
cp="/opt/kafka/libs/*"
log4j="-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties"
java $log4j -cp "$cp" kafka.tools.StorageTool format --ignore-formatted \
  -t "${CLUSTER_ID:-rmqkafkaadapterAAAAAA}" -c "$conf"
exec java ${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m} ${KAFKA_OPTS:-} $log4j -cp "$cp" kafka.Kafka "$conf"
