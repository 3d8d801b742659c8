"""``none``: no engine of its own, for studies (no server) and stand-in servers.

A stand-in (the tests' fake server, a study's probe) is any command; the tool treats it as it
treated every server before engines were an axis, which is vLLM's way: the same argv reading,
/health readiness, ``/reset_prefix_cache``, counters and boot-log words. What differs is that it
is not a serving engine: the ledger records no engine for its arms, an arm cannot name it (only an
experiment can), and every client may measure it.
"""

from __future__ import annotations

from types import MappingProxyType

from recipe_ledger.engines.vllm import VllmEngine


class NoEngine(VllmEngine):
    name = "none"
    stand_in = True
    foreign_clients = MappingProxyType({})


ENGINE = NoEngine()
