"""The release spec (``recipes/releases/<lane>/<version>.yaml``): what a release claims, before pinning.

A spec names the image (ideally by digest), the model, the scripts behind the numbers and the
numbers themselves, each pointing at the ledger result that measured it. ``ledger release
publish`` turns it into a ``release`` entry with every pin resolved; the spec is strict and
versioned like every other spec (an unknown field or a newer ``schema_version`` is refused).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from recipe_ledger.spec.bounds import MAX_ITEMS, LongText, PathText, Point, ShortText, Slug
from recipe_ledger.spec.versioned import load_versioned

RELEASE_SPEC_SCHEMA_VERSION = 1


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ModelSpec(_Closed):
    """The model a release serves, pinned by its snapshot commit or content hash."""

    name: ShortText | None = Field(default=None, description="What the model is, e.g. org/name.")
    path: PathText = Field(
        description="The local model directory (repository-relative or absolute) whose "
        "content hash, or Hugging Face snapshot commit, is pinned."
    )
    container_path: PathText | None = Field(
        default=None, description="Where the server sees it (baked in or mounted)."
    )


class NumberSpec(_Closed):
    """One number to publish: a metric of one arm at one point, from one ledger result."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$", description="The number's name, e.g. output_tps_c4."
    )
    metric: ShortText = Field(description="Normalized metric, e.g. output_tps_total.")
    point: Point = Field(description="The sweep point (concurrency).")
    arm: Slug = Field(description="The experiment arm that is this release's configuration.")
    result: ShortText | None = Field(default=None, description="Result entry id (or a unique prefix).")
    experiment: Slug | None = Field(
        default=None, description="Or: the newest active result of this experiment."
    )
    tolerance: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Relative band a reproduction must "
        "stay inside; default: the experiment's bar on this metric and point.",
    )
    unit: ShortText | None = Field(default=None, description="The unit people read, e.g. tok/s.")

    @model_validator(mode="after")
    def _one_source(self) -> NumberSpec:
        if (self.result is None) == (self.experiment is None):
            raise ValueError("give exactly one of 'result' (an entry id) or 'experiment' (its newest result)")
        return self


class ReleaseSpec(_Closed):
    """A release spec (recipes/releases/<lane>/<version>.yaml): what a release claims, before pinning."""

    schema_version: int = Field(
        default=RELEASE_SPEC_SCHEMA_VERSION, description="The file format's version; a newer one is refused."
    )
    lane: Slug = Field(description="The lane's id, e.g. sixty-k-agent.")
    lane_title: ShortText | None = Field(
        default=None, description="The lane's name people see, e.g. Sixty-K Agent."
    )
    version: Slug = Field(description="This release's version within the lane, e.g. v14.")
    changes: list[LongText] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="What changed since the superseded version."
    )
    supersedes: Slug | None = Field(default=None, description="An earlier version of this lane (e.g. v1).")
    image: ShortText | None = Field(
        default=None,
        description="The image: repo@sha256:... pins; a tag is resolved "
        "to its repository digest through the docker daemon when published.",
    )
    model: ModelSpec | None = Field(default=None, description="The model served, pinned when published.")
    scripts: list[PathText] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Scripts whose git blob hashes are pinned (besides those the results already pinned).",
    )
    numbers: list[NumberSpec] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="The numbers the release publishes."
    )


def load_release_spec(path: Path | str) -> ReleaseSpec:
    """Load and validate a release spec; errors name the file, the line and the field."""
    return load_versioned(path, ReleaseSpec, RELEASE_SPEC_SCHEMA_VERSION, what="release spec")
