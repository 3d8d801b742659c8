"""Box profiles: the machines ``ledger fit`` and ``ledger run`` reason about.

A box is a concrete machine (a DGX Station, one lent H200), not a hardware class: it says how
much device memory the runtime reports, how much host RAM there is, and how fast the link
between them is. ``hardware`` ties it to a taxonomy id so recipes resolve with the right
overrides.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from recipe_ledger.errors import UnknownIdError
from recipe_ledger.spec.bounds import MAX_ITEMS, PathText, ShortText, Slug, is_slug
from recipe_ledger.spec.versioned import load_versioned
from recipe_ledger.spec.yamlfile import shorten

BOX_SCHEMA_VERSION = 1


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class GpuSpec(_Closed):
    name: ShortText
    count: int = Field(ge=0, le=1024)
    hbm_gib: float = Field(
        ge=0, le=1e6, description="Device memory per GPU as the CUDA runtime reports it, GiB."
    )
    hbm_bandwidth_gbps: float | None = Field(default=None, ge=0, le=1e9)


class HostSpec(_Closed):
    cpu: ShortText = ""
    ram_gib: float = Field(gt=0, le=1e9)


class LinkSpec(_Closed):
    kind: ShortText
    bandwidth_gbps: float = Field(ge=0, le=1e9, description="Host-to-GPU read bandwidth, GB/s.")
    cross_gpu_bandwidth_gbps: float | None = Field(default=None, ge=0, le=1e9)


class Box(_Closed):
    schema_version: int = BOX_SCHEMA_VERSION
    id: Slug
    display_name: ShortText
    hardware: ShortText | None = Field(description="Taxonomy hardware id, or null when none matches.")
    gpu: GpuSpec
    host: HostSpec
    link: LinkSpec
    sources: list[PathText] = Field(default_factory=list, max_length=MAX_ITEMS)

    @property
    def hbm_total_gib(self) -> float:
        return self.gpu.count * self.gpu.hbm_gib


def _normalize(box_id: str) -> str:
    return box_id.strip().lower().replace("_", "-")


def list_boxes(boxes_dir: Path) -> list[Box]:
    return [load_box_file(path) for path in sorted(boxes_dir.glob("*.yaml"))]


def load_box_file(path: Path) -> Box:
    return load_versioned(path, Box, BOX_SCHEMA_VERSION, what="box profile")


def load_box(boxes_dir: Path, box_id: str) -> Box:
    """The box with this id (``dgx_station_gb300`` and ``dgx-station-gb300`` both work)."""
    wanted = _normalize(box_id)
    path = boxes_dir / f"{wanted}.yaml"
    if is_slug(wanted) and path.is_file():  # a slug: never a path out of boxes_dir, never too long
        return load_box_file(path)
    for box in list_boxes(boxes_dir):
        if _normalize(box.id) == wanted or (box.hardware and _normalize(box.hardware) == wanted):
            return box
    known = ", ".join(box.id for box in list_boxes(boxes_dir)) or "none"
    raise UnknownIdError(
        f"unknown box {shorten(box_id)!r}; known boxes: {known}",
        where=str(boxes_dir),
        hint="ledger fit --list-boxes",
    )
