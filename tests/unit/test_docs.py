"""The README stays a five-minute read whose links all lead somewhere; the rest is the
documentation site under docs/, which `make docs` builds strictly (a broken link or anchor there
fails the build). The README is outside the site, so its links are checked here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(markdown: str, base: Path) -> list[str]:
    """The relative links of a Markdown text whose file does not exist under ``base``."""
    targets = (m.group(1).split("#", 1)[0] for m in LINK.finditer(markdown))
    return [t for t in targets if t and "://" not in t and not (base / t).exists()]


def test_the_readme_is_read_in_five_minutes() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines: move detail to a page under docs/ and link to it"
    )


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository() -> None:
    assert broken_links((ROOT / "README.md").read_text(), ROOT) == []


def test_the_benchmarks_page_includes_benchmarks_md_after_its_title() -> None:
    # docs/benchmarks.md includes BENCHMARKS.md from its third line on, below its own title.
    assert (ROOT / "BENCHMARKS.md").read_text().startswith("# Benchmarks\n\n")
    assert '--8<-- "BENCHMARKS.md:3:"' in (ROOT / "docs" / "benchmarks.md").read_text()
