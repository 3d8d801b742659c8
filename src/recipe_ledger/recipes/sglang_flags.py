"""vLLM launch flags as SGLang's: the translation table, from both engines' own registries.

Pure, like ``recipes.sglang`` (which imports it, so the same import contract covers it). A vLLM argv
is read as vLLM reads it (``VllmArgs``: short aliases, ``--foo_bar`` spelled ``--foo-bar``, the last
occurrence wins, dotted keys such as ``--speculative-config.method mtp`` gathered into their
flag's JSON), then each flag is, in this order of rules:

- **translated**: the parallel layout (``--tensor-parallel-size``, ``--data-parallel-size``,
  ``--enable-expert-parallel``, ``--pipeline-parallel-size``) as a whole, then ``VALUE_RULES`` (a
  value read and written again: parsers, KV-cache dtype, speculative decoding, memory...), then
  ``TRANSLATED`` (another name, the same value) and ``SAME_NAME``;
- **SGLang's default**: ``SGLANG_DEFAULTS`` asks for what SGLang does anyway, nothing to pass;
- **refused**: ``NOT_EQUIVALENT`` (a similar flag exists but means something else) and every other
  flag, each named in a warning with the reason, never dropped silently.

The names and choices come from SGLang 0.5.23 (``ServerArgs.add_cli_args``; the parser registries
``sglang/srt/function_call/parser_names.py`` and ``sglang/srt/parser/reasoning_parser_names.py``)
and vLLM 0.32.0 (``vllm serve``'s parser; ``vllm/tool_parsers/__init__.py`` and
``vllm/reasoning/__init__.py``). recipes/README.md has the table for people; keep the two in step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recipe_ledger.recipes.flags import parse_flags
from recipe_ledger.recipes.parallel_cost import ParallelSizes

SGLANG_VERSION = "0.5.23"  # the version the tables come from (recipes.sglang re-exports it)

# ------------------------------------------------------------------------------ SGLang's registries

# sglang/srt/function_call/parser_names.py (TOOL_CALL_PARSER_NAMES), 0.5.23.
SGLANG_TOOL_CALL_PARSERS = frozenset(
    "apertus2509 beam cohere_command4 deepseekv3 deepseekv31 deepseekv32 deepseekv4 deepseekv41 dots "
    "glm glm45 glm47 gpt-oss k2_horizon kimi_k2 kimi_k3 lfm2 ling3 llama3 mimo minicpm5 mistral muse "
    "poolside_v1 pythonic qwen qwen25 qwen3_coder spark25 step3 step3p5 minimax-m2 minimax-m3 nanbeige "
    "trinity interns1 hermes hunyuan gigachat3 gigachat35 gemma4 inkling iquest_q1 response_template".split()
)
# sglang/srt/parser/reasoning_parser_names.py (REASONING_PARSER_NAMES), 0.5.23.
SGLANG_REASONING_PARSERS = frozenset(
    "apertus2509 beam deepseek-r1 deepseek-v3 deepseek-v4 deepseek-v41 dots glm45 ling3 hunyuan gpt-oss "
    "k2_horizon kimi kimi_k2 kimi_k3 mimo muse poolside_v1 qwen3 qwen3-thinking minimax "
    "minimax-append-think minimax-m3 nanbeige step3 step3p5 mistral nemotron_3 granite_thinking_parser "
    "interns1 gemma4 inkling iquest_q1 cohere_command4 gigachat35 response_template".split()
)

# vLLM tool-call parser -> the SGLang parser of the same format, where the names differ. A vLLM
# name that SGLang also registers passes as it is (the same model family's format: hermes, glm45,
# glm47, kimi_k2, qwen3_coder, mistral, gemma4, step3p5, ...).
TOOL_CALL_PARSER_RENAMED = {
    "deepseek_v3": "deepseekv3",
    "deepseek_v31": "deepseekv31",
    "deepseek_v32": "deepseekv32",
    "deepseek_v4": "deepseekv4",
    "deepseek_v41": "deepseekv41",
    "llama3_json": "llama3",  # JSON calls after <|python_tag|> or bare: SGLang's Llama-3.2 detector
    "llama4_json": "llama3",  # vLLM registers it as the same Llama3JsonToolParser
    "llama4_pythonic": "pythonic",  # [f(a=1), g(b=2)]
    "minimax_m2": "minimax-m2",
    "minimax_m3": "minimax-m3",
    "muse_glimmer": "muse",
    "openai": "gpt-oss",  # harmony channels
    "qwen3_xml": "qwen3_coder",  # vLLM registers both as Qwen3EngineToolParser
    "qwen3_json": "qwen",  # <tool_call>{json}</tool_call>; SGLang's own pick for Qwen3 templates
    "internlm": "interns1",  # <|action_start|><|plugin|> (SGLang's InternlmDetector)
    "hy_v3": "hunyuan",  # Hy3's <tool_calls>/<tool_sep> format
    "apertus": "apertus2509",  # <|tools_prefix|>[{"name": {...}}]<|tools_suffix|>
    "hf": "response_template",  # the format the checkpoint's response template declares
}
# vLLM tool-call parsers SGLang 0.5.23 has no parser for; the others are refused with one line.
TOOL_CALL_PARSER_REFUSED = {
    "hunyuan_a13b": "SGLang's hunyuan parser reads Hy3's <tool_sep> format, not Hunyuan-A13B's JSON list",
    "hy_v4": "SGLang has no HY-V4 parser (its hunyuan parser is Hy3's format)",
    "olmo3": "Olmo 3 writes newline-separated pythonic calls; SGLang's pythonic parser reads one list",
    "cohere_command3": "SGLang registers Command A 4's format only (cohere_command4)",
}

# vLLM reasoning parser -> SGLang's, where the names differ (a shared name passes as it is).
REASONING_PARSER_RENAMED = {
    "deepseek_r1": "deepseek-r1",
    "deepseek_v3": "deepseek-v3",
    "deepseek_v4": "deepseek-v4",
    "deepseek_v41": "deepseek-v41",
    "glm47": "glm45",  # vLLM registers glm45 and glm47 as one parser; SGLang's is glm45
    "openai_gptoss": "gpt-oss",
    "hf": "response_template",
    "hunyuan_a13b": "hunyuan",  # SGLang's HunyuanDetector names Hunyuan-A13B as its model
    "hy_v3": "hunyuan",
    "minimax_m2": "minimax",  # reasoning without an opening <think> (the template writes it)
    "minimax_m2_append_think": "minimax-append-think",
    "minimax_m3": "minimax-m3",
    "muse_glimmer": "muse",
    "nemotron_v3": "nemotron_3",
}
REASONING_PARSER_REFUSED = {
    "granite": "vLLM's granite parser reads 'Here is my thought process:'; SGLang has only "
    "granite_thinking_parser (vLLM's granite_thinking_parser)",
    "hy_v4": "SGLang has no HY-V4 reasoning parser",
    "holo2": "SGLang has no parser that starts in thinking mode on DeepSeek-V3 tags by default",
}

# --kv-cache-dtype: SGLang 0.5.23's choices, and vLLM's values that are SGLang's under another name.
KV_CACHE_DTYPES = frozenset({"auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4"})
KV_CACHE_RENAMED = {
    "fp8": "fp8_e4m3",  # vLLM: "fp8 (=fp8_e4m3)"
    "fp8_ds_mla": "fp8_e4m3",  # FP8 e4m3 latent cache in FlashMLA's layout; SGLang's DeepSeek pools
}
# --quantization: the methods both engines register under the same name.
QUANTIZATIONS = frozenset(
    {"awq", "awq_marlin", "compressed-tensors", "fp8", "gptq", "gptq_marlin", "humming", "modelopt"}
    | {"modelopt_fp4", "modelopt_mixed", "moe_wna16", "mxfp4", "mxfp8", "quark"}
)
# --moe-backend (vLLM) -> --moe-runner-backend: the same kernels under the same name, and DeepGEMM's
# Mega MoE, which SGLang names megamoe (an alias of --moe-a2a-backend megamoe).
MOE_BACKENDS_SAME = frozenset(
    {"auto", "aiter", "cutlass", "deep_gemm", "flashinfer_cutedsl", "flashinfer_cutlass"}
    | {"flashinfer_trtllm", "humming", "marlin", "triton"}
)
MOE_BACKENDS_RENAMED = {"deep_gemm_mega_moe": "megamoe"}
LOAD_FORMATS = frozenset(
    "auto pt safetensors instanttensor npcache dummy sharded_state presharded gguf bitsandbytes "
    "mistral layered fastsafetensors runai_streamer".split()
)
TOKENIZER_MODES = frozenset({"auto", "slow"})
# vLLM tokenizer modes that render the chat with the model's own Python encoder; SGLang picks the
# same encoder from the architecture (entrypoints/openai/chat_encoding.py: resolve_chat_encoding_spec:
# DeepSeek-V4.1, DeepSeek-V4, Inkling; DeepSeek-V3.2 when the checkpoint has no chat template).
MODEL_ENCODERS = frozenset({"deepseek_v41", "deepseek_v4", "deepseek_v32", "inkling"})
ENGRAM_HOST_TABLE = "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE"  # sglang/srt/environ.py
MAMBA_SSM_DTYPES = frozenset({"float32", "bfloat16", "float16"})

# vLLM speculative methods -> SGLang's algorithm of the same design. vLLM's model-specific MTP
# methods (deepseek_mtp, qwen3_5_mtp, step3p5_mtp...: any "*_mtp") are MTP too.
SPEC_CHAIN = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE"}
SPEC_REFUSED = {
    "ngram": "SGLang's NGRAM drafts from a trie of earlier outputs, not by prompt lookup",
    "ngram_gpu": "SGLang's NGRAM drafts from a trie of earlier outputs, not by prompt lookup",
    "suffix": "SGLang has no suffix decoding",
    "medusa": "SGLang has no Medusa heads",
    "mlp_speculator": "SGLang has no MLP speculator",
}

# ------------------------------------------------------------------------------ the plain tables

# vLLM flag -> the SGLang flag that means the same thing, values unchanged.
TRANSLATED = {
    "--max-num-seqs": "--max-running-requests",
    "--tokenizer": "--tokenizer-path",
    "--seed": "--random-seed",
    "--no-enable-prefix-caching": "--disable-radix-cache",
    "--no-async-scheduling": "--disable-overlap-schedule",
    "--enable-log-requests": "--log-requests",
}
# Flags both engines spell alike and read alike (each checked in both parsers' help).
SAME_NAME = frozenset(
    {
        "--served-model-name",
        "--trust-remote-code",
        "--dtype",
        "--revision",
        "--download-dir",
        "--api-key",
        "--host",
        "--language-model-only",  # SGLang: skip the encoder, refuse multimodal requests
        "--enable-eplb",
        "--disable-custom-all-reduce",
        "--skip-tokenizer-init",
        "--decode-context-parallel-size",
        "--allowed-media-domains",
        "--enable-mamba-cache-stochastic-rounding",
        "--mamba-cache-philox-rounds",
    }
)
# vLLM flags that ask for what SGLang does by default: nothing to pass.
SGLANG_DEFAULTS = {
    "--enable-prefix-caching": "SGLang's radix (prefix) cache is on by default",
    "--enable-chunked-prefill": "SGLang chunks long prefills by default",
    "--async-scheduling": "SGLang's overlap scheduler (CPU scheduling beside the GPU step) is on by default",
    "--enable-auto-tool-choice": "SGLang parses tool calls whenever --tool-call-parser is set",
    "--disable-log-requests": "SGLang logs requests only with --log-requests",  # vLLM before 0.32
    "--no-language-model-only": "SGLang loads the encoder unless --language-model-only",
    "--no-enable-expert-parallel": "SGLang's expert parallelism is off unless --ep-size",
}
# Flags whose meaning differs although a similar flag exists: always named, with the reason.
NOT_EQUIVALENT = {
    "--max-num-batched-tokens": (
        "vLLM's per-step token budget has no single SGLang flag (--chunked-prefill-size and "
        "--max-prefill-tokens split it)"
    ),
    "--cpu-offload-gb": "both engines have it, but SGLang's reserves host RAM rather than offloading weights",
    "--port": "SGLang listens on 30000 unless an sglang block sets port",
    "--block-size": (
        "vLLM's KV block size is chosen for vLLM's attention kernels; SGLang's backend picks its page "
        "size (--page-size)"
    ),
    "--attention-backend": (
        "vLLM's backends are its own kernels; SGLang picks its own per model (--attention-backend in "
        "an sglang block)"
    ),
    "--compilation-config": "vLLM's torch.compile and CUDA-graph settings are for vLLM's model runner",
    "--tool-parser-plugin": "a Python file vLLM imports; SGLang loads no vLLM plugin",
    "--reasoning-parser-plugin": "a Python file vLLM imports; SGLang loads no vLLM plugin",
    "--kv-transfer-config": "vLLM's KV connectors; SGLang's disaggregation has its own flags",
}
# Names that take part in the parallel layout (translated together, first).
LAYOUT_FLAGS = frozenset(
    {"--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size", "--enable-expert-parallel"}
)
# vLLM flags that only make sense when images/audio are served: SGLang then needs multimodal on.
MULTIMODAL_FLAGS = frozenset(
    {"--mm-encoder-tp-mode", "--mm-processor-cache-type", "--mm-processor-cache-gb", "--mm-processor-kwargs"}
    | {"--media-io-kwargs", "--allowed-local-media-path", "--video-pruning-rate", "--mm-encoder-attn-backend"}
)

# vLLM's short aliases (vllm serve --help), spelled out.
SHORT_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
    "-cc": "--compilation-config",
    "-ac": "--attention-config",
    "-q": "--quantization",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpr": "--data-parallel-start-rank",
    "-dpp": "--data-parallel-rpc-port",
    "-dpn": "--data-parallel-rank",
    "-dpb": "--data-parallel-backend",
    "-dph": "--data-parallel-hybrid-lb",
    "-dpe": "--data-parallel-external-lb",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-asc": "--api-server-count",
}


# ------------------------------------------------------------------------------ reading vLLM's argv


def vllm_name(name: str) -> tuple[str, tuple[str, ...]]:
    """(canonical flag, dotted keys) as vLLM's FlexibleArgumentParser reads a flag's name:
    ``-tp`` is ``--tensor-parallel-size``, ``--max_model_len`` is ``--max-model-len``, and
    ``--speculative-config.method`` is key ``method`` of ``--speculative-config``."""
    head, dot, rest = name.partition(".")
    head = SHORT_ALIASES.get(head, head)
    if head.startswith("--"):
        head = "--" + head[2:].replace("_", "-")
    return head, tuple(rest.split(".")) if dot else ()


def _dotted_value(text: str) -> Any:
    """A dotted key's value as vLLM reads it: JSON, else a human-readable integer, else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        number = human_int(text)
        return text if number is None else number


def human_int(text: str) -> int | None:
    """vLLM's human-readable integer (``32k`` 32000, ``1K`` 1024, ``1M`` 1048576), None if not one.

    SGLang reads ``M`` as 10**6 and refuses ``K``: the translation writes plain integers."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
        if "." in number:
            return None  # vLLM refuses decimals with binary suffixes
        return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
    return int(value) if re.fullmatch(r"-?\d+", value) else None


@dataclass
class VllmArgs:
    """A vLLM argv as vLLM reads it: canonical names in order of first appearance, the values of the
    last occurrence, and the JSON of each config flag (dotted keys replace a JSON form: vLLM appends
    them as one JSON argument after the others, and the last one wins)."""

    order: list[str] = field(default_factory=list)
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)  # name -> position of its last occurrence
    dotted: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, argv: list[str] | tuple[str, ...]) -> VllmArgs:
        out = cls()
        for position, flag in enumerate(parse_flags([str(a) for a in argv])):
            name, keys = vllm_name(flag.name)
            if name not in out.values:
                out.order.append(name)
            out.last[name] = position
            if keys:
                out.values.setdefault(name, ())
                nested = out.dotted.setdefault(name, {})
                for key in keys[:-1]:
                    child = nested.get(key)
                    if not isinstance(child, dict):
                        child = nested[key] = {}
                    nested = child
                nested[keys[-1]] = _dotted_value(flag.values[-1] if flag.values else "")
            else:
                out.values[name] = flag.values
        return out

    def has(self, name: str) -> bool:
        return name in self.values

    def value(self, name: str) -> str | None:
        values = self.values.get(name)
        return values[-1] if values else None

    def switch(self, name: str) -> bool:
        """A BooleanOptionalAction flag: on when ``--x`` came after any ``--no-x``."""
        negative = "--no-" + name[2:]
        return name in self.last and self.last[name] > self.last.get(negative, -1)

    def overridden(self, name: str) -> bool:
        """Whether a later ``--no-x`` undoes ``--x`` (or a later ``--x`` undoes ``--no-x``)."""
        opposite = "--" + name[5:] if name.startswith("--no-") else "--no-" + name[2:]
        return opposite in self.last and self.last[opposite] > self.last[name]

    def config(self, name: str) -> tuple[dict[str, Any] | None, str]:
        """The JSON object a config flag gives (dotted keys win), and the text to quote it by."""
        if name in self.dotted:
            text = json.dumps(self.dotted[name], separators=(",", ":"))
            return self.dotted[name], text
        text = self.value(name) or ""
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            return None, text
        return (loaded if isinstance(loaded, dict) else None), text


# ------------------------------------------------------------------------------ translating


@dataclass
class Translation:
    args: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # SGLang variables a vLLM flag maps to


def not_carried(name: str, reason: str) -> str:
    return f"{name} (vLLM) is not carried over: {reason}"


def no_equivalent(name: str) -> str:
    return f"{name} (vLLM) has no clear SGLang equivalent; not carried over"


def _positive_int(text: str | None) -> int | None:
    number = human_int(text) if text is not None else None
    return number if number is not None and number > 0 else None


def parallel_sizes(args: VllmArgs) -> ParallelSizes | None:
    """vLLM's parallel layout as it reads the argv: TP and DP (1 when not given) and whether experts
    spread over all TP x DP GPUs (--enable-expert-parallel); None when a size is not a positive number."""
    tp_text, dp_text = args.value("--tensor-parallel-size"), args.value("--data-parallel-size")
    tp, dp = _positive_int(tp_text), _positive_int(dp_text)
    if (tp_text is not None and tp is None) or (dp_text is not None and dp is None):
        return None
    return ParallelSizes(tp=tp or 1, dp=dp or 1, expert=args.switch("--enable-expert-parallel"))


def layout_args(args: VllmArgs) -> Translation:
    """The parallel layout: vLLM's TP x DP GPUs with expert parallelism are one SGLang TP group of
    that width (SGLang 0.5.23: tp_size is the world size) with attention data-parallel over DP
    (--attn-dp-size) and experts over all of it (--ep-size); without EP, DP is replicas (--dp-size)."""
    out = Translation()
    tp_text, dp_text = args.value("--tensor-parallel-size"), args.value("--data-parallel-size")
    sizes = parallel_sizes(args)
    expert = args.switch("--enable-expert-parallel")
    if sizes is not None and sizes.expert:
        if sizes.ep > 1:
            out.args += ["--tp-size", str(sizes.ep)]
            out.args += ["--attn-dp-size", str(sizes.dp)] if sizes.dp > 1 else []
            out.args += ["--ep-size", str(sizes.ep)]
        else:
            out.args += ["--tp-size", tp_text] if tp_text else []
    else:
        if expert:
            out.warnings.append(
                not_carried(
                    "--enable-expert-parallel", "the TP and DP sizes are not numbers to size --ep-size by"
                )
            )
        out.args += ["--tp-size", tp_text] if tp_text is not None else []
        out.args += ["--dp-size", dp_text] if dp_text is not None else []
    pp = args.value("--pipeline-parallel-size")
    out.args += ["--pp-size", pp] if pp is not None else []
    return out


Rule = Callable[[VllmArgs, str, Translation], None]


def _parser_rule(
    flag: str, kind: str, renamed: dict[str, str], refused: dict[str, str], registered: frozenset[str]
) -> Rule:
    """A parser flag's rule (tool calls, reasoning): refused with its reason, else passed or mapped
    to SGLang's name when SGLang registers one, else not carried."""

    def rule(args: VllmArgs, name: str, out: Translation) -> None:
        value = args.value(name) or ""
        sglang = renamed.get(value, value)
        if value in refused:
            out.warnings.append(not_carried(f"{name} {value}", refused[value]))
        elif sglang in registered:
            out.args += [flag, sglang]
        else:
            reason = f"SGLang {SGLANG_VERSION} registers no {kind} parser for this format"
            out.warnings.append(not_carried(f"{name} {value}", reason))

    return rule


_tool_call_parser = _parser_rule(
    "--tool-call-parser",
    "tool-call",
    TOOL_CALL_PARSER_RENAMED,
    TOOL_CALL_PARSER_REFUSED,
    SGLANG_TOOL_CALL_PARSERS,
)
_reasoning_parser = _parser_rule(
    "--reasoning-parser",
    "reasoning",
    REASONING_PARSER_RENAMED,
    REASONING_PARSER_REFUSED,
    SGLANG_REASONING_PARSERS,
)


def _kv_cache_dtype(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    value = KV_CACHE_RENAMED.get(value, value)
    if value in KV_CACHE_DTYPES:
        out.args += ["--kv-cache-dtype", value]
    else:
        out.warnings.append(f"--kv-cache-dtype {value!r} (vLLM) is not one of SGLang's; not carried over")


def _quantization(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    if value in QUANTIZATIONS:
        out.args += ["--quantization", value]
    else:
        out.warnings.append(
            f"--quantization {value!r} (vLLM) is not a method SGLang names alike; not carried over"
        )


def _moe_backend_value(value: str, where: str, out: Translation) -> None:
    sglang = MOE_BACKENDS_RENAMED.get(value, value if value in MOE_BACKENDS_SAME else None)
    if sglang is None:
        reason = f"SGLang {SGLANG_VERSION} has no MoE runner of that name"
        out.warnings.append(not_carried(f"{where} {value}", reason))
    else:
        out.args += ["--moe-runner-backend", sglang]


def _moe_backend(args: VllmArgs, name: str, out: Translation) -> None:
    _moe_backend_value(args.value(name) or "", name, out)


def _kernel_config(args: VllmArgs, name: str, out: Translation) -> None:
    config, text = args.config(name)
    if config is None:
        out.warnings.append(no_equivalent(name))
        return
    if "moe_backend" in config:
        _moe_backend_value(str(config["moe_backend"]), f"{name} moe_backend", out)
    rest = sorted(set(config) - {"moe_backend"})
    if rest:
        out.warnings.append(f"{name} keys without an SGLang flag, not carried over: {', '.join(rest)}")


def _enforce_eager(args: VllmArgs, name: str, out: Translation) -> None:
    # 0.5.23 deprecates --disable-cuda-graph for these two.
    out.args += ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]


def _max_model_len(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    number = human_int(value)
    if value.strip().lower() == "auto" or number == -1:
        reason = (
            "vLLM then picks the longest length that fits in memory; SGLang serves the model's own length"
        )
        out.warnings.append(not_carried(f"{name} {value}", reason))
    elif number is not None and number > 0:
        out.args += ["--context-length", str(number)]  # plain: SGLang reads M as 10**6, vLLM as 2**20
    else:
        out.warnings.append(not_carried(f"{name} {value}", "not a length"))


def _gpu_memory_utilization(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    out.args += ["--mem-fraction-static", value]
    out.warnings.append(
        f"{name} {value} (vLLM) is carried as --mem-fraction-static {value}: vLLM's fraction is the whole "
        "instance's, SGLang's covers weights and the KV pool only (activations and CUDA graphs take the "
        "rest), so the KV pool is larger; lower it if SGLang runs out of memory"
    )


def _mm_encoder_tp_mode(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name)
    if value == "data":
        out.args.append("--mm-enable-dp-encoder")
    elif value == "weights":
        out.args.append("--no-mm-enable-dp-encoder")
    else:
        out.warnings.append(not_carried(f"{name} {value}", "not a mode SGLang has"))


def _limit_mm_per_prompt(args: VllmArgs, name: str, out: Translation) -> None:
    config, text = args.config(name)
    counts = config if config is not None and all(_is_count(v) for v in config.values()) else None
    if counts is None:
        reason = "SGLang's --limit-mm-data-per-request takes a count per modality, not sizes"
        out.warnings.append(not_carried(f"{name} {text}", reason))
    else:
        out.args += ["--limit-mm-data-per-request", json.dumps(counts, separators=(",", ":"))]


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_config(sglang_flag: str) -> Rule:
    """A config flag whose JSON SGLang reads under another name (or the same one)."""

    def rule(args: VllmArgs, name: str, out: Translation) -> None:
        config, text = args.config(name)
        if config is None:
            out.warnings.append(not_carried(f"{name} {text}", "not a JSON object"))
        else:
            out.args += [sglang_flag, json.dumps(config, separators=(",", ":"))]

    return rule


def _chat_template(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    if value.startswith("examples/"):
        reason = "a file of vLLM's repository (examples/ in the vLLM image), not of SGLang's"
        out.warnings.append(not_carried(f"{name} {value}", reason))
    else:
        out.args += [name, value]


def _tokenizer_mode(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    if value in TOKENIZER_MODES:
        out.args += [name, value]
    elif value not in MODEL_ENCODERS:  # those: SGLang picks the model's own encoder itself
        reason = f"SGLang's --tokenizer-mode takes {' or '.join(sorted(TOKENIZER_MODES))}"
        out.warnings.append(not_carried(f"{name} {value}", reason))


def _load_format(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    if value in LOAD_FORMATS:
        out.args += [name, value]
    else:
        out.warnings.append(not_carried(f"{name} {value}", "not one of SGLang's load formats"))


def _mamba_ssm_cache_dtype(args: VllmArgs, name: str, out: Translation) -> None:
    value = args.value(name) or ""
    if value in MAMBA_SSM_DTYPES:
        out.args += ["--mamba-ssm-dtype", value]
    elif value != "auto":  # auto: both read the model's config
        out.warnings.append(not_carried(f"{name} {value}", "not one of SGLang's --mamba-ssm-dtype"))


def _engram_config(args: VllmArgs, name: str, out: Translation) -> None:
    """DeepSeek-V4.1's engram tables in host memory: SGLang's SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE
    (environ.py: "keep the tables in host memory and gather rows from the GPU instead of sharding
    them over HBM"), vLLM's cpu_offload."""
    config, text = args.config(name)
    if config is None:
        out.warnings.append(not_carried(f"{name} {text}", "not a JSON object"))
        return
    if config.get("cpu_offload") is True:
        out.env[ENGRAM_HOST_TABLE] = "1"
    rest = sorted(set(config) - {"cpu_offload"})
    if rest:
        out.warnings.append(f"{name} keys without an SGLang flag, not carried over: {', '.join(rest)}")


def _no_chunked_prefill(args: VllmArgs, name: str, out: Translation) -> None:
    out.args += ["--chunked-prefill-size", "-1"]


def speculative_method(config: dict[str, Any]) -> str:
    """The method vLLM runs: the one given, else the one vLLM infers from the draft's name, else MTP.

    vLLM (config/speculative.py) names eagle, eagle3, dflash and dspark drafts by their model id and
    reads the rest from the draft's config: an MTP model type (Gemma 4's assistants, *_mtp), Medusa
    or an MLP speculator. SGLang has neither of the last two, so a draft named none of the four is
    an MTP draft here (SGLang's NEXTN; it runs a Gemma 4 assistant as FROZEN_KV_MTP by itself)."""
    method = str(config.get("method") or "").lower()
    model = str(config.get("model") or "").lower()
    if method or not model:
        return method
    for word, inferred in (
        ("eagle-", "eagle"),
        ("eagle3", "eagle3"),
        ("dflash", "dflash"),
        ("dspark", "dspark"),
    ):
        if word in model:
            return inferred
    return "mtp"


@dataclass(frozen=True)
class SamplingRule:
    """How SGLang does one of vLLM's draft-sampling or verification choices, for the algorithms
    that do it alike: nothing to pass (its default), a flag, or a variable."""

    algorithms: frozenset[str]
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


# vLLM 0.32.0 (config/speculative.py): draft_sample_method greedy | probabilistic (sample from the
# draft distribution), rejection_sample_method standard | synthetic | block ("block verification
# (Sun et al.)"). SGLang 0.5.23 samples DSpark drafts by default (dspark_components: "DSpark draft
# sampling always uses Gumbel-max"), argmax only with SGLANG_DSPARK_USE_GREEDY_DRAFT (environ.py),
# and --speculative-use-block-verification is block verification "for EAGLE/EAGLE3 ... or for
# sampled DFLASH/DSPARK drafts" (arg_groups/fields/spec.py; speculative_hook.py refuses the rest).
SPEC_SAMPLING = {
    ("draft_sample_method", "probabilistic"): SamplingRule(frozenset({"DSPARK"})),
    ("draft_sample_method", "greedy"): SamplingRule(
        frozenset({"DSPARK"}), env=(("SGLANG_DSPARK_USE_GREEDY_DRAFT", "1"),)
    ),
    ("rejection_sample_method", "block"): SamplingRule(
        frozenset({"EAGLE", "EAGLE3", "DFLASH", "DSPARK"}), args=("--speculative-use-block-verification",)
    ),
}


def _speculative_sampling(config: dict[str, Any], algorithm: str, out: Translation) -> set[str]:
    """The sampling keys of a speculative config that SGLang's ``algorithm`` does alike, added to
    ``out``; a key not returned is the caller's to name."""
    carried = set()
    for key in ("draft_sample_method", "rejection_sample_method"):
        rule = SPEC_SAMPLING.get((key, str(config.get(key, "")).lower()))
        if rule is None or algorithm not in rule.algorithms:
            continue
        out.args += [flag for flag in rule.args if flag not in out.args]
        out.env |= dict(rule.env)
        carried.add(key)
    return carried


def _speculative(args: VllmArgs, name: str, out: Translation) -> None:
    """--speculative-config (JSON or dotted keys). EAGLE-style and MTP methods map to SGLang's chain
    drafting (topk 1: k drafted tokens are k steps and k+1 verified tokens); DSpark's k is its block
    size gamma; DFlash verifies a bonus token plus k drafts. How drafts are sampled and verified is
    carried where SGLang does it alike (``SPEC_SAMPLING``); every other key is named."""
    config, text = args.config(name)
    if config is None:
        out.warnings.append(not_carried(f"{name} {text}", "not a JSON object"))
        return
    method = speculative_method(config)
    steps = config.get("num_speculative_tokens")
    k = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None
    model = config.get("model")
    draft = ["--speculative-draft-model-path", str(model)] if model else []
    chain = SPEC_CHAIN.get("mtp" if method.endswith("_mtp") else method)
    if method in SPEC_REFUSED or not method:
        reason = SPEC_REFUSED.get(method, "neither a method nor a draft model")
        out.warnings.append(
            not_carried(f"{name} {text}", reason + " (set --speculative-algorithm in the sglang block)")
        )
        return
    if chain and k:
        out.args += ["--speculative-algorithm", chain, "--speculative-num-steps", str(k)]
        out.args += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(k + 1), *draft]
    elif method == "dspark":
        out.args += [
            "--speculative-algorithm",
            "DSPARK",
            *(["--speculative-dspark-block-size", str(k)] if k else []),
        ]
        out.args += draft
    elif method == "dflash":
        out.args += [
            "--speculative-algorithm",
            "DFLASH",
            *(["--speculative-num-draft-tokens", str(k + 1)] if k else []),
        ]
        out.args += draft
    else:
        reason = (
            "no SGLang algorithm of this design" if not chain else "num_speculative_tokens is not a count"
        )
        out.warnings.append(
            not_carried(f"{name} {text}", reason + " (set --speculative-algorithm in the sglang block)")
        )
        return
    algorithm = chain if chain and k else method.upper()  # the SGLang algorithm just written
    carried = _speculative_sampling(config, algorithm, out)
    ignored = sorted(set(config) - {"method", "num_speculative_tokens", "model"} - carried)
    if ignored:
        out.warnings.append(f"{name} keys without an SGLang flag, not carried over: {', '.join(ignored)}")


VALUE_RULES: dict[str, Rule] = {
    "--tool-call-parser": _tool_call_parser,
    "--reasoning-parser": _reasoning_parser,
    "--kv-cache-dtype": _kv_cache_dtype,
    "--quantization": _quantization,
    "--moe-backend": _moe_backend,
    "--kernel-config": _kernel_config,
    "--enforce-eager": _enforce_eager,
    "--speculative-config": _speculative,
    "--max-model-len": _max_model_len,
    "--gpu-memory-utilization": _gpu_memory_utilization,
    "--mm-encoder-tp-mode": _mm_encoder_tp_mode,
    "--limit-mm-per-prompt": _limit_mm_per_prompt,
    "--hf-overrides": _json_config("--json-model-override-args"),
    "--default-chat-template-kwargs": _json_config("--default-chat-template-kwargs"),
    "--chat-template": _chat_template,
    "--tokenizer-mode": _tokenizer_mode,
    "--load-format": _load_format,
    "--mamba-ssm-cache-dtype": _mamba_ssm_cache_dtype,
    "--no-enable-chunked-prefill": _no_chunked_prefill,
    "--engram-config": _engram_config,
}


def _translate_flag(args: VllmArgs, name: str, out: Translation) -> None:
    if name in LAYOUT_FLAGS or args.overridden(name):
        pass  # layout_args, first; a switch a later --no-x undid (or the reverse) says nothing
    elif name in VALUE_RULES:
        VALUE_RULES[name](args, name, out)
    elif TRANSLATED.get(name):
        out.args += [str(TRANSLATED[name]), *args.values[name]]
    elif name in SAME_NAME:
        out.args += [name, *args.values[name]]
    elif name in SGLANG_DEFAULTS:
        pass  # what SGLang does anyway (recipes/README.md: the translation table)
    elif name in NOT_EQUIVALENT:
        out.warnings.append(not_carried(name, NOT_EQUIVALENT[name]))
    else:
        out.warnings.append(no_equivalent(name))


def text_only(args: VllmArgs) -> bool:
    """Whether the vLLM command serves text alone (no encoder, or no item of any modality)."""
    if args.switch("--language-model-only"):
        return True
    config, _ = args.config("--limit-mm-per-prompt")
    return config is not None and bool(config) and all(value == 0 for value in config.values())


def implies_multimodal(args: VllmArgs, recipe_multimodal: bool) -> bool:
    """vLLM serves a multimodal model's images unless told not to; some SGLang architectures
    (Gemma 3, Llama 4, Step3-VL, Inkling) serve them only with --enable-multimodal, which does
    nothing for a model that is not multimodal."""
    if text_only(args):
        return False
    return recipe_multimodal or any(args.has(name) for name in MULTIMODAL_FLAGS)


# Speculative algorithms SGLang 0.5.23 runs under attention DP only with the DP LM head
# (arg_groups/speculative_hook.py: "DSpark with dp attention requires --enable-dp-lm-head", DFLASH alike).
DP_LM_HEAD_ALGORITHMS = frozenset({"DSPARK", "DFLASH"})


def required_by_sglang(argv: list[str]) -> list[str]:
    """Flags SGLang refuses to start without, given the others: --enable-dp-lm-head for DSpark or
    DFlash drafting under attention data parallelism."""
    settings = {flag.name: flag.values for flag in parse_flags(list(argv))}
    attn_dp = _positive_int(" ".join(settings.get("--attn-dp-size", ())) or None) or 1
    algorithm = " ".join(settings.get("--speculative-algorithm", ())).upper()
    if attn_dp > 1 and algorithm in DP_LM_HEAD_ALGORITHMS and "--enable-dp-lm-head" not in settings:
        return ["--enable-dp-lm-head"]
    return []


def translate_vllm_args(
    argv: list[str] | tuple[str, ...], *, multimodal: bool = False, layout: bool = True
) -> Translation:
    """vLLM flags as SGLang flags, with a warning naming each one that is not carried over.

    ``multimodal``: the recipe serves images or audio (its ``meta.tasks``); ``layout``: translate the
    parallel layout too (the sglang blocks path takes it separately)."""
    args = VllmArgs.read(argv)
    out = layout_args(args) if layout else Translation()
    for name in args.order:
        _translate_flag(args, name, out)
    if implies_multimodal(args, multimodal):
        out.args.append("--enable-multimodal")
    out.args += required_by_sglang(out.args)
    return out


# vLLM variables that SGLang spells as a flag.
ENV_AS_FLAGS = {"VLLM_USE_NCCL_SYMM_MEM": "--enable-symm-mem"}


def translate_env(env: dict[str, Any]) -> Translation:
    """The environment for SGLang: vLLM's own variables (VLLM_*) mean nothing to it and are named,
    except those SGLang has as a flag (NCCL symmetric memory); every other variable is kept."""
    out = Translation()
    dropped = []
    for key, value in env.items():
        if key in ENV_AS_FLAGS:
            if str(value).strip().lower() in ("1", "true"):
                out.args.append(ENV_AS_FLAGS[key])
        elif key.startswith("VLLM_"):
            dropped.append(key)
        else:
            out.env[key] = str(value)
    if dropped:
        out.warnings.append(f"vLLM environment not carried over: {', '.join(dropped)}")
    return out
