"""Pinned jars from Maven Central, fetched once into a user cache and checked against the pins.

Not a RocketMQ behaviour: this is what makes a wheel a complete product. The local broker
(``rmq-adapter broker start``) and the Spark jobs run jars that a wheel cannot carry (tens of
megabytes). Each ships a lock file (package data) naming every jar it needs by its Maven
coordinates, size and SHA-256; on first use the jars are downloaded from Maven Central (or
the mirror ``RMQ_ADAPTER_MAVEN_REPOSITORY`` names) into
``$RMQ_ADAPTER_JARS_CACHE/<name>`` (default ``~/.cache/rmq-adapter/jars/<name>``, or under
``$XDG_CACHE_HOME``), with progress reported to a callback, and each file is checked against
its pinned checksum before it is kept. A complete directory carries a stamp (the lock's
hash), so later starts only look at the stamp.

The lock files are written by ``infra/lock-jars.py`` from the jars Maven resolved for
``infra/pom.xml`` and ``infra/spark/pom.xml``; a test keeps them in step.

Known gaps: no proxy settings beyond what ``urllib`` reads from the environment
(``https_proxy``); a mirror must use Maven's repository layout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from adapter.exceptions import AdapterError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
ENV_REPOSITORY = "RMQ_ADAPTER_MAVEN_REPOSITORY"
ENV_CACHE = "RMQ_ADAPTER_JARS_CACHE"
STAMP = ".complete"
_CHUNK = 256 * 1024
_READ_TIMEOUT_S = 30.0


class JarsError(AdapterError):
    """A jar could not be fetched, or what arrived is not the pinned file; says which."""


@dataclass(frozen=True, slots=True)
class Artifact:
    """One pinned jar: Maven coordinates, size in bytes, SHA-256."""

    group: str
    artifact: str
    version: str
    size: int
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def url(self, repository: str) -> str:
        """Where Maven's repository layout keeps it under ``repository``."""
        base = repository.rstrip("/")
        path = "/".join([*self.group.split("."), self.artifact, self.version, self.file_name])
        return f"{base}/{path}"


@dataclass(frozen=True, slots=True)
class Lock:
    """A named set of pinned jars (``kafka-4.3.1``), read from a lock file."""

    name: str
    artifacts: tuple[Artifact, ...]

    @property
    def total_bytes(self) -> int:
        return sum(a.size for a in self.artifacts)

    @property
    def digest(self) -> str:
        """Changes whenever a pin does: the stamp of a complete directory."""
        text = "\n".join(f"{a.coordinates} {a.sha256}" for a in self.artifacts)
        return hashlib.sha256(f"{self.name}\n{text}".encode()).hexdigest()

    @classmethod
    def parse(cls, text: str) -> Lock:
        """``name NAME`` then one ``group:artifact:version size sha256`` a line (``#``
        comments and blank lines are skipped); :class:`JarsError` naming a bad line."""
        name, artifacts = "", []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if fields[0] == "name" and len(fields) == 2:
                name = fields[1]
                continue
            coordinates = fields[0].split(":")
            if len(fields) != 3 or len(coordinates) != 3 or not fields[1].isdigit():
                raise JarsError(
                    f"jar lock line {number} is not 'group:artifact:version size sha256': {raw!r}"
                )
            group, artifact, version = coordinates
            artifacts.append(Artifact(group, artifact, version, int(fields[1]), fields[2]))
        if not name or not artifacts:
            raise JarsError("a jar lock needs a 'name' line and at least one jar")
        return cls(name, tuple(artifacts))

    def render(self) -> str:
        lines = [f"name {self.name}"]
        lines += [f"{a.coordinates} {a.size} {a.sha256}" for a in self.artifacts]
        return "\n".join(lines) + "\n"


def cache_root(environ: Mapping[str, str]) -> Path:
    """``RMQ_ADAPTER_JARS_CACHE``, else ``$XDG_CACHE_HOME/rmq-adapter/jars``, else
    ``~/.cache/rmq-adapter/jars``."""
    if environ.get(ENV_CACHE):
        return Path(environ[ENV_CACHE]).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmq-adapter" / "jars"


def repository(environ: Mapping[str, str]) -> str:
    return environ.get(ENV_REPOSITORY) or MAVEN_CENTRAL


def is_complete(directory: Path, lock: Lock) -> bool:
    """The directory holds a verified copy of every jar of ``lock`` (its stamp says so and
    every file is there with its pinned size)."""
    try:
        if (directory / STAMP).read_text().strip() != lock.digest:
            return False
    except OSError:
        return False
    for artifact in lock.artifacts:
        try:
            if (directory / artifact.file_name).stat().st_size != artifact.size:
                return False
        except OSError:
            return False
    return True


Progress = Callable[[int, int, Artifact], None]
"""Called as bytes arrive: (bytes so far, total bytes of the lock, the jar being fetched)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for chunk in iter(lambda: source.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ensure(
    lock: Lock,
    directory: Path,
    *,
    repository_url: str = MAVEN_CENTRAL,
    progress: Progress | None = None,
    on_start: Callable[[Lock, Path, str], None] | None = None,
) -> Path:
    """``directory`` holding every jar of ``lock``, verified; fetched first when it does not
    (``on_start`` is told once before any download). Two processes that fetch at once take
    turns (a file lock beside the directory), and a file becomes visible only once it is
    verified, so an interrupted fetch is resumed, never used.

    Raises:
        JarsError: a jar could not be fetched (the URL and the reason), or did not match its
            pinned checksum (both checksums; the file is not kept).
    """
    if is_complete(directory, lock):
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    with _exclusive(directory.with_name(directory.name + ".lock")):
        if is_complete(directory, lock):
            return directory  # another process fetched them meanwhile
        (directory / STAMP).unlink(missing_ok=True)
        if on_start is not None:
            on_start(lock, directory, repository_url)
        done = 0
        for artifact in lock.artifacts:
            target = directory / artifact.file_name
            if not (target.exists() and sha256_of(target) == artifact.sha256):
                _download(artifact, target, repository_url, done, lock.total_bytes, progress)
            done += artifact.size
            if progress is not None:
                progress(done, lock.total_bytes, artifact)
        (directory / STAMP).write_text(lock.digest + "\n")
    return directory


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(
    artifact: Artifact,
    target: Path,
    repository_url: str,
    done: int,
    total: int,
    progress: Progress | None,
) -> None:
    url = artifact.url(repository_url)
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    received = 0
    try:
        # The configured repository's URL: Maven Central, a mirror, or a file: URL on purpose.
        request = urllib.request.Request(url, headers={"User-Agent": "rmq-kafka-adapter"})  # noqa: S310
        with (
            urllib.request.urlopen(request, timeout=_READ_TIMEOUT_S) as answer,  # noqa: S310
            open(partial, "wb") as out,
        ):
            for chunk in iter(lambda: answer.read(_CHUNK), b""):
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
                if progress is not None:
                    progress(done + min(received, artifact.size), total, artifact)
    except (OSError, urllib.error.URLError) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise JarsError(
            f"could not fetch {artifact.coordinates} from {url}: {reason}. Set "
            f"{ENV_REPOSITORY} to a Maven mirror you can reach, or point the command at a "
            "directory that holds the jars"
        ) from exc
    if digest.hexdigest() != artifact.sha256:
        partial.unlink(missing_ok=True)
        raise JarsError(
            f"{artifact.file_name} from {url} is not the pinned file: SHA-256 "
            f"{digest.hexdigest()}, expected {artifact.sha256} ({received} bytes, expected "
            f"{artifact.size}); it was not kept"
        )
    os.replace(partial, target)


class TextProgress:
    """Progress of a fetch as text on ``stream`` (standard error: standard output keeps what a
    command prints, such as the broker's address). On a terminal one line is redrawn; else a
    line at each quarter."""

    def __init__(self, stream: TextIO, what: str) -> None:
        self._stream = stream
        self._what = what
        self._tty = stream.isatty()
        self._quarter = 0

    def start(self, lock: Lock, directory: Path, repository_url: str) -> None:
        self._print(
            f"fetching {self._what} ({len(lock.artifacts)} jars, {_mb(lock.total_bytes)}) from "
            f"{repository_url} into {directory}, once; checksums are checked"
        )

    def __call__(self, done: int, total: int, artifact: Artifact) -> None:
        if self._tty:
            line = f"\r  {_mb(done)} of {_mb(total)}  {artifact.file_name}"
            self._stream.write(f"{line[:79]:<79}")
            if done >= total:
                self._stream.write("\n")
            self._stream.flush()
            return
        quarter = 4 * done // max(total, 1)
        if quarter > self._quarter:
            self._quarter = quarter
            self._print(f"  {_mb(done)} of {_mb(total)} ({25 * quarter} %)")

    def _print(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
