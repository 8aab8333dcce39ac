#!/usr/bin/env bash
# Fetch Apache RocketMQ 5.4.0 (namesrv, proxy with its embedded broker, tools; infra/rocketmq/
# pom.xml) into infra/.jars/rocketmq/, once. Only bench/rocketmq.py uses these jars.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../fetch-maven.sh" "$here/pom.xml" rocketmq
