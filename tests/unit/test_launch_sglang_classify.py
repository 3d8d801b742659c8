"""Boot-failure causes read from SGLang's own log lines (no processes).

Each sample is built from lines SGLang's source logs, quoted with where they come from
(sgl-project/sglang, python/sglang/...); the surrounding lines are the shape they appear in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe_ledger.engines.none import ENGINE as STAND_IN
from recipe_ledger.engines.sglang import ENGINE as SGLANG
from recipe_ledger.engines.vllm import ENGINE as VLLM
from recipe_ledger.launch import BOOT_CAUSES, classify_boot_failure
from recipe_ledger.launch.failures import hint_for

# srt/model_executor/model_runner.py (init_memory_pool) and srt/mem_cache/pool_configurator.py
# (MemoryPoolConfig.__post_init__): raised when the KV pool comes out at <= 0 tokens; the scheduler
# child logs "Scheduler hit an exception" (srt/managers/scheduler.py, run_scheduler_process) and
# SIGQUITs the launcher, whose handler logs "Received sigquit ..." (srt/entrypoints/engine.py).
SGLANG_NOT_ENOUGH_MEMORY = """\
[2025-11-29 02:14:07 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=0.41 GB
[2025-11-29 02:14:08 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2530, in run_scheduler_process
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: \
mem_fraction_static=0.5
[2025-11-29 02:14:08] Received sigquit from a child process. It usually means the child failed.
"""

# The same path with torch's own CUDA OOM during CUDA-graph capture (srt/model_executor/cuda_graph_runner.py).
SGLANG_CUDA_GRAPH_OOM = """\
[2025-11-29 02:15:41 TP0] Capture cuda graph begin. This can take up to several minutes.
[2025-11-29 02:15:44 TP0] Scheduler hit an exception: Traceback (most recent call last):
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has \
94.50 GiB
[2025-11-29 02:15:44] Received sigquit from a child process. It usually means the child failed.
"""

# python -m sglang.launch_server parses with argparse (srt/server_args.py prepare_server_args):
# the prog is launch_server.py, and a vLLM flag is unknown to it.
SGLANG_UNKNOWN_FLAG = """\
usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
launch_server.py: error: unrecognized arguments: --gpu-memory-utilization 0.9
"""

# Observed here with sglang 0.5.23 on the CPU box (python -m sglang.launch_server, prog "sglang serve").
SGLANG_0523_UNKNOWN_FLAG = "sglang serve: error: unrecognized arguments: --gpu-memory-utilization 0.9\n"

SGLANG_BAD_CHOICE = """\
usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
launch_server.py: error: argument --attention-backend: invalid choice: 'torch' (choose from 'triton', \
'torch_native', 'flashinfer')
"""

# The HTTP server binds through uvicorn (srt/entrypoints/http_server.py launch_server -> uvicorn.run),
# after the model has loaded: a port taken meanwhile fails late, in uvicorn's words.
SGLANG_HTTP_PORT_TAKEN = """\
[2025-11-29 02:20:13] INFO:     Started server process [4242]
[2025-11-29 02:20:13] INFO:     Waiting for application startup.
[2025-11-29 02:20:13] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): \
address already in use
"""

# SGLang's processes also talk over ZeroMQ TCP ports (srt/managers/detokenizer_manager.py
# init_ipc_channels); a leftover server holding them fails the new one.
SGLANG_ZMQ_PORT_TAKEN = """\
  File "/sgl-workspace/sglang/python/sglang/srt/managers/detokenizer_manager.py", line 124, in \
init_ipc_channels
zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:29236')
[2025-11-29 02:20:14] Received sigquit from a child process. It usually means the child failed.
"""

# Any other scheduler exception: a crash (here the CPU box without the sgl_kernel stub).
SGLANG_SCHEDULER_CRASH = """\
[2025-11-29 02:30:01 TP0] Scheduler hit an exception: Traceback (most recent call last):
ModuleNotFoundError: No module named 'sgl_kernel'
[2025-11-29 02:30:01] Received sigquit from a child process. It usually means the child failed.
"""

# Still loading when the deadline passed (srt/model_executor/model_runner.py load_model).
SGLANG_STILL_LOADING = "[2025-11-29 02:40:00 TP0] Load weight begin. avail mem=139.06 GB\n"


@pytest.mark.parametrize(
    ("log_text", "exit_code", "timed_out", "expected"),
    [
        (SGLANG_NOT_ENOUGH_MEMORY, 1, False, "out_of_memory"),
        (SGLANG_NOT_ENOUGH_MEMORY, -9, False, "out_of_memory"),  # the launcher's kill_process_tree
        (SGLANG_CUDA_GRAPH_OOM, 1, False, "out_of_memory"),
        (SGLANG_UNKNOWN_FLAG, 2, False, "rejected_flag"),
        (SGLANG_0523_UNKNOWN_FLAG, 2, False, "rejected_flag"),
        (SGLANG_BAD_CHOICE, 2, False, "rejected_flag"),
        (SGLANG_HTTP_PORT_TAKEN, 1, False, "port_in_use"),
        (SGLANG_ZMQ_PORT_TAKEN, 1, False, "port_in_use"),
        (SGLANG_SCHEDULER_CRASH, 1, False, "crash"),
        (SGLANG_STILL_LOADING, None, True, "timeout"),
    ],
)
def test_sglang_boot_logs_are_classified(
    log_text: str, exit_code: int | None, timed_out: bool, expected: str
):
    assert classify_boot_failure(log_text, exit_code, timed_out, SGLANG) == expected


def test_a_scheduler_crash_is_not_mistaken_for_memory_or_flags():
    # "Received sigquit" and "Scheduler hit an exception" are how every SGLang failure ends; they
    # must not pull a cause of their own, or every crash would read as the same thing.
    ending = "Received sigquit from a child process. It usually means the child failed.\n"
    assert classify_boot_failure(ending, 1, False, SGLANG) == "crash"
    assert classify_boot_failure(ending, None, True, SGLANG) == "timeout"


def test_each_engine_reads_its_own_out_of_memory_words():
    # SGLang's static-pool message is SGLang's; vLLM's negative KV budget is vLLM's (and the
    # stand-in's, which reads logs the vLLM way); CUDA's own words mean memory for every engine.
    vllm_kv = "INFO [gpu_worker.py:276] Available KV cache memory: -0.37 GiB\n"
    assert classify_boot_failure(SGLANG_NOT_ENOUGH_MEMORY, 1, False, VLLM) == "crash"
    assert classify_boot_failure(vllm_kv, None, True, SGLANG) == "timeout"
    assert classify_boot_failure(vllm_kv, None, True, STAND_IN) == "out_of_memory"
    for engine in (VLLM, SGLANG, STAND_IN):
        assert classify_boot_failure(SGLANG_CUDA_GRAPH_OOM, 1, False, engine) == "out_of_memory"


def test_generate_failed_is_a_known_cause_with_its_own_next_command():
    assert "generate_failed" in BOOT_CAUSES
    assert "first real request failed" in hint_for("generate_failed", Path("/runs/s.log"), 30000, SGLANG)


def test_the_memory_hint_names_the_engines_own_knobs():
    log = Path("/runs/s.log")
    assert "--mem-fraction-static" in hint_for("out_of_memory", log, 30000, SGLANG)
    assert "--gpu-memory-utilization" in hint_for("out_of_memory", log, 8000, VLLM)
    # A stand-in server (engine "none") gets vLLM's knobs, as every server did before engines.
    assert hint_for("out_of_memory", log, 8000, STAND_IN) == hint_for("out_of_memory", log, 8000, VLLM)
