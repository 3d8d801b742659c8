"""Serving engines: one module per engine behind one class (``base.Engine``), found by name.

```
engine = engines.get(arm.engine)          # InputError naming the known engines for an unknown one
engine.served_model(command), engine.with_metrics(command), engine.reset_prefix_cache(url, 10)
engines.names()                           # ("vllm", "sglang", "transformers", "openai", "none", then plugins)
```

Everywhere else an engine is a name (the experiment's ``engine:``, ``ArmPlan.engine``, the
ledger's ``engine``) that this registry turns into the object that knows it. Adding an engine is
one file plus its registration: a built-in is listed in ``BUILT_IN``; any other package declares
an entry point in the ``recipe_ledger.engines`` group (``tgi = my_package.tgi:ENGINE``) naming an
``Engine`` instance or subclass whose ``name`` is the entry point's.

Package map:
  base        Engine (every default: "this engine has no such thing"), ServerCommand (what an
              engine reads and edits of a launch command), ForeignClient, counter_delta
  vllm        vLLM: ``vllm serve``, the serving venv's CLI, /reset_prefix_cache, vllm:* counters,
              the kernel-autotune cache
  sglang      SGLang: ``python -m sglang.launch_server`` from .venv-sglang, --enable-metrics,
              readiness by a real generate, sglang:* counters, its JIT compile caches
  sglang_api  SGLang's HTTP endpoints: /generate, /flush_cache (retried while draining), /server_info
  transformers_serve  ``transformers serve MODEL``: .venv-tserve's CLI, the positional model, no /metrics
  openai_server  any OpenAI-compatible server by its own command: /v1/models readiness plus one completion
  openai_api  the OpenAI endpoints every such server shares: /v1/models, one chat (or legacy) completion
  none        the stand-in: studies and fake servers, read the vLLM way, recorded with no engine
"""

from __future__ import annotations

import functools

from recipe_ledger.engines import none, openai_server, sglang, transformers_serve, vllm
from recipe_ledger.engines.base import Engine
from recipe_ledger.plugins import load_registry, pick

ENTRY_POINT_GROUP = "recipe_ledger.engines"
# In the order the experiment schema lists them (and its error messages name them).
BUILT_IN: tuple[Engine, ...] = (
    vllm.ENGINE,
    sglang.ENGINE,
    transformers_serve.ENGINE,
    openai_server.ENGINE,
    none.ENGINE,
)


def get(name: str) -> Engine:
    """The engine called ``name``."""
    return pick(_registry(), name, "engine", "engines")


def names(*, stand_ins: bool = True) -> tuple[str, ...]:
    """Every registered engine's name, built-ins first; ``stand_ins=False``: only real engines."""
    return tuple(name for name, engine in _registry().items() if stand_ins or not engine.stand_in)


def refresh() -> None:
    """Read the entry points again on next use (after installing a plugin, or in a test)."""
    _registry.cache_clear()


@functools.cache
def _registry() -> dict[str, Engine]:
    return load_registry(ENTRY_POINT_GROUP, BUILT_IN, Engine, lambda engine: engine.name, "engine")
