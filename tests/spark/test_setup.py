"""What a missing piece of the Spark set-up says: a jar, Java, PySpark itself; and that only
adapter/spark imports PySpark."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapter.spark import jars
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.session import build_session
from tests.brokers import ROOT
from tests.spark.conftest import cli_command, spark_child_env

pytestmark = pytest.mark.timeout(60)


def test_missing_jars_are_named_with_their_coordinates_and_the_command_that_fetches_them(
    tmp_path: Path,
) -> None:
    with pytest.raises(jars.SparkSetupError) as empty:
        jars.locate(tmp_path)
    message = str(empty.value)
    for coordinates, _pattern in jars.REQUIRED:
        assert coordinates in message
    assert "make jars" in message
    assert str(tmp_path) in message

    # A directory with all but the Delta jars names only those.
    real = jars.locate()
    for path in real.paths:
        if not path.name.startswith("delta-"):
            shutil.copy(path, tmp_path / path.name)
    with pytest.raises(jars.SparkSetupError) as partial:
        jars.locate(tmp_path)
    assert "io.delta:delta-spark_4.1_2.13:4.3.1" in str(partial.value)
    assert "io.delta:delta-storage:4.3.1" in str(partial.value)
    assert "spark-sql-kafka" not in str(partial.value)


def test_a_session_is_refused_before_any_jvm_starts_when_jars_are_missing(tmp_path: Path) -> None:
    config = SparkJobConfig(Job.POINTS, "127.0.0.1:1", tmp_path, tmp_path, topics=("T",))
    with pytest.raises(jars.SparkSetupError, match="make jars"):
        build_session(config.with_(jars_dir=tmp_path / "nowhere"))


def test_missing_java_is_named_with_the_command_that_installs_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(jars.SparkSetupError, match=r"Java is missing .*apt-get install openjdk"):
        jars.java_executable()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(jars.SparkSetupError, match="holds no bin/java"):
        jars.java_executable()


def test_the_cli_fails_with_the_fetch_command_when_jars_are_missing(tmp_path: Path) -> None:
    done = subprocess.run(  # noqa: S603 - fixed argv
        cli_command(
            "points",
            "--bootstrap",
            "127.0.0.1:1",
            "--available-now",
            "--jars-dir",
            str(tmp_path),
            "--checkpoint",
            str(tmp_path / "c"),
            "--table",
            str(tmp_path / "t"),
        ),
        cwd=ROOT,
        env=spark_child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Error: the Spark jobs' jars are missing" in done.stderr
    assert "make jars" in done.stderr


def test_importing_adapter_spark_without_pyspark_names_the_install_command() -> None:
    code = "import sys; sys.modules['pyspark'] = None; import adapter.spark"
    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "ImportError" in done.stderr
    assert "pip install 'rmq-kafka-adapter[spark]'" in done.stderr


def test_only_adapter_spark_imports_pyspark_or_delta() -> None:
    offenders = []
    for path in sorted((ROOT / "adapter").rglob("*.py")):
        if (ROOT / "adapter" / "spark") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] in ("pyspark", "delta") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_outside_a_checkout_the_jars_are_fetched_into_the_user_cache_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from adapter import jars as pinned
    from tests import maven

    lock = jars.jar_lock()
    monkeypatch.setattr(jars, "_CHECKOUT_JARS", tmp_path / "site-packages" / "infra")
    monkeypatch.delenv(jars.ENV_JARS, raising=False)
    monkeypatch.setenv(pinned.ENV_CACHE, str(tmp_path / "cache"))
    with maven.mirror(lock, ROOT / "infra" / ".jars" / "spark", tmp_path / "maven") as url:
        monkeypatch.setenv(pinned.ENV_REPOSITORY, url)
        found = jars.locate()
    assert found.directory == tmp_path / "cache" / lock.name
    assert sorted(p.name for p in found.paths) == sorted(a.file_name for a in lock.artifacts)
    shown = capsys.readouterr().err
    assert f"fetching the Spark jobs' jars ({lock.name}) (14 jars, 22.9 MB)" in shown
    assert "(100 %)" in shown
    assert jars.locate().directory == found.directory, "the second time, from the cache"
    assert capsys.readouterr().err == ""


@pytest.mark.long  # about 45 s: a driver JVM started and awaited
def test_a_job_returns_only_once_its_driver_jvm_has_exited(
    system_topics: str, new_topic: Any, children: Any, tmp_path: Path
) -> None:
    topic = new_topic(1, "Nothing")
    driver = children(
        cli_command(
            "telemetry", "--bootstrap", system_topics, "--topic", topic, "--available-now",
            "--checkpoint", str(tmp_path / "c"), "--table", str(tmp_path / "t"),
        ),
        tmp_path / "driver.log",
    )  # fmt: skip
    assert driver.wait(180) == 0, driver.output[-3000:]
    # The driver runs in a process group of its own: nothing of it (its JVM) may outlive it.
    assert running_in_group(driver.process.pid) == []
    assert "this run read" in driver.output, "it ran to its summary"  # system topics are shared


def running_in_group(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that still run (zombies excepted: spark-class leaves a
    finished shell of its launcher, which the system reaps once its parent has gone)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, fields = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        state, _ppid, group = fields.split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(name.split("(", 1)[1])
    return found
