"""The package's architecture, enforced: which part may import which, and public APIs only.

Layers, lowest first: the core modules (``adapter/*.py``), ``wire`` (records and codec),
``kafka`` (shared plumbing), then the parts (``schedule``, ``producer``, ``consumer``,
``transaction``), then ``v5`` (the 5.x surface, over the producer, consumer and transaction
parts), then ``proxy`` (RocketMQ 5.x's protocol, over all of them), then ``ops``. A module
imports only from its own part and lower layers; the pure envelopes and signing of
``schedule`` are the shared pieces the producers and consumers use.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import adapter

pytestmark = pytest.mark.timeout(30)

PACKAGE = Path(adapter.__file__).parent
FACADES = {"adapter.client", "adapter.__main__", "adapter.spark.__main__"}
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "wire": {"core", "wire"},
    "kafka": {"core", "wire", "kafka"},
    "schedule": {"core", "wire", "kafka", "schedule"},
    "producer": {"core", "wire", "kafka", "producer", "schedule.envelope", "schedule.signing"},
    "consumer": {"core", "wire", "kafka", "consumer", "schedule.envelope", "schedule.signing"},
    "transaction": {"core", "wire", "kafka", "transaction", "producer"},
    "ops": {
        "core",
        "wire",
        "kafka",
        "schedule",
        "producer",
        "consumer",
        "transaction",
        "ops",
        "spark",
        "proxy",
        "console",
    },
    "spark": {"core", "wire", "spark"},
    # The 5.x clients sit on the 2.0 parts (the dead-letter send-back) and on the timers.
    "v5": {"core", "wire", "kafka", "schedule", "producer", "consumer", "transaction", "v5"},
}
# The proxy serves RocketMQ 5.x's protocol on the cores of every part below it.
ALLOWED["proxy"] = ALLOWED["v5"] | {"proxy"}
# The web console calls the commands' cores (ops and below); ops' command line starts it, as it
# starts the proxy.
ALLOWED["console"] = (ALLOWED["ops"] - {"spark", "proxy"}) | {"console"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The part a module (or a name imported from the package) belongs to."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "core"


def imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "adapter":
                names.update(f"adapter.{alias.name}" for alias in node.names)
    return names


MODULES = {module_name(p): ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(set(MODULES) - FACADES - {"adapter"}))
def test_a_module_imports_only_from_its_own_part_and_the_layers_below(module: str) -> None:
    allowed = ALLOWED[layer_of(module)]
    wrong = []
    for name in imported(MODULES[module]):
        if not name.startswith("adapter.") or name in FACADES:
            continue
        layer = layer_of(name)
        shared = ".".join(name.split(".")[1:3])
        if layer not in allowed and shared not in allowed:
            wrong.append(name)
    assert not wrong, f"{module} ({layer_of(module)}) imports {wrong}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_confluent_kafka_is_used_through_its_public_modules_only(module: str) -> None:
    private = [
        name
        for name in imported(MODULES[module])
        if name.startswith("confluent_kafka")
        and any(p.startswith("_") or p == "cimpl" for p in name.split("."))
    ]
    assert not private, f"{module} imports {private}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_opens_with_a_docstring(module: str) -> None:
    assert ast.get_docstring(MODULES[module]), f"{module} has no docstring"


def test_no_module_grows_past_about_four_hundred_lines() -> None:
    long = {
        module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 450
    }
    assert not long, long


def test_no_module_is_named_like_a_standard_library_module() -> None:
    """A module named ``io`` or ``types`` reads, in its own package's imports, as the standard
    library's, and a reader has to look twice."""
    shadows = [m for m in MODULES if m.rsplit(".", 1)[-1] in sys.stdlib_module_names]
    assert not shadows, shadows


# Loggers that carry another program's lines, named for that program, not for the module.
BRIDGES = {
    "adapter.kafka.clients": "adapter.librdkafka",
    "adapter.spark.jvm_log": "adapter.spark.jvm",
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_logs_under_its_own_name(module: str) -> None:
    named = [
        node.args[0].value
        for node in ast.walk(MODULES[module])
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "getLogger"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).startswith("adapter")
        and node.args[0].value != BRIDGES.get(module)
    ]
    assert not named, f"{module} logs as {named}: use logging.getLogger(__name__)"


def import_graph() -> dict[str, set[str]]:
    """Each module's imports of other modules of the package (under TYPE_CHECKING too: a cycle
    hidden there is still two modules that cannot be read one without the other). ``from
    package import module`` is an edge to the module; a module's own packages, which Python
    imports before it anyway, are not edges."""
    graph: dict[str, set[str]] = {}
    for module, tree in MODULES.items():
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    targets.add(child if child in MODULES else node.module)
        own_packages = {module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1)}
        graph[module] = {
            t for t in targets if t in MODULES and t != module and t not in own_packages
        }
    return graph


def test_no_two_modules_import_each_other_even_through_others() -> None:
    graph = import_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


PACKAGES_MAPPED = ["adapter.kafka", "adapter.schedule", "adapter.transaction", "adapter.console"]


@pytest.mark.parametrize("package", PACKAGES_MAPPED)
def test_a_package_docstring_names_every_module_of_the_package(package: str) -> None:
    doc = ast.get_docstring(MODULES[package]) or ""
    modules = [m.rsplit(".", 1)[1] for m in MODULES if m.rsplit(".", 1)[0] == package]
    missing = [m for m in modules if f"``{m}``" not in doc]
    assert not missing, f"{package}'s docstring does not name {missing}"
