"""The plain-command instrument: a script that prints JSON metrics, for studies with no server
(GPU microbenchmarks, for example). Its argv template receives {arm}, {point}, {repeat}, {seed},
{out} (a file path it may write) and {base_url}."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from recipe_ledger.instruments import template as templates
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    MeasureContext,
    Measurement,
    PointRun,
    last_json_object,
    numeric_only,
    run_client,
    sha256_file,
)
from recipe_ledger.redact import redact_text

NAME = "command"


def fill_template(template: list[str], ctx: MeasureContext, out_file: Path) -> list[str]:
    """``template`` with its plain ``{name}`` fields filled: never ``str.format``, which would obey
    a format spec such as ``{arm:>1500000000}`` (instruments.template)."""
    values = {
        **dict(ctx.params),
        "arm": ctx.arm,
        "point": ctx.point,
        "repeat": ctx.repeat,
        "seed": ctx.seed,
        "out": str(out_file),
        "base_url": ctx.base_url or "",
    }
    try:
        return [templates.render(part, values) for part in template]
    except KeyError as exc:
        raise InstrumentError(
            f"command template names an unknown field {exc}",
            hint="use {arm} {point} {repeat} {seed} {out} {base_url}",
        ) from None
    except templates.TemplateError as exc:  # the spec refuses these when it loads; this is the last guard
        raise InstrumentError(f"command template {exc}", hint="use plain {name} fields") from None


def template_version(template: list[str], root: Path) -> str:
    """A command instrument is identified by its template and the content of the script it runs."""
    digest = hashlib.sha256(" ".join(template).encode())
    for part in template:
        path = root / part
        if path.is_file():
            digest.update(path.read_bytes())
    return "command:" + digest.hexdigest()[:16]


def measure(
    template: list[str],
    ctx: MeasureContext,
    *,
    env: dict[str, str] | None = None,
    root: Path = Path("."),
    timeout_s: float = 1800,
) -> Measurement:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    out_file = ctx.out_dir / f"{ctx.stem}.out.json"
    log = ctx.out_dir / f"{ctx.stem}.stdout.log"
    argv = fill_template(template, ctx, out_file)
    wall = run_client(argv, env={**os.environ, **(env or {})}, log_path=log, timeout_s=timeout_s)
    # The log is the raw record the entry pins by hash: redact it before it is hashed, since a
    # pinned file can never be rewritten afterwards.
    text = redact_text(log.read_text(errors="replace"))
    log.write_text(text)
    metrics = numeric_only(last_json_object(text))
    if not metrics:
        raise InstrumentError("the command printed a JSON object with no numeric metric", where=str(log))
    return Measurement(
        NAME, template_version(template, root), ctx, metrics, log, sha256_file(log), wall, argv
    )


class Command(InstrumentKind):
    kind = NAME
    client = "command"
    summary = "a script printing JSON metrics"
    needs_server = False  # a study's microbenchmark measures no server
    needs_command = True

    def measure(self, run: PointRun) -> Measurement:
        # The script runs with the arm's environment on top of this one's, not the bench clients'.
        return measure(list(run.spec.command or []), run.ctx, env=run.arm_env, root=run.repo)


INSTRUMENT = Command()
