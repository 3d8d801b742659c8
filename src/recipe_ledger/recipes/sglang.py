"""SGLang launch commands from recipes: the recipe's ``sglang`` blocks, else vLLM's flags translated.

Pure, like ``recipes.resolve`` (the same import contract): it takes a resolved vLLM selection, whose
recipe is the loaded form that ``models.Recipe`` validated (the blocks are plain dicts here), and
returns ``python -m sglang.launch_server --model-path MODEL ... --port PORT`` as argv, env and text.

Two sources for the serving flags, never mixed for the same selection:
- ``sglang`` blocks (``model``, ``variants.<v>``, ``hardware_overrides.<hw>``,
  ``variants.<v>.hardware_overrides.<hw>``, ``strategy_overrides.<s>``,
  ``strategy_overrides.<s>.hardware_overrides.<hw>``; a hardware key is the exact id, else the
  generation, else the brand), merged in that order, a later block's flag replacing an earlier one's;
- without any block, the resolved vLLM argv translated flag by flag (``recipes.sglang_flags``: the
  table, read from both engines' parsers and parser registries). A flag that is not carried over is
  named in a warning with the reason, never dropped silently.

In both cases the parallel layout comes from the selection's strategy (vLLM's TP/DP/EP/PP sizes
translated; a block's own --tp-size... replaces it), enabled features (vLLM flags in every recipe)
are translated on top, and a multimodal recipe served with images gets --enable-multimodal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.flags import LaunchCommand, last_value, parse_flags
from recipe_ledger.recipes.sglang_flags import (
    SGLANG_VERSION,
    Translation,
    VllmArgs,
    implies_multimodal,
    layout_args,
    required_by_sglang,
    translate_env,
    translate_vllm_args,
)
from recipe_ledger.recipes.shell import LINE_JOIN, command_lines, docker_meta, js_str

# The engines a recipe renders a command for: its own (recipes are vLLM commands) and SGLang's
# translation of it. Each is a registered engine's recipe_engine (recipe_ledger.engines; this pure
# module cannot import it: tests/unit/test_engine_registry.py ties the two).
RECIPE_ENGINE = "vllm"
ENGINES = (RECIPE_ENGINE, "sglang")
SGLANG_DEFAULT_PORT = 30000  # sglang.launch_server's own default (ServerArgs.port)
LAUNCH_PROGRAM = ("python", "-m", "sglang.launch_server")  # argv[0]: the launcher puts its venv's python
# The official images are CUDA builds; other platforms have no published default we trust.
DEFAULT_IMAGES = {"nvidia": f"lmsysorg/sglang:v{SGLANG_VERSION}"}

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
        "--speculative-dspark-block-size",
        "--device",
        "--attn-dp-size",
        "--enable-dp-lm-head",
        "--mm-enable-dp-encoder",
        "--enable-multimodal",
        "--moe-runner-backend",
        "--moe-a2a-backend",
        "--enable-symm-mem",
        "--json-model-override-args",
        "--limit-mm-data-per-request",
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
        "--mm-encoder-tp-mode",
        "--moe-backend",
        "--hf-overrides",
        "--kernel-config",
        "--attention-config",
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
    # The strategy's own blocks: what SGLang needs for this layout only (DP attention's flags...).
    strategy = sel.strategy_name
    chosen_strategy = resolve.get(recipe, "strategy_overrides", strategy) if strategy else None
    block = resolve.get(chosen_strategy, "sglang")
    if isinstance(block, dict):
        layers.append((f"strategy_overrides.{strategy}.sglang", block))
    found = _hardware_block(resolve.get(chosen_strategy, "hardware_overrides"), sel.hw)
    if found:
        layers.append((f"strategy_overrides.{strategy}.hardware_overrides.{found[0]}.sglang", found[1]))
    return layers


def _args(block: Block) -> list[str]:
    return [str(a) for a in block.get("args") or []]


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


def _is_multimodal(sel: resolve.Selection) -> bool:
    tasks = resolve.get(sel.recipe, "meta", "tasks")
    return isinstance(tasks, list) and "multimodal" in tasks


def _without_default_sizes(args: list[str]) -> list[str]:
    """The layout less the sizes of 1 SGLang assumes anyway: a block is SGLang's own config, the
    strategy adds to it only what the block cannot know."""
    kept = LaunchCommand(()).extended(args)
    ones = {name for name, values in kept.settings().items() if values == ("1",)}
    return kept.without(ones).render()


def _from_blocks(layers: Layers, sel: resolve.Selection, vllm_argv: list[str]) -> tuple[Translation, dict]:
    """The strategy's layout, then the blocks, then the enabled features translated."""
    full = VllmArgs.read(vllm_argv)
    merged = layout_args(full)
    merged.args = _without_default_sizes(merged.args)
    env: dict[str, str] = {}
    for _name, block in layers:
        merged.args = _merged(merged.args, _args(block))
        env |= {str(k): str(v) for k, v in (block.get("env") or {}).items()}
    merged.warnings += _vllm_flags_in_blocks(layers)
    features = translate_vllm_args(_feature_args(sel), layout=False)
    feature_env = translate_env(_feature_env(sel))
    merged.args = _merged(merged.args, features.args + feature_env.args)
    if implies_multimodal(full, _is_multimodal(sel)):
        merged.args = _merged(merged.args, ["--enable-multimodal"])
    merged.args += required_by_sglang(merged.args)
    merged.warnings += features.warnings + feature_env.warnings
    return merged, env | features.env | feature_env.env


def _from_vllm(vllm_argv: list[str], vllm_env: dict, sel: resolve.Selection) -> tuple[Translation, dict]:
    translated = translate_vllm_args(vllm_argv, multimodal=_is_multimodal(sel))
    env = translate_env(vllm_env)
    translated.args = _merged(translated.args, env.args)
    translated.warnings += env.warnings
    return translated, env.env | translated.env


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
    vllm_argv = [str(a) for a in vllm_result["argv"][3:]]
    if layers:
        translated, env = _from_blocks(layers, sel, vllm_argv)
    else:
        translated, env = _from_vllm(vllm_argv, vllm_result.get("env") or {}, sel)
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
