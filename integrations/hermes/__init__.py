"""Hermes plugin `ctxhost`: registers the ctxhost context engine (engine.py).

Installed as $HERMES_HOME/plugins/ctxhost/ (install.sh), selected with `context.engine: ctxhost`
and enabled with `plugins.enabled: [ctxhost]` in $HERMES_HOME/config.yaml.
"""

from .engine import CtxhostEngine


def register(ctx):
    # Constructing the engine starts nothing: the sidecar starts at its first call.
    ctx.register_context_engine(CtxhostEngine())
