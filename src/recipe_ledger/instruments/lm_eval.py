"""Task accuracy through lm-evaluation-harness (kind ``lm_eval``): does the candidate still answer
*correctly*, not only the same?

lm-eval's own CLI (``.venv-eval/bin/lm_eval run``, scripts/setup_eval_venv.sh) asks the arm's
server through its OpenAI ``local-completions`` (or ``local-chat-completions``) model: text in, text
out (``tokenized_requests=False``, ``tokenizer_backend=none``), so it loads no tokenizer and
reaches no hub (HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1). The tasks come from a local folder
(``lm_eval_tasks`` reads and checks it before any launch): by default the shipped three of
``evals/tasks`` (arithmetic, a tool-call format, a reasoning budget that fails an empty answer).
``options.tasks``/``task_dir`` name a user's own.

Each task's documents are the items: ``<task>/<doc_id>`` -> 1 when the task's own judge (its first
metric under its first filter) scored the answer correct, else 0, read from lm-eval's per-sample
JSON lines; ``eval_accuracy`` is their mean over every task (a quality bar pairs its items across
arms). Unlike agreement there is no reference: every measurement, the control's first included,
is evidence on its own. The Wilson interval of the accuracy is kept as metrics (overall) and facts
(per task).

Raw files: ``<stem>.lm_eval/`` (lm-eval's results JSON, hashed as the raw file, and a samples file
per task, hashed into the facts) and ``<stem>.lm_eval.log``. lm-eval exiting non-zero (a server
error after its retries, a timeout, a task that fails), or leaving no results or samples, fails the
point with the log's tail; it is never read as an accuracy.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from recipe_ledger import paths, quality
from recipe_ledger.errors import InputError
from recipe_ledger.instruments import base
from recipe_ledger.instruments.base import (
    InstrumentError,
    InstrumentKind,
    InstrumentSpec,
    MeasureContext,
    Measurement,
    PointRun,
    run_client,
    sha256_file,
    venv_distribution_version,
)
from recipe_ledger.instruments.lm_eval_tasks import TaskFile, TaskFolder, read_task_folder

NAME = "lm_eval"
SETUP_HINT = "scripts/setup_eval_venv.sh  (or ./dev serve-setup)"
DRIVER = "lm_eval_local.py"  # under scripts/: lm-eval's CLI with only the task folder indexed
OPTIONS_HINT = "docs/instruments.md lists the lm_eval instrument's options"
SHIPPED_TASK_DIR = "evals/tasks"
SHIPPED_TASKS = ("rl_arith", "rl_toolcall_format", "rl_reasoning_budget")
ACCURACY = "eval_accuracy"  # the item metric: every task's documents together
ACCURACY_LOW, ACCURACY_HIGH = "eval_accuracy_low", "eval_accuracy_high"
ITEMS = "eval_items"
_OWN_METRICS = frozenset({ACCURACY, ACCURACY_LOW, ACCURACY_HIGH, ITEMS})
TASK_ACCURACY_SUFFIX = "_accuracy"  # <task>_accuracy: one task's share (metrics.lookup's fallback)
CONFIDENCE = 0.95  # of the Wilson intervals
ENDPOINTS = {"local-completions": "/v1/completions", "local-chat-completions": "/v1/chat/completions"}
MAX_RETRIES = 3  # lm-eval's default, said here because the time bound counts it
STARTUP_S = 300.0  # lm-eval's start (imports, the task files' datasets cache), slack for a busy box
RETRY_WAIT_S = 10.0  # the longest wait lm-eval's retries (tenacity, exponential) take between tries
UNCOUNTED_DOCS = 10_000  # a task whose data file does not say its size (parquet): the bound's guess
# No hub, ever: lm-eval and datasets read only the task folder; no token reaches either.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
DROPPED_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


class LmEvalOptions(BaseModel):
    """An ``lm_eval`` instrument's options (experiment YAML ``options:``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tasks: list[str] = Field(
        default_factory=lambda: list(SHIPPED_TASKS),
        min_length=1,
        description="Task names of task_dir (a task file's `task:`); default: the shipped three.",
    )
    task_dir: str = Field(
        default=SHIPPED_TASK_DIR,
        description="A folder of lm-eval task YAMLs and their local data, repository-relative.",
    )
    limit: int | None = Field(default=None, ge=1, description="The first N documents of each task.")
    model: Literal["local-completions", "local-chat-completions"] = Field(
        default="local-completions",
        description="lm-eval's API model: /v1/completions, or /v1/chat/completions with the "
        "server's chat template (--apply_chat_template).",
    )
    num_concurrent: int | None = Field(
        default=None, ge=1, le=1024, description="Requests in flight; default: the point's concurrency."
    )
    max_gen_toks: int | None = Field(
        default=None,
        ge=1,
        le=65536,
        description="Every task's generation budget, over the task's own (lm-eval --gen_kwargs).",
    )
    timeout_s: float = Field(default=300.0, gt=0, le=3600, description="Per request (lm-eval's timeout).")

    @field_validator("tasks")
    @classmethod
    def _each_once(cls, tasks: list[str]) -> list[str]:
        repeated = sorted({task for task in tasks if tasks.count(task) > 1})
        if repeated:
            raise PydanticCustomError("same_task", "listed twice: {tasks}", {"tasks": ", ".join(repeated)})
        return tasks


def parse_options(options: Mapping[str, Any], instrument: str = NAME) -> LmEvalOptions:
    return base.parse_options(LmEvalOptions, options, instrument, OPTIONS_HINT)


# --- the client and the tasks ---------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    """lm-eval's CLI as this instrument starts it: the eval venv's python and the script that runs
    lm-eval's ``cli_evaluate`` with the task index limited to the task folder."""

    python: Path
    driver: Path

    def argv(self) -> list[str]:
        # Absolute: lm-eval runs inside the task folder, where a relative path would name nothing.
        return [str(self.python.absolute()), str(self.driver.absolute())]

    def version(self) -> str:
        found = venv_distribution_version(self.python, "lm_eval")
        return f"lm-eval {found or 'unknown'}"


def find_client(repo: Path) -> Client:
    """The eval venv's python ($RECIPE_LEDGER_EVAL_PYTHON, else the project's .venv-eval) and
    ``scripts/lm_eval_local.py``."""
    override = os.environ.get("RECIPE_LEDGER_EVAL_PYTHON")
    python = Path(override) if override else repo / ".venv-eval" / "bin" / "python"
    return Client(python, repo / "scripts" / DRIVER)


def require_client(client: Client) -> None:
    """lm-eval's venv and the client script are there; an InputError with the set-up command."""
    if not (client.python.is_file() and os.access(client.python, os.X_OK)):
        raise InputError(f"lm-evaluation-harness is not installed (no {client.python})", hint=SETUP_HINT)
    if client.version() == "lm-eval unknown":
        raise InputError(f"{client.python} has no lm_eval installed", hint=SETUP_HINT)
    if not client.driver.is_file():
        raise InputError(
            f"no {client.driver}: the lm_eval instrument's client script", hint="git status scripts/"
        )


@dataclass(frozen=True)
class Selected:
    """The tasks one measurement runs, from which folder, under which hash."""

    folder: TaskFolder
    tasks: tuple[TaskFile, ...]
    shown: str  # the folder as options.task_dir wrote it

    def instrument_version(self, client: Client) -> str:
        # Another lm-eval, task file, data file or judge is another instrument: not comparable.
        return f"{client.version()} tasks:{self.folder.sha256().removeprefix('sha256:')[:12]}"


def select_tasks(options: LmEvalOptions, repo: Path) -> Selected:
    """The options' tasks read and checked from their folder (InputError at file:line)."""
    folder = paths.contained(repo, options.task_dir)
    read = read_task_folder(folder, options.task_dir)
    tasks = tuple(read.select(options.tasks, options.task_dir))
    clash = next((task for task in tasks if task.name + TASK_ACCURACY_SUFFIX in _OWN_METRICS), None)
    if clash is not None:
        raise InputError(
            f"task {clash.name!r}: its metric {clash.name}{TASK_ACCURACY_SUFFIX} would be the overall one",
            where=clash.doc.where(("task",)),
            hint="rename the task",
        )
    return Selected(read, tasks, options.task_dir)


# --- the command ----------------------------------------------------------------------------------


def concurrency(options: LmEvalOptions, ctx: MeasureContext) -> int:
    return options.num_concurrent or max(1, ctx.client_concurrency)


def model_args(options: LmEvalOptions, ctx: MeasureContext) -> list[str]:
    """lm-eval's ``--model_args``, one ``key=value`` each; strings quoted as Python literals
    (lm-eval reads each value with ast.literal_eval: a model named ``1.5`` stays a name)."""
    url = str(ctx.base_url).rstrip("/") + ENDPOINTS[options.model]
    args = [f"base_url={json.dumps(url)}"]
    if ctx.model_name:
        args.append(f"model={json.dumps(ctx.model_name)}")
    return args + [
        f"num_concurrent={concurrency(options, ctx)}",
        "tokenized_requests=False",
        "tokenizer_backend=none",
        f"timeout={math.ceil(options.timeout_s)}",
        f"max_retries={MAX_RETRIES}",
        f"seed={ctx.seed}",
    ]


def build_argv(
    client: Client, options: LmEvalOptions, ctx: MeasureContext, selected: Selected, output: Path
) -> list[str]:
    argv = [*client.argv(), "run", "--model", options.model, "--model_args", *model_args(options, ctx)]
    argv += ["--tasks", *(task.name for task in selected.tasks)]
    argv += ["--include_path", str(selected.folder.path.resolve()), "--output_path", str(output.resolve())]
    argv += ["--log_samples", "--seed", str(ctx.seed)]
    if options.limit is not None:
        argv += ["--limit", str(options.limit)]
    if options.max_gen_toks is not None:
        argv += ["--gen_kwargs", f"max_gen_toks={options.max_gen_toks}"]
    if options.model == "local-chat-completions":
        argv.append("--apply_chat_template")  # lm-eval sends chat messages only with it
    return argv


def lm_eval_env(env: Mapping[str, str], base_url: str | None, hf_home: Path) -> dict[str, str]:
    """The client's environment: offline, its own datasets cache, no token, and the server's host
    past any proxy (lm-eval's requests honour http_proxy; the server is the run's own)."""
    out = {key: value for key, value in env.items() if key not in DROPPED_ENV}
    host = urllib.parse.urlsplit(base_url or "").hostname or "127.0.0.1"
    no_proxy = ",".join(
        filter(None, [out.get("NO_PROXY") or out.get("no_proxy"), host, "127.0.0.1", "localhost"])
    )
    return {**out, **OFFLINE_ENV, "HF_HOME": str(hf_home), "NO_PROXY": no_proxy, "no_proxy": no_proxy}


def time_bound(options: LmEvalOptions, ctx: MeasureContext, tasks: Sequence[TaskFile]) -> float:
    """Seconds the whole run may take: every request timing out on every retry, ``concurrency`` at
    a time, plus lm-eval's start. Finite, so a stuck client ends; never below an honest run."""
    requests = sum(min(options.limit or UNCOUNTED_DOCS, task.docs or UNCOUNTED_DOCS) for task in tasks)
    rounds = math.ceil(requests / concurrency(options, ctx))
    return STARTUP_S + rounds * MAX_RETRIES * (options.timeout_s + RETRY_WAIT_S)


# --- lm-eval's output -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    results: Path  # <output>/<model>/results_<date>.json
    samples: dict[str, Path]  # task -> <output>/<model>/samples_<task>_<date>.jsonl


def output_files(output: Path, tasks: Sequence[TaskFile], log: Path) -> Output:
    """The results file and each task's samples file lm-eval wrote; an InstrumentError with the
    log's tail when one is missing (lm-eval only warns when it cannot save them)."""
    found = sorted(output.glob("*/results_*.json"))
    if len(found) != 1:
        what = "no results file" if not found else f"{len(found)} results files"
        raise _unreadable(f"lm_eval exited 0 but left {what} under {output}", log)
    results = found[0]
    date = results.stem.removeprefix("results_")
    samples = {task.name: results.parent / f"samples_{task.name}_{date}.jsonl" for task in tasks}
    missing = [task for task, path in samples.items() if not path.is_file()]
    if missing:
        raise _unreadable(f"lm_eval left no samples for {', '.join(missing)} in {results.parent}", log)
    return Output(results, samples)


TRACEBACK = "Traceback (most recent call last):"


def last_line(text: str) -> str:
    """Why lm-eval stopped, from its log: the exception line of the last traceback (the first
    unindented line after it), else the last line that is not a progress bar."""
    if TRACEBACK in text:
        after = text.rsplit(TRACEBACK, 1)[1].splitlines()
        found = next((line for line in after if line.strip() and not line[0].isspace()), None)
        if found:
            return found.strip()[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip() and "it/s]" not in line]
    return lines[-1][:300] if lines else "no output"


def _unreadable(message: str, log: Path) -> InstrumentError:
    tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
    return InstrumentError(message, where=str(log), hint=f"read {log}", output_tail=tail)


def read_results(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InstrumentError(f"cannot read lm-eval's results: {exc}", where=str(path)) from None
    if not isinstance(document, dict) or not isinstance(document.get("results"), dict):
        raise InstrumentError("lm-eval's results JSON has no 'results' mapping", where=str(path))
    return document


def read_samples(path: Path) -> list[dict[str, Any]]:
    """lm-eval's per-document records, one JSON object a line; a bad line fails at file:line."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise InstrumentError(f"not JSON: {exc}", where=f"{path}:{number}") from None
        if not isinstance(record, dict):
            raise InstrumentError("not a JSON object", where=f"{path}:{number}")
        records.append(record)
    return records


def task_items(task: TaskFile, samples: Sequence[Mapping[str, Any]], where: str) -> dict[str, float]:
    """``<task>/<doc_id>`` -> the document's outcome under the task's item metric and filter."""
    items: dict[str, float] = {}
    for record in samples:
        if record.get("filter", task.filter) != task.filter:
            continue  # the same document under another of the task's filters
        doc_id, value = record.get("doc_id"), record.get(task.metric)
        item = f"{task.name}/{doc_id}"
        if not isinstance(doc_id, int) or isinstance(doc_id, bool):
            raise InstrumentError(f"a sample of {task.name} has no integer doc_id", where=where)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            raise InstrumentError(
                f"{item}: {task.metric} is {value!r}, not an outcome in [0, 1]",
                where=where,
                hint="a task's first metric must score each document 0 (wrong) or 1 (right)",
            )
        if item in items:
            raise InstrumentError(f"{item} is scored twice under filter {task.filter}", where=where)
        items[item] = float(value)
    if not items:
        raise InstrumentError(f"no sample of {task.name} under filter {task.filter!r}", where=where)
    return items


def check_against_results(
    task: TaskFile, items: Mapping[str, float], results: Mapping[str, Any], where: str
) -> None:
    """The task's score in the results JSON is the mean of its samples, over as many documents: a
    samples file of another run or filter would disagree."""
    scores = results["results"].get(task.name)
    score = scores.get(task.result_key) if isinstance(scores, dict) else None
    if not isinstance(score, (int, float)):
        raise InstrumentError(f"the results JSON has no {task.result_key} for {task.name}", where=where)
    mean = sum(items.values()) / len(items)
    effective = ((results.get("n-samples") or {}).get(task.name) or {}).get("effective")
    if abs(score - mean) > 1e-9 or (effective is not None and effective != len(items)):
        raise InstrumentError(
            f"{task.name}: results say {task.result_key} = {score} over {effective} documents, its samples "
            f"{mean} over {len(items)}",
            where=where,
        )


@dataclass(frozen=True)
class Outcome:
    metrics: dict[str, float]
    items: dict[str, dict[str, float]]
    facts: dict[str, str]


def accuracy_fact(correct: float, n: int) -> str:
    low, high = quality.wilson_interval(correct, n, CONFIDENCE)
    return f"{correct:g}/{n} = {correct / n:.3f} (Wilson {CONFIDENCE:.0%}: {low:.3f}-{high:.3f})"


def outcome(
    tasks: Sequence[TaskFile],
    results: Mapping[str, Any],
    samples: Mapping[str, Sequence[Mapping[str, Any]]],
    where: Mapping[str, str],
) -> Outcome:
    """Metrics, items and facts of one measurement from lm-eval's results and samples."""
    items: dict[str, float] = {}
    metrics: dict[str, float] = {}
    facts: dict[str, str] = {}
    for task in tasks:
        scored = task_items(task, samples[task.name], where[task.name])
        check_against_results(task, scored, results, where["results"])
        items |= scored
        metrics[task.name + TASK_ACCURACY_SUFFIX] = sum(scored.values()) / len(scored)
        facts[f"task {task.name}"] = f"{task.result_key}: " + accuracy_fact(sum(scored.values()), len(scored))
    correct = sum(items.values())
    low, high = quality.wilson_interval(correct, len(items), CONFIDENCE)
    metrics |= {
        ACCURACY: correct / len(items),
        ACCURACY_LOW: low,
        ACCURACY_HIGH: high,
        ITEMS: float(len(items)),
    }
    facts["eval_accuracy"] = accuracy_fact(correct, len(items))
    return Outcome(metrics, {ACCURACY: items}, facts)


def samples_sha256(output: Output) -> str:
    """One hash of the samples files, task by task in name order (they hold the items)."""
    digest = hashlib.sha256()
    for task in sorted(output.samples):
        digest.update(f"{task}\0{sha256_file(output.samples[task])}\n".encode())
    return "sha256:" + digest.hexdigest()


# --- one measurement ------------------------------------------------------------------------------


def measure(
    client: Client, options: Mapping[str, Any], ctx: MeasureContext, *, env: Mapping[str, str], repo: Path
) -> Measurement:
    """The tasks once against the server at ``ctx.base_url``; items per document."""
    require_client(client)
    parsed = parse_options(options)
    selected = select_tasks(parsed, repo)
    if not ctx.base_url:
        raise InstrumentError(
            f"{ctx.stem}: the lm_eval instrument needs a server to ask, and this point has none"
        )
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    output = ctx.out_dir / f"{ctx.stem}.lm_eval"
    shutil.rmtree(output, ignore_errors=True)  # a resumed run's half-written output is not this one
    log = ctx.out_dir / f"{ctx.stem}.lm_eval.log"
    argv = build_argv(client, parsed, ctx, selected, output)
    bound = time_bound(parsed, ctx, selected.tasks)
    with tempfile.TemporaryDirectory(prefix="lm-eval-hf-") as hf_home:
        env_now = lm_eval_env(env, ctx.base_url, Path(hf_home))
        try:
            wall = run_client(argv, env=env_now, log_path=log, timeout_s=bound, cwd=selected.folder.path)
        except subprocess.TimeoutExpired:
            raise _unreadable(f"lm_eval ran past its bound of {bound:.0f} s", log) from None
        except InstrumentError as exc:  # "python exited with 1": say which program, and why
            cause = last_line(exc.output_tail)
            raise _unreadable(f"lm_eval {exc.message.removeprefix('python ')}: {cause}", log) from None
    files = output_files(output, selected.tasks, log)
    results = read_results(files.results)
    samples = {task: read_samples(path) for task, path in files.samples.items()}
    where = {"results": str(files.results), **{task: str(path) for task, path in files.samples.items()}}
    measured = outcome(selected.tasks, results, samples, where)
    facts = {
        **measured.facts,
        "tasks": " ".join(task.name for task in selected.tasks),
        "task_dir": selected.shown,
        "task_files_sha256": selected.folder.sha256(),
        "samples_sha256": samples_sha256(files),
        "lm_eval_model": parsed.model,
    }
    return Measurement(
        NAME,
        selected.instrument_version(client),
        ctx,
        measured.metrics,
        files.results,
        sha256_file(files.results),
        wall,
        argv,
        facts,
        measured.items,
    )


class LmEval(InstrumentKind):
    kind = NAME
    client = "lm-evaluation-harness"
    summary = "task accuracy through lm-evaluation-harness on local task files (per-document items)"
    options_model = LmEvalOptions
    options_hint = OPTIONS_HINT
    extra_summary_metrics = (ACCURACY, ACCURACY_LOW, ACCURACY_HIGH)
    item_metrics = (ACCURACY,)

    def check_before_launch(self, spec: InstrumentSpec, repo: Path, max_model_len: int | None) -> None:
        """The options, every task file of the folder (parsed, at file:line), the named tasks
        there, and lm-eval installed: all before any launch."""
        select_tasks(parse_options(spec.options, spec.name), repo)
        require_client(find_client(repo))

    def measure(self, run: PointRun) -> Measurement:
        return measure(find_client(run.repo), run.spec.options, run.ctx, env=run.client_env, repo=run.repo)


INSTRUMENT = LmEval()
