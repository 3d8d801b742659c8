"""A stand-in for SGLang's CUDA kernel package on a CPU-only machine (see docs/serving-cpu.md).

The registry's ``sgl-kernel``/``sglang-kernel`` wheels are CUDA builds with no sdist, and SGLang's
CPU kernels build only from its source tree. SGLang's CPU path imports names from ``sgl_kernel``
at module load but, on a CPU without AMX, calls none of them. So every public name (and every
submodule SGLang imports from) resolves to a function that raises when called: an import
succeeds, a real use fails loudly, naming the kernel, instead of computing something wrong.
"""

from sgl_kernel._stub import stub_getattr

__version__ = "0.0.0+recipe-ledger-cpu-stub"

__getattr__ = stub_getattr(__name__)
