"""Pinned jars fetched into a cache: locks, checksums, progress, a Maven repository on loopback."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter import jars
from tests import maven

pytestmark = pytest.mark.timeout(60)


def artifact_of(name: str, body: bytes) -> jars.Artifact:
    return jars.Artifact(
        "org.example.deep", name, "1.0", len(body), hashlib.sha256(body).hexdigest()
    )


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory in Maven's layout served over HTTP on 127.0.0.1; (its root, its URL)."""
    root = tmp_path / "repo"
    root.mkdir()
    with maven.serve(root) as url:
        yield root, url


def publish(root: Path, artifact: jars.Artifact, body: bytes) -> None:
    path = root / artifact.url("").lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def test_a_lock_reads_back_what_it_renders_and_names_a_bad_line() -> None:
    lock = jars.Lock("demo-1", (artifact_of("a", b"x"), artifact_of("b", b"yy")))
    assert jars.Lock.parse("# comment\n" + lock.render()) == lock
    with pytest.raises(jars.JarsError, match="jar lock line 2"):
        jars.Lock.parse("name x\norg.example:a 12 ff\n")


def test_an_artifact_lives_where_mavens_layout_puts_it() -> None:
    artifact = jars.Artifact("org.apache.kafka", "kafka_2.13", "4.3.1", 1, "0")
    assert artifact.url(jars.MAVEN_CENTRAL + "/") == (
        "https://repo1.maven.org/maven2/org/apache/kafka/kafka_2.13/4.3.1/kafka_2.13-4.3.1.jar"
    )


def test_the_jars_are_fetched_once_with_progress_and_then_used_as_they_are(
    tmp_path: Path, repository: tuple[Path, str]
) -> None:
    root, url = repository
    bodies = {"a": b"a" * 300_000, "b": b"b" * 10}
    lock = jars.Lock("demo-1", tuple(artifact_of(n, b) for n, b in bodies.items()))
    for artifact in lock.artifacts:
        publish(root, artifact, bodies[artifact.artifact])
    shown = io.StringIO()
    progress = jars.TextProgress(shown, "the demo's jars")
    target = tmp_path / "cache" / "demo-1"
    jars.ensure(lock, target, repository_url=url, progress=progress, on_start=progress.start)
    assert (target / "a-1.0.jar").read_bytes() == bodies["a"]
    assert jars.is_complete(target, lock)
    lines = shown.getvalue().splitlines()
    assert lines[0].startswith("fetching the demo's jars (2 jars, 0.3 MB) from http://127.0.0.1")
    assert lines[-1].endswith("(100 %)")
    (root / "org").rename(root / "gone")  # the repository is no longer needed
    again = io.StringIO()
    jars.ensure(lock, target, repository_url=url, on_start=jars.TextProgress(again, "x").start)
    assert again.getvalue() == ""


def test_a_jar_that_is_not_the_pinned_file_is_refused_and_not_kept(
    tmp_path: Path, repository: tuple[Path, str]
) -> None:
    root, url = repository
    artifact = artifact_of("a", b"the real one")
    publish(root, artifact, b"a forged one")
    target = tmp_path / "cache"
    with pytest.raises(jars.JarsError, match="a-1.0.jar from .* is not the pinned file: SHA-256"):
        jars.ensure(jars.Lock("demo-1", (artifact,)), target, repository_url=url)
    assert not list(target.glob("*.jar*")), "nothing of it is kept"


def test_an_unreachable_repository_is_one_error_naming_the_url_and_the_way_out(
    tmp_path: Path,
) -> None:
    artifact = artifact_of("a", b"x")
    with pytest.raises(jars.JarsError) as caught:
        jars.ensure(jars.Lock("d", (artifact,)), tmp_path, repository_url="http://127.0.0.1:1")
    text = str(caught.value)
    assert (
        "could not fetch org.example.deep:a:1.0 from http://127.0.0.1:1/org/example/deep/a/1.0/a-1.0.jar"
        in text
    )
    assert jars.ENV_REPOSITORY in text


def test_the_cache_is_under_the_users_cache_directory_unless_named(tmp_path: Path) -> None:
    assert jars.cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "rmq-adapter" / "jars"
    assert jars.cache_root({jars.ENV_CACHE: str(tmp_path / "j")}) == tmp_path / "j"
