"""This machine's box profile (recipes.boxdetect), from outputs captured on real machines:
tests/fixtures/box-probes/h200-x1 (the lent H200: nvidia-smi, /proc/meminfo, lscpu) and cpu-only
(a CI machine without nvidia-smi)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe_ledger.recipes import boxdetect
from recipe_ledger.recipes.boxes import Box, load_box_file
from recipe_ledger.recipes.catalog import RecipeRoot

PROBES = Path(__file__).resolve().parents[1] / "fixtures" / "box-probes"
PROFILES = RecipeRoot(Path(__file__).resolve().parents[2] / "recipes").corpus.taxonomy["hardware_profiles"]


def _probes(name: str, *, gpus: bool = True) -> boxdetect.Probes:
    folder = PROBES / name
    smi = folder / "nvidia-smi-query.csv"
    return boxdetect.Probes(
        nvidia_smi=smi.read_text() if gpus and smi.exists() else None,
        meminfo=(folder / "meminfo.txt").read_text(),
        lscpu=(folder / "lscpu.txt").read_text(),
    )


def _written(box: boxdetect.DetectedBox, tmp_path: Path) -> tuple[Box, str]:
    path = tmp_path / f"{box.id}.yaml"
    path.write_text(boxdetect.render_box(box))
    return load_box_file(path), path.read_text()


def test_the_h200_reads_as_one_h200_on_pcie5_with_its_memory(tmp_path):
    box = boxdetect.detect(_probes("h200-x1"), PROFILES)
    profile, text = _written(box, tmp_path)
    assert (profile.id, profile.hardware) == ("h200-x1", "h200")
    assert profile.gpu.count == 1 and 139 < profile.gpu.hbm_gib < 141  # 143771 MiB
    assert 120 < profile.host.ram_gib < 130  # MemTotal 131961976 kB
    assert profile.link.kind == "pcie5" and profile.link.bandwidth_gbps == 63.0
    assert "Intel(R) Xeon(R) Processor, 16 CPUs" == profile.host.cpu
    fields = [line for line in text.splitlines() if not line.startswith("#")]
    assert not any(boxdetect.PLACEHOLDER in line for line in fields)  # everything was read


def test_a_machine_without_nvidia_smi_is_cpu_only(tmp_path):
    box = boxdetect.detect(_probes("cpu-only", gpus=False), PROFILES)
    profile, _ = _written(box, tmp_path)
    assert (profile.id, profile.hardware, profile.gpu.count, profile.link.kind) == (
        "cpu-only",
        "cpu_x86",
        0,
        "none",
    )


def test_what_cannot_be_read_is_a_marked_placeholder_that_still_loads(tmp_path):
    probes = boxdetect.Probes(
        nvidia_smi="Mystery Accelerator 9000, 81920, [N/A], [N/A]\n", meminfo=None, lscpu=None
    )
    box = boxdetect.detect(probes, PROFILES)
    profile, text = _written(box, tmp_path)
    assert profile.hardware is None and profile.gpu.hbm_gib == 80.0
    assert profile.link.bandwidth_gbps == 0
    for field in ("hardware:", "cpu:", "ram_gib:", "kind:", "bandwidth_gbps:"):
        line = next(line for line in text.splitlines() if line.strip().startswith(field))
        assert boxdetect.PLACEHOLDER in line, line


@pytest.mark.parametrize(
    ("rows", "count", "name"),
    [
        ("NVIDIA H100 80GB HBM3, 81559, 5, 16\n" * 8, 8, "NVIDIA H100 80GB HBM3"),
        ("", None, None),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", None, None),
    ],
)
def test_gpu_rows_are_counted_and_a_failure_message_is_no_gpu(rows, count, name):
    gpus = boxdetect.parse_gpus(rows)
    assert (gpus.count if gpus else None, gpus.name if gpus else None) == (count, name)


def test_eight_h100s_match_the_h100_hardware_and_not_a_longer_name_elsewhere():
    gpus = boxdetect.parse_gpus("NVIDIA H100 80GB HBM3, 81559, 5, 16\n" * 8)
    assert boxdetect.match_hardware(gpus, "x86_64", PROFILES) == "h100"
    assert (
        boxdetect.detect(
            boxdetect.Probes("NVIDIA H100 80GB HBM3, 81559, 4, 8\n", None, None), PROFILES
        ).link_gbps
        == 15.8
    )
