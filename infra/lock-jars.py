#!/usr/bin/env python3
"""Write a jar lock (adapter/jars.py) from the jars Maven resolved into infra/.jars/NAME.

Usage: infra/lock-jars.py JARS_DIR LOCK_NAME OUTPUT [--maven-repo DIR]

Each jar's coordinates come from Maven's local repository (~/.m2/repository), where Maven put
it; its SHA-1 is checked against the one Maven Central publishes beside it, and its size and
SHA-256 are pinned. Run it after a pom's pins change (`make jars` first):

  infra/lock-jars.py infra/.jars/kafka kafka-4.3.1 adapter/ops/kafka-jars.lock
  infra/lock-jars.py infra/.jars/spark spark-4.1.1-delta-4.3.1 adapter/spark/jars.lock
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapter.jars import MAVEN_CENTRAL, Artifact, Lock, sha256_of  # noqa: E402


def coordinates(jar: Path, repo: Path) -> tuple[str, str, str]:
    matches = [p for p in repo.rglob(jar.name) if p.parent.parent.name in jar.name]
    if len(matches) != 1:
        raise SystemExit(f"{jar.name}: found {len(matches)} copies in {repo}")
    version_dir = matches[0].parent
    artifact_dir = version_dir.parent
    group = ".".join(artifact_dir.parent.relative_to(repo).parts)
    return group, artifact_dir.name, version_dir.name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("jars_dir", type=Path)
    parser.add_argument("name")
    parser.add_argument("output", type=Path)
    parser.add_argument("--maven-repo", type=Path, default=Path.home() / ".m2" / "repository")
    args = parser.parse_args()
    artifacts = []
    for jar in sorted(args.jars_dir.glob("*.jar")):
        group, artifact, version = coordinates(jar, args.maven_repo)
        pinned = Artifact(group, artifact, version, jar.stat().st_size, sha256_of(jar))
        if pinned.file_name != jar.name:
            raise SystemExit(f"{jar.name}: resolved as {pinned.file_name}")
        with urllib.request.urlopen(pinned.url(MAVEN_CENTRAL) + ".sha1", timeout=30) as answer:  # noqa: S310
            published = answer.read().decode().split()[0]
        if published != hashlib.sha1(jar.read_bytes()).hexdigest():  # noqa: S324 - Maven's own
            raise SystemExit(f"{jar.name}: SHA-1 differs from Maven Central's")
        artifacts.append(pinned)
    lock = Lock(args.name, tuple(artifacts))
    header = (
        f"# {len(artifacts)} jars, {lock.total_bytes:,} bytes; written by infra/lock-jars.py "
        "from Maven's resolution, SHA-1 checked against Maven Central\n"
    )
    args.output.write_text(header + lock.render())
    print(f"{args.output}: {len(artifacts)} jars")


if __name__ == "__main__":
    main()
