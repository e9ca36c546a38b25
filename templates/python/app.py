"""The `__NAME__` context engine. Build: componentize-py -d wit -w context-engine componentize app -o engine.wasm"""

# Every import at the top: an import inside a method fails at run time in the component.
import json

from componentize_py_types import Err
from wit_world.imports import host, types

from ctxhost_engine import DefaultEngine, keep_all, log

# Per-session state lives here: one component instance serves one session.
CONFIG = None


def config():
    """`plugins.entries.__NAME__.config`, already validated by the host against configSchema."""
    global CONFIG
    if CONFIG is None:
        CONFIG = json.loads(host.config())
    return CONFIG


class Engine(DefaultEngine):
    def info(self) -> types.EngineInfo:
        return types.EngineInfo(
            id="__NAME__", name="__NAME__", version="0.1.0", owns_compaction=False
        )

    def assemble(self, request: types.AssembleRequest) -> types.AssembleResult:
        """Decides what the model sees: here, the newest `keepLast` entries (all when unset)."""
        keep = config().get("keepLast")
        if keep is not None and not isinstance(keep, int):
            raise Err("config keepLast must be an integer")  # a clean error, not a trap
        count = len(request.context.entries)
        start = 0 if keep is None else max(0, count - keep)
        if start > 0:
            log(host.LogLevel.DEBUG, f"leaving out {start} entries")
        return keep_all(request.context, start)
