"""AIPerf's public datasets as the installed AIPerf registers them, and where each must lie for a
run without network.

AIPerf 0.13.0 names its public datasets in its plugin registry (``aiperf/plugin/plugins.yaml``,
section ``public_dataset_loader``; ``aiperf plugins public_dataset_loader`` prints it) and fetches
them when a run starts, in one of two ways:

- from Hugging Face: ``datasets.load_dataset(hf_dataset_name, name=hf_subset, split=hf_split)``
  (``aiperf/dataset/loader/base_hf_dataset.py``). The client runs with ``HF_HUB_OFFLINE=1``; then
  the ``datasets`` library loads only its prepared copy, any directory
  ``<HF_DATASETS_CACHE>/<namespace>___<name>/<config>/<version>/<hash>``
  (``datasets/load.py``, ``CachedDatasetModuleFactory``);
- over HTTP: one file, kept at ``.cache/aiperf/datasets/<filename>`` under AIPerf's working
  directory (``aiperf/dataset/loader/base_public_dataset.py``, ``AIPERF_DATASET_CACHE_DIR``), which
  the replay makes the repository. ShareGPT and SpecBench are these.

AIPerf takes no local path for a public dataset; these caches are the only places it reads offline.
The box has no network at run time, so a dataset missing from its place is refused before any
launch, with the path to put it at and the command that fetches it where there is network.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipe_ledger.errors import InputError
from recipe_ledger.spec.yamlfile import parse_yaml_text

REGISTRY = Path("aiperf") / "plugin" / "plugins.yaml"
SECTION = "public_dataset_loader"
# AIPerf's HTTP cache, relative to its working directory (base_public_dataset.py).
HTTP_CACHE = Path(".cache") / "aiperf" / "datasets"


@dataclass(frozen=True)
class PublicDataset:
    """One entry of AIPerf's registry: what it downloads, from where."""

    name: str
    hf_dataset: str | None = None  # a Hugging Face dataset id; None: an HTTP download (url, filename)
    hf_subset: str | None = None
    hf_split: str = "train"
    url: str | None = None
    filename: str | None = None
    is_trace: bool = False  # hash ids AIPerf turns into prompts itself (the Weka traces)


def registry_path(aiperf_bin: str) -> Path | None:
    """The registry of the AIPerf a venv's ``bin/aiperf`` belongs to; None outside a venv."""
    venv = Path(aiperf_bin).resolve().parent.parent
    found = sorted(venv.glob(f"lib/python3*/site-packages/{REGISTRY}"))
    return found[0] if found else None


def read_registry(path: Path) -> dict[str, PublicDataset]:
    """Every public dataset the registry at ``path`` names. An HTTP loader's address and file name
    are class attributes in its module (``url = "..."``, ``filename = "..."``), read as text: the
    replay runs in another venv and never imports AIPerf."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read AIPerf's dataset registry: {exc.strerror}", where=str(path)) from None
    entries = (parse_yaml_text(text, str(path)) or {}).get(SECTION) or {}  # bad YAML: a SpecError at its line
    site = path.parents[len(REGISTRY.parts) - 1]
    return {name: _entry(name, entry or {}, site) for name, entry in entries.items()}


def _entry(name: str, entry: Mapping, site: Path) -> PublicDataset:
    meta = entry.get("metadata") or {}
    if meta.get("hf_dataset_name"):
        return PublicDataset(
            name,
            hf_dataset=str(meta["hf_dataset_name"]),
            hf_subset=meta.get("hf_subset"),
            hf_split=str(meta.get("hf_split") or "train"),
            is_trace=bool(meta.get("is_trace")),
        )
    module = str(entry.get("class", "")).split(":")[0]
    source = site.joinpath(*module.split(".")).with_suffix(".py")
    text = source.read_text() if source.is_file() else ""
    url = re.search(r'^\s+url = "([^"]+)"', text, re.MULTILINE)
    filename = re.search(r'^\s+filename = "([^"]+)"', text, re.MULTILINE)
    return PublicDataset(
        name,
        url=url.group(1) if url else None,
        filename=filename.group(1) if filename else None,
        is_trace=bool(meta.get("is_trace")),
    )


def lookup(registry: Mapping[str, PublicDataset], name: str, where: str) -> PublicDataset:
    """The entry ``name`` names (AIPerf's CLI takes ``a-b`` for ``a_b`` too), or an InputError
    listing the names this AIPerf has."""
    found = registry.get(name.replace("-", "_"))
    if found is None:
        raise InputError(
            f"AIPerf has no public dataset {name!r}; it has: {', '.join(sorted(registry))}",
            where=where,
            hint=".venv-aiperf/bin/aiperf plugins public_dataset_loader  (describes each)",
        )
    return found


def hf_datasets_cache(env: Mapping[str, str]) -> Path:
    """Where the ``datasets`` library keeps prepared datasets for a process with ``env``
    (``datasets/config.py``: HF_DATASETS_CACHE, else HF_HOME/datasets, else XDG_CACHE_HOME's)."""
    if env.get("HF_DATASETS_CACHE"):
        return Path(env["HF_DATASETS_CACHE"]).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "datasets"


def _snake(name: str) -> str:
    """``datasets.naming.camelcase_to_snakecase``: how the cache names a dataset's directory."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()


def offline_place(dataset: PublicDataset, repo: Path, env: Mapping[str, str]) -> Path | None:
    """Where AIPerf finds ``dataset`` without network: the prepared directory's root (Hugging
    Face) or the file (HTTP); None when the registry does not say where it comes from."""
    if dataset.hf_dataset:
        parts = dataset.hf_dataset.split("/")
        return hf_datasets_cache(env) / "___".join([*parts[:-1], _snake(parts[-1])])
    if dataset.filename:
        return repo / HTTP_CACHE / dataset.filename
    return None


def is_present(dataset: PublicDataset, place: Path) -> bool:
    if dataset.hf_dataset:
        return any(p.is_dir() for p in place.glob("*/*/*"))  # <config>/<version>/<hash>, as datasets looks
    return place.is_file() and place.stat().st_size > 0


def fetch_command(dataset: PublicDataset, place: Path) -> str:
    """The command that puts ``dataset`` at ``place`` on a machine with network (then copy it here)."""
    if dataset.hf_dataset:
        subset = f", name={dataset.hf_subset!r}" if dataset.hf_subset else ""
        # Not streaming: only a full load prepares the copy an offline load finds.
        return (
            f'HF_DATASETS_CACHE={place.parent} .venv-aiperf/bin/python -c "import datasets; '
            f'datasets.load_dataset({dataset.hf_dataset!r}{subset}, split={dataset.hf_split!r})"'
        )
    return f"curl -L --create-dirs -o {place} {dataset.url}"


def require_offline(dataset: PublicDataset, repo: Path, env: Mapping[str, str], where: str) -> Path:
    """The dataset's offline place when it is there; else an InputError with the path and the
    command that fetches it, before any launch (AIPerf would fail after the server's boot)."""
    place = offline_place(dataset, repo, env)
    if place is None:
        raise InputError(
            f"AIPerf's registry does not say where public dataset {dataset.name!r} comes from "
            "(no hf_dataset_name, no url in its loader): it cannot be checked offline",
            where=where,
            hint="name one whose source the registry names (a pinned alias), or give the data as a trace",
        )
    if not is_present(dataset, place):
        what = "a prepared copy under" if dataset.hf_dataset else "the file"
        raise InputError(
            f"public dataset {dataset.name!r} is not on this box ({what} {place}); the box has no "
            "network at run time, and AIPerf would fail only after the server's boot",
            where=where,
            hint=f"where there is network: `{fetch_command(dataset, place)}`, then copy it to {place} here",
        )
    return place
