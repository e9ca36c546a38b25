"""Loads the plugin folder as a package the way Hermes does (its own name, its folder as the
package path), and provides the ctxhost binary and a fresh CTXHOST_HOME.

The tests that need `ctxhost serve` use $CTXHOST_BIN, else target/release/ctxhost of this
checkout; without one they are skipped, saying so.
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parent.parent
REPO = PLUGIN_DIR.parent.parent


def _load_plugin():
    name = "ctxhost_hermes_plugin"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, PLUGIN_DIR / "__init__.py", submodule_search_locations=[str(PLUGIN_DIR)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pytest.importorskip("agent.context_engine", reason="Hermes (hermes-agent) is not installed in this Python")
plugin = _load_plugin()


def _binary():
    configured = os.environ.get("CTXHOST_BIN")
    if configured:
        # A binary named on purpose is the one tested, never a stand-in found elsewhere.
        if not os.access(configured, os.X_OK):
            pytest.fail(f"CTXHOST_BIN={configured} is not an executable file")
        return configured
    candidate = REPO / "target/release/ctxhost"
    return str(candidate) if os.access(str(candidate), os.X_OK) else None


@pytest.fixture
def ctxhost_bin():
    binary = _binary()
    if binary is None:
        pytest.skip("no ctxhost binary (set CTXHOST_BIN, or build target/release/ctxhost)")
    return binary


@pytest.fixture
def ctxhost_home(tmp_path):
    """A CTXHOST_HOME whose window is small enough that a few long messages compact."""
    home = tmp_path / "ctxhost-home"
    home.mkdir()
    (home / "ctxhost.json").write_text(json.dumps({
        "plugins": {"slots": {"contextEngine": "legacy"}},
        "agents": {"defaults": {"contextWindow": 3000, "compaction": {
            "reserveTokens": 300, "reserveTokensFloor": 0,
            "summarizeKeepRecentTokens": 600, "fullKeepRecentTokens": 500}}},
    }))
    return str(home)


@pytest.fixture(autouse=True)
def _stop_sidecars():
    yield
    plugin.sidecar.shutdown_all()


def conversation(turns, start=0):
    """Hermes-style messages: a long user prompt and a reply per turn, with Hermes' own keys."""
    out = []
    for i in range(start, start + turns):
        out.append({"role": "user", "content": f"PROMPT {i} " + "notes on the parser tables and the cache. " * 40 + f"END-OF-PROMPT-{i}",
                    "timestamp": 1_790_000_000.0 + i, "_db_persisted": True})
        out.append({"role": "assistant", "content": f"reply {i} " + "acknowledged. " * 30, "timestamp": 1_790_000_000.5 + i,
                    "_db_persisted": True, "finish_reason": "stop"})
    return out
