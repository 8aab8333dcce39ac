# The two commands of the README: `make demo` and `make test`. Each works from a clean clone:
# it creates .venv, installs the package, fetches the pinned Kafka jars and the Spark jobs'
# jars, starts what it needs and stops it afterwards.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
JARS_STAMP := infra/.jars/kafka/.pom.sha256
PYTEST_ARGS ?=
BENCH_ARGS ?=
# The suite runs its Kafka through testcontainers on podman (infra/with-podman.sh starts and
# stops podman's API service and builds the images). RMQ_TEST_KAFKA=process (a local broker
# process) or KAFKA_BOOTSTRAP (an existing cluster) run it without containers.
ifeq ($(or $(KAFKA_BOOTSTRAP),$(filter process,$(RMQ_TEST_KAFKA))),)
WITH_KAFKA := infra/with-podman.sh
else
WITH_KAFKA :=
endif

.PHONY: demo test test-long test-cluster chaos unit integration spark-test lint docs bench bench-rocketmq jars spark-jars images install wheel system-deps browser-deps clean

demo: install jars
	$(PY) -m demo

# The whole suite but the three-broker cluster's tests (test-cluster) and the minute-long fault and
# timing runs (test-long); .ci/run runs all three.
# Two pytest workers, each with its own broker, a test file staying on one worker: the tests
# mostly wait on Kafka and on delays, so two halve the wall time on two cores.
TEST_WORKERS ?= 2
test: install jars lint docs browser-deps
	$(WITH_KAFKA) $(PY) -m pytest tests -m "not cluster and not long" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# A broker outage of a minute, a proxy killed mid-burst, a timer a minute ahead, the Java
# client's consumers through the proxy, Spark drivers killed and on a standalone cluster: about
# ten minutes (they keep `make test` near 15).
test-long: install jars
	$(WITH_KAFKA) $(PY) -m pytest tests -m "long and not cluster" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The fault and security tests on a three-broker cluster; it runs in containers only (podman).
test-cluster: install jars
	infra/with-podman.sh $(PY) -m pytest tests -m cluster $(PYTEST_ARGS)

# Faults as RocketMQ's openchaos injects them (partitions, isolation, packet loss, frozen and
# killed brokers and workers) on the three-broker cluster: each type alone for CHAOS_EACH
# minutes, then CHAOS_MIXED minutes drawn at random; a report and a chart in bench/.out/chaos.
# Long: not part of .ci/run (test-cluster runs a 3-minute smoke of it).
CHAOS_EACH ?= 2
CHAOS_MIXED ?= 30
chaos: install jars
	infra/with-podman.sh $(PY) -m tests.chaos --each $(CHAOS_EACH) --mixed $(CHAOS_MIXED)

unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

integration: install jars browser-deps
	$(WITH_KAFKA) $(PY) -m pytest tests/integration $(PYTEST_ARGS)

spark-test: install jars
	$(WITH_KAFKA) $(PY) -m pytest tests/spark $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check adapter tests bench demo
	$(VENV)/bin/mypy adapter

# The documentation site (mkdocs.yml, docs/) into site/, strict: a broken link, anchor or include
# fails it. A second or so.
docs: install
	$(PY) -m mkdocs build --strict --site-dir site

bench: install jars
	$(PY) -m bench.client
	$(PY) -m bench.delay
	$(PY) -m bench.transactions
	$(PY) -m bench.spark

# The adapter beside a real Apache RocketMQ 5.4.0, same workloads, one table (bench/rocketmq.py;
# BENCH_ARGS=--quick for a few minutes): the bench extra (RocketMQ's 5.x Python client) and the
# RocketMQ jars (infra/rocketmq/fetch.sh, cached by its pom's hash).
bench-rocketmq: install jars
	$(VENV)/bin/pip install --quiet -e '.[bench]'
	infra/rocketmq/fetch.sh
	$(PY) -m bench.rocketmq $(BENCH_ARGS)

install: $(STAMP)

$(STAMP): pyproject.toml | system-deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

# The package as users install it (tests/integration/ops/test_wheel.py installs one too). A
# stale build/lib would carry modules deleted since into the wheel: it is built afresh.
wheel: install
	rm -rf build/lib build/bdist.*
	$(PY) -m pip wheel --quiet --no-deps -w dist .
	@ls dist/rmq_kafka_adapter-*.whl

jars: $(JARS_STAMP) spark-jars

# The Spark jobs' jars (infra/spark/pom.xml) minus what the venv's pyspark ships: needs the venv.
# The script is cached by the pom's hash and the pyspark version, so this is quick when done.
spark-jars: install | system-deps
	infra/fetch-spark-jars.sh $(PY)

# The Kafka and worker images of the integration suite (podman; CONTAINER_ENGINE=docker works).
images: jars
	infra/images.sh

$(JARS_STAMP): infra/pom.xml infra/fetch-jars.sh infra/fetch-maven.sh | system-deps
	infra/fetch-jars.sh

# Java 17 and Maven come with this machine kind; install them from Debian if they are missing.
system-deps:
	@command -v java >/dev/null && command -v mvn >/dev/null || { \
	  echo "installing Java 17 and Maven from Debian..."; \
	  apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null; }
	@$(PYTHON) -c 'import venv' 2>/dev/null || { apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null; }

# The web console's tests drive a real headless Chromium through Selenium: Debian's chromium and
# chromium-driver (Selenium is pointed at /usr/bin/chromedriver and downloads nothing).
browser-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "installing Chromium and its driver from Debian (the console's browser tests)..."; \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }

clean:
	rm -rf $(VENV) infra/.jars infra/.images .demo bench/.out build dist site *.egg-info .rmq-spark spark-warehouse
