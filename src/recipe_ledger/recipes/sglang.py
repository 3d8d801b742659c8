"""SGLang launch commands from recipes: the recipe's ``sglang`` blocks, else vLLM's flags translated.

Pure, like ``recipes.resolve`` (the same import contract): it takes a resolved vLLM selection, whose
recipe is the loaded form that ``models.Recipe`` validated (the blocks are plain dicts here), and
returns ``python -m sglang.launch_server --model-path MODEL ... --port PORT`` as argv, env and text.

Two sources, never mixed for the same layer:
- ``sglang`` blocks (``model``, ``variants.<v>``, ``hardware_overrides.<hw>``,
  ``variants.<v>.hardware_overrides.<hw>``; a hardware key is the exact id, else the generation, else
  the brand), merged in that order, a later block's flag replacing an earlier one's;
- without any block, the resolved vLLM argv translated flag by flag (``TRANSLATED``, ``SAME_NAME``,
  value-aware rules below). A flag without a clear equivalent is named in a warning, never dropped
  silently. Enabled features are vLLM flags in both cases, so they are always translated.

The flag names come from the argparse parsers of SGLang 0.5.23 (``ServerArgs.add_cli_args``) and
vLLM 0.32.0 (``vllm serve``), dumped on 2026-12-01; keep them in step when either engine moves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.flags import LaunchCommand, last_value, parse_flags
from recipe_ledger.recipes.shell import LINE_JOIN, command_lines, docker_meta, js_str

# The engines a recipe renders a command for: its own (recipes are vLLM commands) and SGLang's
# translation of it. Each is a registered engine's recipe_engine (recipe_ledger.engines; this pure
# module cannot import it: tests/unit/test_engine_registry.py ties the two).
RECIPE_ENGINE = "vllm"
ENGINES = (RECIPE_ENGINE, "sglang")
SGLANG_DEFAULT_PORT = 30000  # sglang.launch_server's own default (ServerArgs.port)
SGLANG_VERSION = "0.5.23"  # the version the flag tables and the default image come from
LAUNCH_PROGRAM = ("python", "-m", "sglang.launch_server")  # argv[0]: the launcher puts its venv's python
# The official images are CUDA builds; other platforms have no published default we trust.
DEFAULT_IMAGES = {"nvidia": f"lmsysorg/sglang:v{SGLANG_VERSION}"}

# vLLM flag -> the SGLang flag that means the same thing, values unchanged (both parse
# --max-model-len/--context-length with the same human-readable integers: 128k, 1M).
TRANSLATED = {
    "--tensor-parallel-size": "--tp-size",
    "-tp": "--tp-size",
    "--pipeline-parallel-size": "--pp-size",
    "-pp": "--pp-size",
    "--data-parallel-size": "--dp-size",
    "-dp": "--dp-size",
    "--max-model-len": "--context-length",
    "--max-num-seqs": "--max-running-requests",
    "--tokenizer": "--tokenizer-path",
    "--seed": "--random-seed",
    "--no-enable-prefix-caching": "--disable-radix-cache",
}
# Flags both engines spell alike and read alike.
SAME_NAME = frozenset(
    {
        "--served-model-name",
        "--trust-remote-code",
        "--dtype",
        "--revision",
        "--download-dir",
        "--chat-template",
        "--api-key",
        "--host",
    }
)
# vLLM flags that ask for what SGLang does by default: nothing to pass.
SGLANG_DEFAULTS = {"--enable-prefix-caching": "SGLang's radix (prefix) cache is on by default"}
# Flags whose meaning differs although a similar flag exists: always named, with the reason.
NOT_EQUIVALENT = {
    "--gpu-memory-utilization": (
        "vLLM's fraction is of the whole GPU for the whole instance (weights, activations and KV "
        "cache); SGLang's --mem-fraction-static is the fraction for weights plus the KV pool only, "
        "the rest left to activations, so the same number gives a different KV budget: set "
        "--mem-fraction-static (or --max-total-tokens) in the recipe's sglang block"
    ),
    "--max-num-batched-tokens": (
        "vLLM's per-step token budget has no single SGLang flag (--chunked-prefill-size and "
        "--max-prefill-tokens split it)"
    ),
    "--enable-expert-parallel": "SGLang takes an expert-parallel size (--ep-size N), not a switch",
    "--cpu-offload-gb": "both engines have it, but SGLang's reserves host RAM rather than offloading weights",
    "--port": f"SGLang listens on {SGLANG_DEFAULT_PORT} unless an sglang block sets port",
}
# SGLang 0.5.23's --kv-cache-dtype choices; vLLM's plain "fp8" is its fp8_e4m3.
_KV_CACHE_DTYPES = {"auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"}
_KV_CACHE_RENAMED = {"fp8": "fp8_e4m3"}
# SGLang 0.5.23's --quantization choices that vLLM also offers under the same name.
_QUANTIZATIONS = {"awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf"}
_QUANTIZATIONS |= {"modelopt", "modelopt_fp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "mxfp4"}
_QUANTIZATIONS |= {"compressed-tensors", "quark"}
# vLLM speculative methods with an SGLang algorithm of the same design.
_SPEC_ALGORITHMS = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "deepseek_mtp": "NEXTN",
    "draft_model": "STANDALONE",
}

# For the lint: distinctive flags of one engine that the other engine's parser rejects. Small on
# purpose (the flags people carry over by habit), from the same two parsers as above.
SGLANG_ONLY_FLAGS = frozenset(
    {
        "--model-path",
        "--tp-size",
        "--pp-size",
        "--dp-size",
        "--ep-size",
        "--context-length",
        "--mem-fraction-static",
        "--max-running-requests",
        "--max-total-tokens",
        "--max-prefill-tokens",
        "--chunked-prefill-size",
        "--disable-radix-cache",
        "--disable-cuda-graph",
        "--cuda-graph-backend-decode",
        "--cuda-graph-backend-prefill",
        "--enable-torch-compile",
        "--enable-metrics",
        "--enable-dp-attention",
        "--page-size",
        "--schedule-policy",
        "--disable-overlap-schedule",
        "--tokenizer-path",
        "--random-seed",
        "--speculative-algorithm",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--speculative-draft-model-path",
        "--device",
    }
)
VLLM_ONLY_FLAGS = frozenset(
    {
        "--max-model-len",
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--speculative-config",
        "--enable-expert-parallel",
        "--enable-chunked-prefill",
        "--block-size",
        "--compilation-config",
        "--async-scheduling",
        "--cpu-offload-params",
        "--kv-transfer-config",
        "--distributed-executor-backend",
        "--enable-auto-tool-choice",
        "--limit-mm-per-prompt",
        "--tokenizer",
        "--seed",
    }
)
# Set by the resolver, not by args: the model path from the recipe, the port from ``port``.
RESERVED_FLAGS = frozenset({"--model-path", "--model", "--port"})


@dataclass
class SglangLaunch:
    """One SGLang server, ready to print or spawn."""

    argv: list[str]  # starts with LAUNCH_PROGRAM; ends with --port PORT
    env: dict[str, str]
    port: int
    docker_image: str | None  # None: no default for this platform and no block names one
    source: str  # "sglang block" or "translated from the vLLM flags"
    warnings: list[str] = field(default_factory=list)
    docker_platform_flags: tuple[str, list[str]] = ("", [])  # (text, argv) of the device flags

    @property
    def model(self) -> str:
        return model_path(self.argv) or ""

    @property
    def command(self) -> str:
        """The command as a person copies it: one flag per line, values shell-quoted."""
        return _program_text(" ".join(LAUNCH_PROGRAM), self.argv[len(LAUNCH_PROGRAM) :])

    def result(self, selection: dict[str, Any]) -> dict[str, Any]:
        """The ``--json`` object: the selection keys of the vLLM result, then SGLang's launch."""
        out = {**selection, "engine": "sglang", "source": self.source, "port": self.port}
        out |= {"env": self.env, "docker_image": self.docker_image, "command": self.command}
        out |= {"argv": self.argv, **self._docker()}
        return out | {"warnings": self.warnings}

    def _docker(self) -> dict[str, Any]:
        if self.docker_image is None:
            return {"docker_command": None, "docker_argv": None}
        # Inside a container the server must listen on every interface for -p to reach it.
        inner = LaunchCommand.parse(self.argv).replacing(["--host", "0.0.0.0", "--port", str(self.port)])
        body = ["python3", *inner.render()[1:]]
        return {
            "docker_command": self._docker_text(body),
            "docker_argv": self._docker_argv(body),
        }

    def _docker_head(self) -> tuple[list[str], list[str]]:
        """(text lines, argv) of ``docker run`` up to the image."""
        text, argv = self.docker_platform_flags
        lines = [f"docker run {text}".rstrip(), f"--privileged --ipc=host -p {self.port}:{self.port}"]
        out = ["docker", "run", *argv, "--privileged", "--ipc=host", "-p", f"{self.port}:{self.port}"]
        mounts = ["~/.cache/huggingface:/root/.cache/huggingface"]
        if self.model.startswith("/"):
            mounts.append(f"{self.model}:{self.model}:ro")
        for mount in mounts:
            lines.append(f"-v {mount}")
            out += ["-v", mount]
        for key, value in self.env.items():
            lines.append(f"-e {key}={js_str(value)}")
            out += ["-e", f"{key}={value}"]
        return lines, out

    def _docker_text(self, body: list[str]) -> str:
        lines, _ = self._docker_head()
        program = " ".join(body[: len(LAUNCH_PROGRAM)])
        tail = _program_text(f"{self.docker_image} {program}", body[len(LAUNCH_PROGRAM) :])
        return LINE_JOIN.join([*lines, tail])

    def _docker_argv(self, body: list[str]) -> list[str]:
        _, out = self._docker_head()
        return [*out, str(self.docker_image), *body]


def _program_text(head: str, args: list[str]) -> str:
    lines = command_lines(list(args))
    return head if not lines else head + LINE_JOIN + LINE_JOIN.join(lines)


def model_path(argv: list[str]) -> str | None:
    """The --model-path of an SGLang argv."""
    return last_value(list(argv), "--model-path")


# ------------------------------------------------------------------------------ blocks


Block = dict[str, Any]  # an ``sglang`` block: args, env, port, docker_image (models.SglangBlock)
Layers = list[tuple[str, Block]]


def _hardware_block(overrides: Any, hw: resolve.Hardware) -> tuple[str, Block] | None:
    """The block of the first hardware key naming ``hw``: exact id, generation, brand."""
    for key in hw.lookup_keys:
        block = resolve.get(overrides, key, "sglang")
        if isinstance(block, dict):
            return key, block
    return None


def block_layers(sel: resolve.Selection) -> Layers:
    """The ``sglang`` blocks that apply to one selection, named by their place, in merge order."""
    recipe, variant = sel.recipe, sel.variant_key
    chosen = resolve.get(recipe, "variants", variant)
    layers: Layers = []
    for name, block in (
        ("model.sglang", resolve.get(recipe, "model", "sglang")),
        (f"variants.{variant}.sglang", resolve.get(chosen, "sglang")),
    ):
        if isinstance(block, dict):
            layers.append((name, block))
    found = _hardware_block(recipe.get("hardware_overrides"), sel.hw)
    if found:
        layers.append((f"hardware_overrides.{found[0]}.sglang", found[1]))
    found = _hardware_block(resolve.get(chosen, "hardware_overrides"), sel.hw)
    if found:
        layers.append((f"variants.{variant}.hardware_overrides.{found[0]}.sglang", found[1]))
    return layers


def _args(block: Block) -> list[str]:
    return [str(a) for a in block.get("args") or []]


# ------------------------------------------------------------------------------ translation


@dataclass
class Translation:
    args: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _no_equivalent(name: str) -> str:
    return f"{name} (vLLM) has no clear SGLang equivalent; not carried over"


def _kv_cache_dtype(values: tuple[str, ...], out: Translation) -> None:
    value = values[0] if values else ""
    value = _KV_CACHE_RENAMED.get(value, value)
    if value in _KV_CACHE_DTYPES:
        out.args += ["--kv-cache-dtype", value]
    else:
        out.warnings.append(f"--kv-cache-dtype {value!r} (vLLM) is not one of SGLang's; not carried over")


def _quantization(values: tuple[str, ...], out: Translation) -> None:
    value = values[0] if values else ""
    if value in _QUANTIZATIONS:
        out.args += ["--quantization", value]
    else:
        out.warnings.append(
            f"--quantization {value!r} (vLLM) is not a method SGLang names alike; not carried over"
        )


def _enforce_eager(values: tuple[str, ...], out: Translation) -> None:
    # 0.5.23 deprecates --disable-cuda-graph for these two.
    out.args += ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]


def _speculative(values: tuple[str, ...], out: Translation) -> None:
    """--speculative-config JSON: EAGLE-style methods map to SGLang's chain drafting (topk 1), where
    k drafted tokens are k steps and k+1 verified tokens."""
    try:
        config = json.loads(values[0]) if values else None
    except json.JSONDecodeError:
        config = None
    method = str(config.get("method", "")).lower() if isinstance(config, dict) else ""
    algorithm = _SPEC_ALGORITHMS.get(method)
    steps = config.get("num_speculative_tokens") if isinstance(config, dict) else None
    if algorithm is None or not isinstance(steps, int) or isinstance(steps, bool):
        out.warnings.append(
            f"--speculative-config {values[0] if values else ''} (vLLM): no clear SGLang equivalent "
            "for this method; not carried over (set --speculative-algorithm in the sglang block)"
        )
        return
    out.args += ["--speculative-algorithm", algorithm, "--speculative-num-steps", str(steps)]
    out.args += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(steps + 1)]
    if isinstance(config, dict) and config.get("model"):
        out.args += ["--speculative-draft-model-path", str(config["model"])]
    ignored = sorted(set(config or {}) - {"method", "num_speculative_tokens", "model"})
    if ignored:
        out.warnings.append(
            f"--speculative-config keys without an SGLang flag, not carried over: {', '.join(ignored)}"
        )


VALUE_RULES: dict[str, Callable[[tuple[str, ...], Translation], None]] = {
    "--kv-cache-dtype": _kv_cache_dtype,
    "--quantization": _quantization,
    "--enforce-eager": _enforce_eager,
    "--speculative-config": _speculative,
}


def _translate_flag(name: str, values: tuple[str, ...], out: Translation) -> None:
    if name in VALUE_RULES:
        VALUE_RULES[name](values, out)
    elif name in TRANSLATED:
        out.args += [TRANSLATED[name], *values]
    elif name in SAME_NAME:
        out.args += [name, *values]
    elif name in SGLANG_DEFAULTS:
        pass  # what SGLang does anyway (README: the translation table)
    elif name in NOT_EQUIVALENT:
        out.warnings.append(f"{name} (vLLM) is not carried over: {NOT_EQUIVALENT[name]}")
    else:
        out.warnings.append(_no_equivalent(name))


def translate_vllm_args(args: list[str] | tuple[str, ...]) -> Translation:
    """vLLM flags as SGLang flags, with a warning naming each one that has no clear equivalent."""
    out = Translation()
    for flag in parse_flags([str(a) for a in args]):
        _translate_flag(flag.name, flag.values, out)
    return out


def translate_env(env: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """vLLM's own variables (VLLM_*) mean nothing to SGLang: named, then left out."""
    kept = {k: str(v) for k, v in env.items() if not k.startswith("VLLM_")}
    dropped = [k for k in env if k.startswith("VLLM_")]
    warnings = [f"vLLM environment not carried over: {', '.join(dropped)}"] if dropped else []
    return kept, warnings


# ------------------------------------------------------------------------------ resolution


def _feature_args(sel: resolve.Selection) -> list[str]:
    layers = resolve.build_layers(sel)
    return [str(a) for layer in layers if layer.name.startswith("features.") for a in layer.args]


def _feature_env(sel: resolve.Selection) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for active in resolve.active_features(sel):
        env |= active.override.get("env") or active.block.get("env") or {}
    return env


def _vllm_flags_in_blocks(layers: Layers) -> list[str]:
    found = []
    for name, block in layers:
        found += [
            f"{flag.name} in {name}.args is a vLLM flag; SGLang rejects it"
            for flag in parse_flags(_args(block))
            if flag.name in VLLM_ONLY_FLAGS
        ]
    return found


def _merged(earlier: list[str], later: list[str]) -> list[str]:
    """``later`` appended to ``earlier``, each flag it sets replacing the earlier one (last wins)."""
    return LaunchCommand(()).extended(earlier).replacing(later).render()


def _from_blocks(layers: Layers, sel: resolve.Selection) -> tuple[Translation, dict]:
    merged = Translation()
    env: dict[str, str] = {}
    for _name, block in layers:
        merged.args = _merged(merged.args, _args(block))
        env |= {str(k): str(v) for k, v in (block.get("env") or {}).items()}
    merged.warnings += _vllm_flags_in_blocks(layers)
    features = translate_vllm_args(_feature_args(sel))
    feature_env, env_warnings = translate_env(_feature_env(sel))
    merged.args = _merged(merged.args, features.args)
    merged.warnings += features.warnings + env_warnings
    return merged, env | feature_env


def _from_vllm(vllm_result: dict) -> tuple[Translation, dict]:
    translated = translate_vllm_args([str(a) for a in vllm_result["argv"][3:]])
    env, env_warnings = translate_env(vllm_result.get("env") or {})
    translated.warnings += env_warnings
    return translated, env


def _port_of(translated: Translation, layers: Layers) -> tuple[int, list[str]]:
    """The ``port`` of the last block that sets one, else a --port in the args, else 30000."""
    from_blocks = next((b["port"] for _n, b in reversed(layers) if b.get("port") is not None), None)
    from_args = last_value(translated.args, "--port")
    port = from_blocks or (int(from_args) if from_args and from_args.isdigit() else SGLANG_DEFAULT_PORT)
    clash = from_args is not None and from_args != str(port)
    return port, [f"--port {from_args} in the args is replaced by the port {port}"] if clash else []


def _image(layers: Layers, brand_key: str) -> str | None:
    """The last block's docker_image, else our default for the brand (None: --docker refuses)."""
    image = next((b["docker_image"] for _n, b in reversed(layers) if b.get("docker_image")), None)
    return image or DEFAULT_IMAGES.get(brand_key)


def resolve_sglang(sel: resolve.Selection, vllm_result: dict) -> SglangLaunch:
    """The SGLang launch for the selection whose vLLM resolution is ``vllm_result`` (single node)."""
    layers = block_layers(sel)
    translated, env = _from_blocks(layers, sel) if layers else _from_vllm(vllm_result)
    port, port_warnings = _port_of(translated, layers)
    model = str(vllm_result["argv"][2])
    command = LaunchCommand.parse([*LAUNCH_PROGRAM, "--model-path", model])
    command = command.replacing(translated.args).replacing(["--port", str(port)])
    meta = docker_meta(sel.recipe, sel.variant, sel.hw.profile, sel.hw.id)
    return SglangLaunch(
        argv=[str(a) for a in command.render()],
        env=env,
        port=port,
        docker_image=_image(layers, meta.brand_key),
        source="sglang block" if layers else "translated from the vLLM flags",
        warnings=translated.warnings + port_warnings,
        docker_platform_flags=(meta.gpu_flags, meta.gpu_argv),
    )
