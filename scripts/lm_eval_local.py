"""lm-evaluation-harness's own CLI (``lm_eval run ...``, the same arguments, the same output files),
with its task index limited to ``--include_path``: the lm_eval instrument's client.

    .venv-eval/bin/python scripts/lm_eval_local.py run --model local-completions ... --include_path DIR

Why not ``lm_eval`` itself: its CLI indexes the ~10,000 task files lm-eval ships before anything
else (7 s on an idle 2-core box, 50 s while CI runs beside it), for every measurement, and then a
task name may resolve to a built-in task that reads a hub dataset. Only the task folder is
indexed here (lm-eval's ``TaskManager(include_defaults=False)``); nothing else changes.
Runs in the eval venv (scripts/setup_eval_venv.sh); standard library and lm-eval only.
"""

from __future__ import annotations

import sys

from lm_eval.__main__ import cli_evaluate
from lm_eval.tasks import TaskManager

_index = TaskManager.__init__


def _local_only(self: TaskManager, *args: object, **kwargs: object) -> None:
    kwargs["include_defaults"] = False
    _index(self, *args, **kwargs)  # type: ignore[arg-type]


if __name__ == "__main__":
    TaskManager.__init__ = _local_only  # type: ignore[method-assign]
    sys.argv[0] = "lm_eval"
    sys.exit(cli_evaluate())
