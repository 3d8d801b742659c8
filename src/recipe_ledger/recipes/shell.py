"""Turning merged vLLM arguments into text: dedupe, shell quoting, command lines and `docker run`.

Everything here mirrors how the recipes.vllm.ai command builder renders a command, so that the
strings we print are byte-identical to the site's. The functions are pure and work on plain
lists/dicts; resolve.py decides *what* the arguments are, this module decides how they look.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from recipe_ledger.errors import ResolutionError

# Joins rendered lines: the builder puts one flag (with its value) per line, continued with `\`.
LINE_JOIN = " \\\n  "

# A bare `$VAR` must stay unquoted so the shell expands it at run time ($HEAD_IP, $IFACE_NAME...).
_SHELL_VAR = re.compile(r"^\$[A-Z_][A-Z0-9_]*$")
# Characters that never need quoting in the builder's judgement (note: no `{`, `"`, space or `*`).
_SHELL_SAFE = re.compile(r"^[A-Za-z0-9_./=:@,+%-]+$")


# ---------------------------------------------------------------------------
# JS value conversions: the reference is JavaScript, so numbers and booleans reach the text
# through String(); Python's str() would print True/1.0 where the site prints true/1.


def js_str(value: Any) -> str:
    """String(value) as JavaScript computes it, for the scalar types YAML can produce."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, list):
        # Array.prototype.toString joins with commas, null/undefined becoming "".
        return ",".join("" if v is None else js_str(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _js_number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def is_flag(token: Any) -> bool:
    """A token the builder treats as a flag: a string starting with '-'."""
    return isinstance(token, str) and token.startswith("-")


# ---------------------------------------------------------------------------
# Dedupe and quoting.


def drop_falsy(args: list[Any]) -> list[Any]:
    """args.filter(Boolean): the builder silently drops "", 0, false and null entries."""
    # Nearly every token is a non-empty string: test that inline before the general rule.
    return [a for a in args if (a != "" if a.__class__ is str else _js_truthy_scalar(a))]


def _js_truthy_scalar(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def split_units(args: list[Any]) -> list[tuple[Any, ...]]:
    """Group args into (flag, value), (flag,) or (positional,) units.

    A flag takes the next token as its value unless that token is itself a flag. So
    `--x=1` is a flag named "--x=1" (never the same flag as `--x`), and a value that
    starts with "-" (like a negative number) is read as a separate flag.
    """
    units: list[tuple[Any, ...]] = []
    i = 0
    while i < len(args):
        cur = args[i]
        if is_flag(cur):
            if i + 1 < len(args) and not is_flag(args[i + 1]):
                units.append(("flag", cur, args[i + 1]))
                i += 2
                continue
            units.append(("flag", cur))
        else:
            units.append(("pos", cur))
        i += 1
    return units


def dedupe_args(args: list[Any]) -> list[Any]:
    """Last-wins dedupe by flag name: a later layer's `--flag v2` removes an earlier `--flag v1`.

    The surviving occurrence keeps its own (later) position; positionals always survive.
    Same units as split_units, walked backwards in one pass: since a flag is never a value, a
    non-flag token is the value of the token before it exactly when that token is a flag; so a
    non-flag is held until the next token back says which it is.
    """
    seen: set[Any] = set()
    kept_reversed: list[Any] = []
    held: list[Any] = []  # the non-flag just passed: a value if a flag comes next, else positional
    for token in reversed(args):
        if isinstance(token, str) and token.startswith("-"):  # is_flag, inlined: runs per token
            if token not in seen:
                seen.add(token)
                kept_reversed += held
                kept_reversed.append(token)
            held = []  # a repeated flag's value goes with it
        else:
            kept_reversed += held  # the held token had no flag before it: a positional
            held = [token]
    kept_reversed += held
    kept_reversed.reverse()
    return kept_reversed


def shell_quote(value: Any) -> Any:
    """Single-quote a value that contains shell-special characters; leave `$VAR` and safe words.

    Non-strings and the empty string are returned untouched (the reference only quotes text).
    """
    if not isinstance(value, str) or value == "":
        return value
    if _SHELL_SAFE.match(value) or _SHELL_VAR.match(value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


@lru_cache(maxsize=4096)
def _shown_value(value: str) -> str:
    """A flag's (string) value as the command line shows it. Cached: a corpus repeats the same
    few hundred values thousands of times."""
    return js_str(shell_quote(value))


# ---------------------------------------------------------------------------
# Command rendering.


def _not_a_string(name: str) -> ResolutionError:
    # The reference calls token.startsWith(...) on each token; a non-string (a YAML number in
    # an args list) makes it throw a TypeError, which surfaces as the error text below.
    return ResolutionError(f"{name}.startsWith is not a function")


def command_lines(args: list[Any]) -> list[str]:
    """Deduped args as display lines: each flag on its own line, with its value beside it."""
    return _display_lines(dedupe_args(drop_falsy(args)))


def _display_lines(kept: list[Any]) -> list[str]:
    lines: list[str] = []
    i, count = 0, len(kept)
    while i < count:
        cur = kept[i]
        if not isinstance(cur, str):
            raise _not_a_string("cur")
        if cur.startswith("-") and i + 1 < count:
            value = kept[i + 1]
            if not isinstance(value, str):
                raise _not_a_string("next")
            if not value.startswith("-"):
                lines.append(f"{cur} {_shown_value(value)}")
                i += 2
                continue
        lines.append(cur)
        i += 1
    return lines


def _command_text(model_id: Any, lines: list[str], binary: str) -> str:
    head = f"{binary} {js_str(model_id)}"
    return head if not lines else head + LINE_JOIN + LINE_JOIN.join(lines)


def format_command(model_id: Any, args: list[Any], binary: str = "vllm serve") -> str:
    """`vllm serve MODEL \\` followed by one indented line per flag."""
    return _command_text(model_id, command_lines(args), binary)


def format_argv(model_id: Any, args: list[Any]) -> list[Any]:
    """The same deduped args as a flat argv (no quoting) for spawning without a shell."""
    return ["vllm", "serve", model_id, *dedupe_args(drop_falsy(args))]


def render_serve(model_id: Any, args: list[Any]) -> tuple[str, list[Any]]:
    """(format_command, format_argv) of the same args, filtered and deduped once for both."""
    kept = dedupe_args(drop_falsy(args))
    return _command_text(model_id, _display_lines(kept), "vllm serve"), ["vllm", "serve", model_id, *kept]


# ---------------------------------------------------------------------------
# Docker wrapping.

_DEFAULT_IMAGES = {
    "nvidia": "vllm/vllm-openai:latest",
    "amd": "vllm/vllm-openai-rocm:latest",
    "tpu": "vllm/vllm-tpu:latest",
    "intel": "vllm/vllm-openai-cpu:latest-x86_64",
}
# nightly_required swaps the brand defaults to nightly tags (no Intel nightly: it falls to None).
_NIGHTLY_IMAGES = {
    "nvidia": "vllm/vllm-openai:nightly",
    "amd": "vllm/vllm-openai-rocm:nightly",
    "tpu": "vllm/vllm-tpu:nightly",
}
_XPU_IMAGE = "vllm/vllm-openai-xpu:latest"

# `vllm serve MODEL` at the start of a rendered command, with the line break after it.
_SERVE_HEAD = re.compile(r"^vllm serve (\S+)\s*\\?\n?\s*")

# Per-platform device flags, as display text and as argv (kept token-for-token in step).
_GPU_FLAGS: dict[str, tuple[str, list[str]]] = {
    "tpu": (
        "--privileged --network host \\\n  -v /dev/shm:/dev/shm",
        ["--privileged", "--network", "host", "-v", "/dev/shm:/dev/shm"],
    ),
    "amd": (
        "--device=/dev/kfd --device=/dev/dri \\\n  --security-opt seccomp=unconfined --group-add video",
        [
            "--device=/dev/kfd",
            "--device=/dev/dri",
            "--security-opt",
            "seccomp=unconfined",
            "--group-add",
            "video",
        ],
    ),
    "xpu": (
        "--device /dev/dri \\\n  -v /dev/dri/by-path:/dev/dri/by-path --shm-size=16g",
        ["--device", "/dev/dri", "-v", "/dev/dri/by-path:/dev/dri/by-path", "--shm-size", "16g"],
    ),
    "intel": ("--shm-size=16g", ["--shm-size", "16g"]),
    "nvidia": ("--gpus all", ["--gpus", "all"]),
}


@dataclass(frozen=True)
class DockerMeta:
    """Which image and device flags wrap the command on one hardware profile."""

    image: Any
    platform: str  # key of _GPU_FLAGS
    brand_key: str

    @property
    def gpu_flags(self) -> str:
        return _GPU_FLAGS[self.platform][0]

    @property
    def gpu_argv(self) -> list[str]:
        return list(_GPU_FLAGS[self.platform][1])


def _platform(hw_profile: dict) -> tuple[str, str]:
    """(device-flag platform, image brand key) for a hardware profile.

    Anything that is not TPU, AMD or Intel (CPU/XPU/brand) is treated as NVIDIA — including
    Huawei Ascend NPUs, which therefore get `--gpus all` unless the recipe pins an image.
    """
    generation = hw_profile.get("generation")
    if generation == "tpu":
        return "tpu", "tpu"
    if hw_profile.get("brand") == "AMD":
        return "amd", "amd"
    if generation == "xpu":
        return "xpu", "intel"
    if generation == "cpu" or hw_profile.get("brand") == "Intel":
        return "intel", "intel"
    return "nvidia", "nvidia"


def _is_cuda_map(value: Any) -> bool:
    return isinstance(value, dict) and ("cu129" in value or "cu130" in value)


_BRAND_KEYS = frozenset({"nvidia", "amd", "tpu", "intel"})


def _image_from_override(override: Any, brand_key: str) -> tuple[Any, Any]:
    """(pinned image, cuda map) that one `docker_image` declaration contributes, if any."""
    if isinstance(override, str):
        # A bare string is an NVIDIA-only image: other brands fall through to their defaults.
        return (override if brand_key == "nvidia" else None), None
    if not isinstance(override, dict):
        return None, None
    if not override.keys().isdisjoint(_BRAND_KEYS):
        value = override.get(brand_key)
        if isinstance(value, str):
            return value, None
        if brand_key == "nvidia" and _is_cuda_map(value):
            return None, value
        return None, None
    if brand_key == "nvidia" and _is_cuda_map(override):
        return None, override
    return None, None


def docker_meta(recipe: dict, variant: dict, hw_profile: dict, hw_id: str | None) -> DockerMeta:
    """Image precedence: exact variant×hardware override > variant image > model image > default.

    A CUDA map ({cu129, cu130}) resolves to its cu130 tag, the upstream baseline.
    """
    platform, brand_key = _platform(hw_profile)
    raw_model = recipe.get("model")
    model = raw_model if isinstance(raw_model, dict) else {}
    exact = _get_path(variant, "hardware_overrides", hw_id, "docker_image") if hw_id else None
    pinned = exact if isinstance(exact, str) else None
    cuda_map = None
    for override in (variant.get("docker_image"), model.get("docker_image")):
        if pinned or cuda_map or not override:
            continue
        pinned, cuda_map = _image_from_override(override, brand_key)
    defaults = _NIGHTLY_IMAGES if model.get("nightly_required") is True else _DEFAULT_IMAGES
    image: str | None  # None: no default for the brand (Intel has no nightly image)
    if platform == "xpu" and not pinned:
        image = _XPU_IMAGE
    else:
        cuda_pick = (cuda_map.get("cu130") or cuda_map.get("cu129")) if cuda_map else None
        image = pinned or cuda_pick or defaults.get(brand_key)
    return DockerMeta(image=image, platform=platform, brand_key=brand_key)


def _get_path(obj: Any, *keys: Any) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _env_items(env: dict) -> list[tuple[str, Any]]:
    return list(env.items()) if isinstance(env, dict) else []


def _env_assignments(env: dict) -> list[str]:
    """KEY=value for each variable, as both the command text and the argv pass them to -e."""
    return [f"{k}={js_str(v)}" for k, v in _env_items(env)]


def _extra_mounts(model_id: Any, env: dict) -> list[str]:
    """Bind mounts beyond the HF cache: a local model directory, and any *_CONFIG_PATH file."""
    mounts = [f"{model_id}:{model_id}:ro"] if isinstance(model_id, str) and model_id.startswith("/") else []
    mounts += [f"{js_str(v)}:{js_str(v)}:ro" for k, v in _env_items(env) if k.endswith("_CONFIG_PATH")]
    return mounts


def docker_command(command: str, env: dict, meta: DockerMeta, port: int | None = None) -> str:
    """Wrap a rendered `vllm serve MODEL ...` in `docker run`: the image's entrypoint is
    `vllm serve`, so MODEL and the flags become the container's CMD."""
    return _docker_command(command, env, _env_assignments(env), meta, port)


def _docker_command(
    command: str, env: dict, assignments: list[str], meta: DockerMeta, port: int | None
) -> str:
    port = port or 8000
    # The reference takes the model from `^vllm serve (\S+)` and the body by deleting
    # `^vllm serve \S+\s*\\?\n?\s*`: the same match, read twice.
    match = _SERVE_HEAD.match(command)
    model_id = match.group(1) if match else "MODEL"
    serve_body = command[match.end() :] if match else command
    mounts = _extra_mounts(model_id, env)
    prereq = (
        f"# {model_id} must already exist on the host — bind-mounted read-only below.\n"
        if mounts and model_id.startswith("/")
        else ""
    )
    lines = [
        f"{prereq}docker run {meta.gpu_flags}",
        f"--privileged --ipc=host -p {port}:{port}",
        "-v ~/.cache/huggingface:/root/.cache/huggingface",
    ]
    lines += [f"-v {m}" for m in mounts]
    lines += [f"-e {assignment}" for assignment in assignments]
    tail = f"{js_str(meta.image)} {model_id}" + (f"{LINE_JOIN}{serve_body}" if serve_body else "")
    return LINE_JOIN.join([*lines, tail])


def docker_argv(argv: list[Any], env: dict, meta: DockerMeta, port: int | None = None) -> list[Any]:
    """argv companion of docker_command, ready to spawn without a shell."""
    return _docker_argv(argv, env, _env_assignments(env), meta, port)


def _docker_argv(
    argv: list[Any], env: dict, assignments: list[str], meta: DockerMeta, port: int | None
) -> list:
    port = port or 8000
    cmd_args = argv[2:] if argv[:2] == ["vllm", "serve"] else list(argv)
    out: list[Any] = [
        "docker",
        "run",
        *meta.gpu_argv,
        "--privileged",
        "--ipc=host",
        "-p",
        f"{port}:{port}",
        "-v",
        "~/.cache/huggingface:/root/.cache/huggingface",
    ]
    for mount in _extra_mounts(cmd_args[0] if cmd_args else None, env):
        out += ["-v", mount]
    for assignment in assignments:
        out += ["-e", assignment]
    return [*out, meta.image, *cmd_args]


def dockerize(command: str, argv: list[Any], env: dict, meta: DockerMeta, port: int | None = None) -> dict:
    """{docker_command, docker_argv} for one rendered command."""
    assignments = _env_assignments(env)
    return {
        "docker_command": _docker_command(command, env, assignments, meta, port),
        "docker_argv": _docker_argv(argv, env, assignments, meta, port),
    }
