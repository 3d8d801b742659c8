"""scripts/sglang_cpu/: the sgl_kernel stub and the torchvision patcher that SGLang's CPU venv relies on."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

CPU_DIR = Path(__file__).resolve().parents[2] / "scripts" / "sglang_cpu"


def run_with_stub(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that finds the stub (it must not enter this process's modules)."""
    env = {**os.environ, "PYTHONPATH": str(CPU_DIR)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)


def test_a_stub_kernel_imports_and_raises_naming_itself_when_called() -> None:
    result = run_with_stub(
        "from sgl_kernel import fused_add_rmsnorm\n"
        "from sgl_kernel._stub import KernelUnavailableError\n"
        "try:\n"
        "    fused_add_rmsnorm(1, eps=2)\n"
        "except KernelUnavailableError as error:\n"
        "    print(error)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "sgl_kernel.fused_add_rmsnorm is a CUDA kernel" in result.stdout


def test_private_names_and_missing_submodules_fail_like_on_any_module() -> None:
    # SGLang falls back to its own scalar types when sgl_kernel.scalar_type does not import; a stub
    # there would break its import instead (scalar_types.uint4b8 at module level).
    result = run_with_stub(
        "import sgl_kernel\n"
        "assert not hasattr(sgl_kernel, '_private') and not hasattr(sgl_kernel, '__all__')\n"
        "try:\n"
        "    from sgl_kernel.scalar_type import scalar_types\n"
        "except ImportError:\n"
        "    print('fallback')\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "fallback"


@pytest.fixture(scope="module")
def patcher():
    spec = importlib.util.spec_from_file_location("patch_torchvision", CPU_DIR / "patch_torchvision.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_meta_registrations(site: Path, text: str) -> Path:
    target = site / "torchvision" / "_meta_registrations.py"
    target.parent.mkdir(parents=True)
    target.write_text(text)
    return target


def test_an_unreviewed_file_stops_the_patch_and_is_left_as_it_was(patcher, tmp_path, capsys) -> None:
    text = f'import torch\n{patcher.ANCHOR}@torch.library.register_fake("torchvision::nms")\n'
    target = write_meta_registrations(tmp_path, text)
    assert patcher.main(tmp_path) == 1
    assert target.read_text() == text
    assert "is not torchvision 0.28.0's reviewed file" in capsys.readouterr().err


def test_the_patch_routes_exactly_the_two_fake_registrations_through_the_guard(patcher) -> None:
    original = (
        f"x = 1{patcher.ANCHOR}def roi(): pass\n\n"
        '@torch.library.register_fake("torchvision::nms")\ndef nms(): pass\n\n'
        '@torch.library.register_fake("torchvision::qnms")\ndef qnms(): pass\n\n'
        '@torch.library.register_fake("torchvision::other")\ndef other(): pass\n'
    )
    patched = patcher.patched(original)
    assert "def register_fake_if_ops(op_name):" in patched
    assert '@register_fake_if_ops("torchvision::nms")' in patched
    assert '@register_fake_if_ops("torchvision::qnms")' in patched
    assert '@torch.library.register_fake("torchvision::other")' in patched  # untouched
    assert patched.count("register_fake_if_ops(") == 3  # the definition and the two uses
