"""The one mechanism behind every stub module of this package."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn


class KernelUnavailableError(NotImplementedError):
    """A CUDA kernel was called on the CPU stub: the launch took a path this machine cannot serve."""


def _unavailable(qualified_name: str) -> Callable[..., NoReturn]:
    def kernel(*_args: object, **_kwargs: object) -> NoReturn:
        raise KernelUnavailableError(
            f"{qualified_name} is a CUDA kernel; this sgl_kernel is recipe-ledger's CPU stub "
            "(scripts/sglang_cpu/), which only lets SGLang's CPU path import"
        )

    kernel.__name__ = kernel.__qualname__ = qualified_name.rsplit(".", 1)[-1]
    return kernel


def stub_getattr(module_name: str) -> Callable[[str], Callable[..., NoReturn]]:
    """A module ``__getattr__`` for ``module_name``: public names are kernels that raise when called.

    Dunder and private names raise AttributeError as usual, so ``hasattr(module, "__path__")``,
    ``import *`` and pickling behave like on any module.
    """

    def module_getattr(name: str) -> Callable[..., NoReturn]:
        if name.startswith("_"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return _unavailable(f"{module_name}.{name}")

    return module_getattr
