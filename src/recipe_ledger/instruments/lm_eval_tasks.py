"""lm-evaluation-harness task folders, read before any launch: the one owner of the task-file format.

A task folder is what lm-eval's ``--include_path`` indexes: YAML files (each ``task: NAME`` one
task; files without one are bases that others ``include:``), local data files and the Python
modules their ``!function`` tags name. The lm_eval instrument runs lm-eval inside the folder, so a
relative ``data_files`` path is relative to it.

What is refused here, at file:line (exit 2), rather than after a launch:

- a YAML file that does not parse (lm-eval reads YAML 1.1, as ``spec.yamlfile.load_yaml_11`` does),
  a task defined twice, an ``include:`` that is missing or loops;
- a task lm-eval could not run offline against a server sending text: an ``output_type`` other
  than ``generate_until`` (the others score prompt log-probabilities, which need a tokenizer and
  tokenized requests), a dataset from a hub (only local files: ``dataset_path: json`` (or csv,
  parquet, text, arrow) with ``dataset_kwargs: {data_files: ...}``, or a ``custom_dataset``
  function), a data file or ``!function`` module that is not there;
- a task whose item outcome is not 0/1: without ``process_results`` its first metric must be
  ``exact_match`` (any other name sends lm-eval to a hub's metric library).

Each task's *item metric* is its first ``metric_list`` entry under its first filter (lm-eval's
``<metric>,<filter>`` result key; ``none`` without filters): the instrument reads that per document.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipe_ledger.errors import InputError
from recipe_ledger.spec.yamlfile import LocalTag, YamlDoc, load_yaml_11

LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow"})
GENERATE = "generate_until"
DEFAULT_METRIC = "exact_match"  # lm-eval's default for generate_until, computed locally
NO_FILTER = "none"  # lm-eval's filter name when a task has no filter_list
FUNCTION_TAG = "!function"
MAX_INCLUDES = 16  # deeper than any real chain of bases; a loop stops here too
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_SKIPPED_DIRS = frozenset({"__pycache__", ".ipynb_checkpoints"})
FORMAT_HINT = "docs/instruments.md (lm_eval: task files) says what a task file may hold"


@dataclass(frozen=True)
class TaskFile:
    """One task as lm-eval will read it: its YAML merged over its includes, and what it judges by."""

    name: str
    path: Path
    config: dict[str, Any]
    doc: YamlDoc  # the task's own file, for lines
    metric: str  # the item metric: the first metric_list entry
    filter: str  # under the first filter (``none`` without filters)
    docs: int | None  # documents in its evaluation split, when the data file says (json lines, csv)

    @property
    def result_key(self) -> str:
        """The key of its score in lm-eval's results JSON (``exact_match,number``)."""
        return f"{self.metric},{self.filter}"


@dataclass(frozen=True)
class TaskFolder:
    path: Path
    tasks: Mapping[str, TaskFile]
    files: Sequence[Path] = field(default_factory=tuple)  # every file the folder holds, sorted

    def sha256(self) -> str:
        """One hash of every file of the folder (names and contents): a changed task, data file or
        judge is a different instrument. Sorted by relative path, so file order never matters."""
        digest = hashlib.sha256()
        for path in self.files:
            digest.update(path.relative_to(self.path).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
        return "sha256:" + digest.hexdigest()

    def select(self, names: Sequence[str], shown: str) -> list[TaskFile]:
        """The named tasks, in the order given; an InputError naming what the folder has otherwise."""
        missing = [name for name in names if name not in self.tasks]
        if missing:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise InputError(
                f"no task {', '.join(map(repr, missing))} in the task folder (it has: {known})",
                where=shown,
                hint="options.tasks names tasks of options.task_dir (a task file's `task:` key)",
            )
        return [self.tasks[name] for name in names]


def read_task_folder(folder: Path, shown: str) -> TaskFolder:
    """Every YAML file of ``folder`` read and every task in it checked; InputError at file:line."""
    if not folder.is_dir():
        raise InputError(
            "no such task folder", where=shown, hint="options.task_dir is relative to the repository"
        )
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not _skipped(p.relative_to(folder)))
    docs = {
        path: load_yaml_11(path, _shown(path, folder, shown))
        for path in files
        if path.suffix in (".yaml", ".yml")
    }
    tasks: dict[str, TaskFile] = {}
    for doc in docs.values():
        task = _task_of(doc, folder, shown)
        if task is None:
            continue
        if task.name in tasks:
            first = tasks[task.name].doc.where(("task",))
            raise InputError(
                f"task {task.name!r} is defined twice (first at {first})", where=doc.where(("task",))
            )
        tasks[task.name] = task
    return TaskFolder(folder, tasks, tuple(files))


def _skipped(relative: Path) -> bool:
    return any(part in _SKIPPED_DIRS or part.startswith(".") for part in relative.parts)


def _shown(path: Path, folder: Path, shown: str) -> str:
    return f"{shown.rstrip('/')}/{path.relative_to(folder).as_posix()}"


def _task_of(doc: YamlDoc, folder: Path, shown: str) -> TaskFile | None:
    """The task ``doc`` defines (``task: NAME``), checked, or None for a base or a group file."""
    if not isinstance(doc.data, dict):
        raise InputError(
            "a task file holds a mapping (task:, dataset_path:, ...)", where=doc.where(), hint=FORMAT_HINT
        )
    name = doc.data.get("task")
    if not isinstance(name, str):
        return None  # a base others include, or a group (a list of tasks): not selectable by name
    if not _TASK_NAME.match(name):
        raise InputError(
            f"task name {name!r}: letters, digits, '_', '.', '-' (it names metrics and items)",
            where=doc.where(("task",)),
        )
    config = merged_config(doc, folder, shown)
    check_task(doc, config, folder)
    metric, filter_name = item_metric(config)
    return TaskFile(name, doc.path, config, doc, metric, filter_name, count_docs(config, folder))


def merged_config(doc: YamlDoc, folder: Path, shown: str, depth: int = 0) -> dict[str, Any]:
    """The task's keys over those of the files it ``include:``s (relative to its own file), as
    lm-eval merges them (the including file wins)."""
    data = dict(doc.data)
    include = data.pop("include", None)
    if include is None:
        return data
    if depth >= MAX_INCLUDES:
        raise InputError(
            f"include: nested more than {MAX_INCLUDES} deep (a loop?)", where=doc.where(("include",))
        )
    if not isinstance(include, str):
        raise InputError("include: names one YAML file", where=doc.where(("include",)))
    path = (doc.path.parent / include).resolve()
    if not path.is_file():
        raise InputError(f"include: no such file {include!r}", where=doc.where(("include",)))
    display = _shown(path, folder.resolve(), shown) if path.is_relative_to(folder.resolve()) else str(path)
    base = load_yaml_11(path, display)
    if not isinstance(base.data, dict):
        raise InputError("an included file holds a mapping", where=base.where())
    return {**merged_config(base, folder, shown, depth + 1), **data}


def check_task(doc: YamlDoc, config: Mapping[str, Any], folder: Path) -> None:
    """What lm-eval would fail on mid-run, or do against the rules (a hub), refused now."""
    output_type = config.get("output_type", GENERATE)
    if output_type != GENERATE:
        raise InputError(
            f"output_type {output_type!r}: only generate_until tasks (the others score prompt "
            "log-probabilities, which need a tokenizer; this instrument sends text)",
            where=doc.where(("output_type",)),
            hint="rewrite the task as generate_until with a filter and exact_match",
        )
    _check_dataset(doc, config, folder)
    _check_functions(doc, config)
    _check_aggregation(doc, config)
    if config.get("process_results") is None:
        metric, _ = item_metric(config)
        if metric != DEFAULT_METRIC:
            raise InputError(
                f"metric {metric!r} without process_results: lm-eval would fetch it from a hub; "
                f"use {DEFAULT_METRIC} or a process_results function returning 0/1",
                where=doc.where(("metric_list",)),
            )


def _check_aggregation(doc: YamlDoc, config: Mapping[str, Any]) -> None:
    """An accuracy is the mean of its items: a task whose first metric aggregates otherwise would
    report a number its items do not give."""
    metrics = config.get("metric_list")
    first = metrics[0] if isinstance(metrics, list) and metrics else None
    aggregation = first.get("aggregation", "mean") if isinstance(first, dict) else "mean"
    if aggregation != "mean":
        raise InputError(
            f"the first metric aggregates by {aggregation!r}: an accuracy is the mean of 0/1 items",
            where=doc.where(("metric_list", 0, "aggregation")),
        )


def _check_dataset(doc: YamlDoc, config: Mapping[str, Any], folder: Path) -> None:
    if config.get("custom_dataset") is not None:
        return  # a function of the folder builds it (checked with the other functions)
    builder = config.get("dataset_path")
    if builder not in LOCAL_BUILDERS:
        raise InputError(
            f"dataset_path {builder!r} is not a local file builder: the instrument runs offline "
            f"(HF_DATASETS_OFFLINE=1); use one of {', '.join(sorted(LOCAL_BUILDERS))} with "
            "dataset_kwargs: {data_files: ...}",
            where=doc.where(("dataset_path",)),
        )
    for relative in data_files(config):
        if not (folder / relative).is_file():
            raise InputError(
                f"data file {relative!r} is not in the task folder (paths are relative to it)",
                where=doc.where(("dataset_kwargs", "data_files")),
            )
    if not data_files(config):
        raise InputError(
            "dataset_kwargs.data_files names no file", where=doc.where(("dataset_kwargs",)), hint=FORMAT_HINT
        )
    _check_split(doc, config)


def _check_split(doc: YamlDoc, config: Mapping[str, Any]) -> None:
    """The split lm-eval evaluates (test_split, else validation_split) is one the data files make:
    a map's keys, or ``train`` for a bare file or list."""
    split = config.get("test_split") or config.get("validation_split")
    if not isinstance(split, str):
        raise InputError(
            "no test_split (or validation_split): lm-eval evaluates that split",
            where=doc.where(("task",)),
            hint="add test_split: test with dataset_kwargs: {data_files: {test: FILE}}",
        )
    files = config["dataset_kwargs"]["data_files"]
    made = sorted(files) if isinstance(files, dict) else ["train"]
    if split not in made:
        key = "test_split" if config.get("test_split") else "validation_split"
        raise InputError(
            f"{key} {split!r} is not a split the data files make ({', '.join(made)})",
            where=doc.where((key,)),
        )


def data_files(config: Mapping[str, Any]) -> list[str]:
    """Every file ``dataset_kwargs.data_files`` names (a string, a list, or a split -> files map)."""
    kwargs = config.get("dataset_kwargs")
    files = kwargs.get("data_files") if isinstance(kwargs, dict) else None
    values = list(files.values()) if isinstance(files, dict) else [files]
    flat: list[str] = []
    for value in values:
        flat += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    return flat


def _check_functions(doc: YamlDoc, config: Mapping[str, Any]) -> None:
    """Every ``!function module.name`` names a module file beside the task file."""
    for tag in _local_tags(config):
        if tag.tag != FUNCTION_TAG:
            raise InputError(
                f"unknown tag {tag.tag} (lm-eval reads !function)", where=f"{doc.display_path}:{tag.line}"
            )
        module, _, function = tag.value.rpartition(".")
        if not module or not function:
            raise InputError(
                f"!function {tag.value!r}: write module.function", where=f"{doc.display_path}:{tag.line}"
            )
        if not (doc.path.parent / f"{module.replace('.', '/')}.py").is_file():
            raise InputError(
                f"!function {tag.value!r}: no {module.replace('.', '/')}.py beside the task file",
                where=f"{doc.display_path}:{tag.line}",
            )


def _local_tags(value: object) -> list[LocalTag]:
    if isinstance(value, LocalTag):
        return [value]
    if isinstance(value, dict):
        return [tag for item in value.values() for tag in _local_tags(item)]
    if isinstance(value, list):
        return [tag for item in value for tag in _local_tags(item)]
    return []


def item_metric(config: Mapping[str, Any]) -> tuple[str, str]:
    """(metric, filter) a task's items are scored by: its first metric under its first filter."""
    metrics = config.get("metric_list")
    first = metrics[0] if isinstance(metrics, list) and metrics else None
    metric = first.get("metric") if isinstance(first, dict) else None
    filters = config.get("filter_list")
    first_filter = filters[0] if isinstance(filters, list) and filters else None
    filter_name = first_filter.get("name") if isinstance(first_filter, dict) else None
    return (
        metric if isinstance(metric, str) else DEFAULT_METRIC,
        filter_name if isinstance(filter_name, str) else NO_FILTER,
    )


def evaluation_split_file(config: Mapping[str, Any]) -> str | None:
    """The data file of the split lm-eval evaluates (test, else validation), when one file is it."""
    kwargs = config.get("dataset_kwargs")
    files = kwargs.get("data_files") if isinstance(kwargs, dict) else None
    split = config.get("test_split") or config.get("validation_split")
    chosen = files.get(split) if isinstance(files, dict) else files if split == "train" else None
    return chosen if isinstance(chosen, str) else None


def count_docs(config: Mapping[str, Any], folder: Path) -> int | None:
    """Documents in the evaluation split's file: JSON lines (or one JSON array), csv rows; None when
    the file does not say (parquet, a function-built dataset), which only loosens a time bound."""
    relative = evaluation_split_file(config)
    builder = config.get("dataset_path")
    if relative is None or config.get("custom_dataset") is not None:
        return None
    try:
        text = (folder / relative).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    if builder == "json" and text.lstrip().startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return len(value) if isinstance(value, list) else None
    if builder == "json" or builder == "text":
        return len(lines)
    if builder == "csv":
        return max(len(lines) - 1, 0)
    return None
