"""Two no-ops torch's CPU module lacks, which SGLang 0.5.23's expert-distribution recorder calls.

On a CUDA box ``torch.get_device_module()`` is ``torch.cuda``, which has both. On CPU SGLang hands the
recorder ``torch.cpu``, where ``is_current_stream_capturing`` (no CUDA graphs on CPU: never capturing)
and ``empty_cache`` (no caching allocator to empty) do not exist, so recording crashes the scheduler.
Only processes started with this folder on PYTHONPATH load it (the routing example's SGLang arm);
the venv itself is untouched. Checked against torch 2.13.0 (CPU) and sglang 0.5.23.
"""

import torch

if not hasattr(torch.cpu, "is_current_stream_capturing"):
    torch.cpu.is_current_stream_capturing = lambda: False
if not hasattr(torch.cpu, "empty_cache"):
    torch.cpu.empty_cache = lambda: None
