"""Box profiles: the machines ``ledger fit`` and ``ledger run`` reason about.

A box is a concrete machine (a DGX Station, one lent H200), not a hardware class: it says how
much device memory the runtime reports, how much host RAM there is, and how fast the link
between them is. ``hardware`` ties it to a taxonomy id so recipes resolve with the right
overrides.

Profiles are looked up in one folder or in several, first wins (a lab's ``boxes/`` before the
packaged profiles: recipes.layers.boxes_dirs).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from recipe_ledger.errors import UnknownIdError
from recipe_ledger.spec.bounds import MAX_ITEMS, PathText, ShortText, Slug, is_slug
from recipe_ledger.spec.versioned import load_versioned
from recipe_ledger.spec.yamlfile import shorten

BOX_SCHEMA_VERSION = 1

# A ledger entry as `ledger show` takes it: the id, or its first 12 characters (and more).
LedgerRef = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12,64}$")]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class GpuSpec(_Closed):
    """The box's GPUs: all of one kind."""

    name: ShortText = Field(description="What the GPU is, as people name it.")
    vendor: Literal["nvidia", "amd"] = Field(
        default="nvidia",
        description="Whose GPUs: how a container reaches them (NVIDIA's device requests, or ROCm's "
        "/dev/kfd and /dev/dri with the video group) and which recipes' hardware fits the box.",
    )
    count: int = Field(ge=0, le=1024, description="GPUs in the box (0 for a CPU-only box).")
    hbm_gib: float = Field(
        ge=0, le=1e6, description="Device memory per GPU as the CUDA runtime reports it, GiB."
    )
    hbm_bandwidth_gbps: float | None = Field(
        default=None, ge=0, le=1e9, description="Device memory bandwidth, GB/s."
    )


class HostSpec(_Closed):
    """The host the GPUs sit in: where offloaded weights and tables live."""

    cpu: ShortText = Field(default="", description="What the CPU is, as people name it.")
    ram_gib: float = Field(gt=0, le=1e9, description="Host RAM, GiB.")


class LinkSpec(_Closed):
    """The host-to-GPU link that offloaded weights cross every step."""

    kind: ShortText = Field(description="e.g. nvlink-c2c, pcie5.")
    bandwidth_gbps: float = Field(ge=0, le=1e9, description="Host-to-GPU read bandwidth, GB/s.")
    cross_gpu_bandwidth_gbps: float | None = Field(
        default=None, ge=0, le=1e9, description="GPU-to-GPU bandwidth, GB/s."
    )
    cross_gpu_kind: Literal["nvlink", "infinity-fabric", "pcie-p2p", "host-staged"] | None = Field(
        default=None,
        description="How GPUs reach each other: NVLink or AMD's Infinity Fabric, PCIe peer to peer, "
        "or staged through host memory (the slowest pair's path: collectives wait for it).",
    )
    cross_gpu_latency_us: float | None = Field(
        default=None,
        ge=0,
        le=1e6,
        description="One small collective call's latency over that path (a few KiB all-reduce across "
        "all the box's GPUs), us; null until measured or sourced.",
    )
    cross_gpu_measured_in: LedgerRef | None = Field(
        default=None,
        description="The ledger entry (its id or first 12 characters) whose measurement the cross-GPU "
        "numbers are; null: they are sourced, and `sources` says from where.",
    )


class Box(_Closed):
    """A box profile (recipes/boxes/<id>.yaml): one machine's GPUs, host and link."""

    schema_version: int = Field(default=BOX_SCHEMA_VERSION, description="The file format's version.")
    id: Slug = Field(description="The box id experiments and `ledger fit --box` name.")
    display_name: ShortText = Field(description="The name people see.")
    hardware: ShortText | None = Field(description="Taxonomy hardware id, or null when none matches.")
    gpu: GpuSpec = Field(description="The GPUs.")
    host: HostSpec = Field(description="The host.")
    link: LinkSpec = Field(description="The host-to-GPU link.")
    sources: list[PathText] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Where the numbers come from."
    )

    @property
    def hbm_total_gib(self) -> float:
        return self.gpu.count * self.gpu.hbm_gib


def _normalize(box_id: str) -> str:
    return box_id.strip().lower().replace("_", "-")


BoxFolders = Path | Sequence[Path]


def _folders(boxes_dirs: BoxFolders) -> tuple[Path, ...]:
    return (boxes_dirs,) if isinstance(boxes_dirs, Path) else tuple(boxes_dirs)


def box_files(boxes_dirs: BoxFolders) -> list[Path]:
    """Every profile file, by file name; the first folder's where two hold one name."""
    found: dict[str, Path] = {}
    for folder in _folders(boxes_dirs):
        for path in sorted(folder.glob("*.yaml")):
            found.setdefault(path.name, path)
    return [found[name] for name in sorted(found)]


def list_boxes(boxes_dirs: BoxFolders) -> list[Box]:
    return [load_box_file(path) for path in box_files(boxes_dirs)]


def load_box_file(path: Path) -> Box:
    return load_versioned(path, Box, BOX_SCHEMA_VERSION, what="box profile")


def load_box(boxes_dirs: BoxFolders, box_id: str) -> Box:
    """The box with this id (``dgx_station_gb300`` and ``dgx-station-gb300`` both work), from the
    first folder that has it."""
    wanted = _normalize(box_id)
    folders = _folders(boxes_dirs)
    for folder in folders:
        path = folder / f"{wanted}.yaml"
        if is_slug(wanted) and path.is_file():  # a slug: never a path out of the folder, never too long
            return load_box_file(path)
    boxes = list_boxes(folders)
    for box in boxes:
        if _normalize(box.id) == wanted or (box.hardware and _normalize(box.hardware) == wanted):
            return box
    known = ", ".join(box.id for box in boxes) or "none"
    raise UnknownIdError(
        f"unknown box {shorten(box_id)!r}; known boxes: {known}",
        where=", ".join(str(folder) for folder in folders),
        hint="ledger fit --list-boxes",
    )
