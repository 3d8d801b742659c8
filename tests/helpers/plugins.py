"""A plugin distribution made in a temporary folder: modules plus the entry points that name them.

What ``pip install`` of a third party's package leaves for ``importlib.metadata`` to find, without
installing anything: the modules and a ``<name>-0.dist-info`` with METADATA and entry_points.txt.
"""

from __future__ import annotations

from pathlib import Path


def write_distribution(folder: Path, modules: dict[str, str], entry_points: dict[str, str]) -> Path:
    """``modules`` (name -> source) and ``entry_points`` (group -> its lines) under ``folder``,
    which is returned for sys.path or PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source)
    dist = folder / "fake-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "\n".join(f"[{group}]\n{lines}\n" for group, lines in entry_points.items())
    )
    return folder
