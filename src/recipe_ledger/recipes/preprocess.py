"""Recipe YAML data -> the object the reference command builder actually receives.

The site's build script (scripts/build-recipes-api.mjs) does not hand the raw YAML to the
command builder. Before resolving it:

* js-yaml has already turned the document into JavaScript values: mapping keys are strings,
  there is one number type (so `1.0` is `1`), and objects iterate integer-like keys first;
* dates are normalised to "YYYY-MM-DD" strings;
* `hf_id` is derived from the file path (models/<org>/<repo>.yaml);
* `model.install` is replaced by the synthesised pip/docker install commands (plus the
  recipe's `dependencies`, which are then deleted from the top level).

Reproducing this matters for parity: the builder reads `model` (image, base args) after this
step, and JS value semantics decide how numbers and key order show up in the rendered command.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from pathlib import PurePosixPath
from typing import Any, TypeGuard

from recipe_ledger.recipes.shell import js_str

_ARRAY_INDEX = re.compile(r"^(?:0|[1-9][0-9]*)$")
_DEFAULT_IMAGE = "vllm/vllm-openai:latest"
_BASE_CUDA = "cu130"  # the build script's baseline CUDA flavour for install one-liners


# ---------------------------------------------------------------------------
# JS value semantics.


def js_key(key: Any) -> str:
    """A mapping key as js-yaml stores it: String(key)."""
    if isinstance(key, (_dt.date, _dt.datetime)):
        return _iso_date(key)  # rare; js-yaml would print Date#toString, a date is the honest reading
    return js_str(key)


def _is_array_index(key: str) -> bool:
    return bool(_ARRAY_INDEX.match(key)) and int(key) < 2**32 - 1


def js_ordered(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """A dict in JS property order: integer-like keys first (ascending), then insertion order."""
    indexed = sorted((kv for kv in items if _is_array_index(kv[0])), key=lambda kv: int(kv[0]))
    if not indexed:
        return dict(items)
    rest = [kv for kv in items if not _is_array_index(kv[0])]
    return dict(indexed + rest)


def _iso_date(value: _dt.date | _dt.datetime) -> str:
    """Date#toISOString().split("T")[0]: the UTC calendar date (js-yaml reads naive times as UTC)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC)
        return value.date().isoformat()
    return value.isoformat()


def to_js_values(value: Any) -> Any:
    """Deep-convert loaded YAML into the values JavaScript would hold after normalizeDates."""
    if isinstance(value, dict):
        return js_ordered([(js_key(k), to_js_values(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [to_js_values(v) for v in value]
    if isinstance(value, (_dt.date, _dt.datetime)):
        return _iso_date(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)  # JS has one number type: 8.0 is 8
    return value


# ---------------------------------------------------------------------------
# Install synthesis (what the site shows in its install block).


def _default_pip_command(nightly: bool) -> str:
    if nightly:
        return (
            "uv venv\nsource .venv/bin/activate\nuv pip install -U vllm --pre \\\n"
            f"  --extra-index-url https://wheels.vllm.ai/nightly/{_BASE_CUDA} \\\n"
            f"  --extra-index-url https://download.pytorch.org/whl/{_BASE_CUDA} \\\n"
            "  --index-strategy unsafe-best-match"
        )
    return "uv venv\nsource .venv/bin/activate\nuv pip install -U vllm --torch-backend auto"


def _is_cuda_map(value: Any) -> TypeGuard[dict[Any, Any]]:
    return isinstance(value, dict) and ("cu129" in value or "cu130" in value)


def _pick_cuda(cuda_map: dict) -> Any:
    return cuda_map.get(_BASE_CUDA) or cuda_map.get("cu129") or cuda_map.get("cu130") or _DEFAULT_IMAGE


def install_docker_image(model: dict) -> Any:
    """The NVIDIA image named by the install block's `docker pull` (cu130 pick from a CUDA map)."""
    override = model.get("docker_image")
    if not override:
        return _DEFAULT_IMAGE
    if isinstance(override, str):
        return override
    if not isinstance(override, dict):
        return _DEFAULT_IMAGE
    if any(k in override for k in ("nvidia", "amd", "tpu", "intel")):
        nvidia = override.get("nvidia")
        if isinstance(nvidia, str):
            return nvidia
        return _pick_cuda(nvidia) if _is_cuda_map(nvidia) else _DEFAULT_IMAGE
    return _pick_cuda(override) if _is_cuda_map(override) else _DEFAULT_IMAGE


def _truthy(value: Any) -> bool:
    return value not in (None, False, "", 0) if not isinstance(value, (dict, list)) else True


def _with_note(command: Any, note: Any) -> dict:
    return {"command": command, "note": note} if _truthy(note) else {"command": command}


def synthesize_install(recipe: dict) -> dict | None:
    """The rendered install commands: pip and docker unless set to false, plus `extras`."""
    raw_model = recipe.get("model")
    model = raw_model if isinstance(raw_model, dict) else {}
    config = model.get("install") if _truthy(model.get("install")) else {}
    config = config if isinstance(config, dict) else {}
    pip_cfg, docker_cfg = config.get("pip"), config.get("docker")
    nightly = model.get("nightly_required") is True
    out: dict[str, Any] = {}
    if pip_cfg is not False:
        version = model.get("min_vllm_version") if _truthy(model.get("min_vllm_version")) else ""
        default_note = f"vLLM {js_str(version)} isn't released yet — nightly required." if nightly else None
        command = _cfg_field(pip_cfg, "command") or _default_pip_command(nightly)
        out["pip"] = _with_note(command, _cfg_field(pip_cfg, "note") or default_note)
    if docker_cfg is not False:
        command = _cfg_field(docker_cfg, "command") or f"docker pull {js_str(install_docker_image(model))}"
        out["docker"] = _with_note(command, _cfg_field(docker_cfg, "note"))
    dependencies = recipe.get("dependencies")
    if isinstance(dependencies, list) and dependencies:
        out["extras"] = dependencies
    return out or None


def _cfg_field(cfg: Any, name: str) -> Any:
    """`cfg && cfg.name`, falsy values reading as absent."""
    if not _truthy(cfg) or not isinstance(cfg, dict):
        return None
    value = cfg.get(name)
    return value if _truthy(value) else None


# ---------------------------------------------------------------------------
# The whole step.


def hf_id_from_path(rel_path: str) -> str | None:
    """models/<org>/.../<repo>.yaml -> "<org>/<repo>" (None when the path has no org folder)."""
    parts = PurePosixPath(rel_path).parts
    if parts and parts[0] == "models":
        parts = parts[1:]
    if len(parts) < 2:
        return None
    return f"{parts[0]}/{re.sub(r'[.](yaml|yml)$', '', parts[-1])}"


def preprocess_recipe(data: Any, rel_path: str) -> dict:
    """Loaded YAML of one recipe (path relative to the recipes root) -> the builder's input."""
    recipe = to_js_values(data) if isinstance(data, dict) else {}
    hf_id = hf_id_from_path(rel_path)
    if hf_id is not None:
        recipe["hf_id"] = hf_id
    install = synthesize_install(recipe)
    model = recipe.get("model")
    if _truthy(model):
        rest = {k: v for k, v in model.items() if k != "install"} if isinstance(model, dict) else {}
        recipe["model"] = {**rest, "install": install} if install else rest
    elif install:
        recipe["model"] = {"install": install}
    recipe.pop("dependencies", None)
    return recipe


def preprocess_plain(data: Any) -> Any:
    """Taxonomy and strategy files only get the JS value conversion (normalizeDates)."""
    return to_js_values(data)
