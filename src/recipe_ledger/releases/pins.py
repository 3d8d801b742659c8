"""Pins: what makes a published number mean the same thing tomorrow, and the checks against them.

Each ``pin_*`` function reads the world (the docker daemon, the model directory, git) and returns
the pin plus the reasons it is incomplete; each ``check_*`` function compares a stored pin with
the world as it is now and returns the differences, one sentence each, naming the thing.
Nothing here decides whether to publish or re-run; ``publish`` and ``reproduce`` do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.launch import images
from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.gitinfo import blob_hash
from recipe_ledger.ledger.models import ImagePin, ModelPin, RevisionSource
from recipe_ledger.provenance import comparable_host, model_revision
from recipe_ledger.releases.spec import ModelSpec

MODEL_LABEL = "org.recipe-ledger.model.sha256"  # set by scripts/build_cpu_image.sh on a baked-in model
NO_GPU = {"gpu": "none", "gpu_count": "0"}  # a box fingerprint without nvidia-smi says nothing: say "none"


P = TypeVar("P")


@dataclass
class Pinned(Generic[P]):
    """A pin and what keeps it from being complete (empty: complete)."""

    pin: P
    gaps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ image


def pin_image(ref: str) -> Pinned[ImagePin]:
    """The image as the daemon has it: pinned only by a repository digest (a registry's manifest
    digest). A reference to a digest the daemon does not have is refused: there is nothing to pin."""
    info = images.image_info(ref)
    repository = images.repository_of(ref)
    digest = images.digest_of(ref) or info.digest_for(repository)
    repo_digests = info.repo_digests or None
    if digest:
        notes = (
            [] if images.digest_of(ref) else [f"tag {ref} resolved to {repository}@{digest} when published"]
        )
        return Pinned(
            ImagePin(ref=ref, digest=digest, pinned=True, image_id=info.image_id, repo_digests=repo_digests),
            notes=notes,
        )
    gap = (
        f"image {ref} has no repository digest in {repository} (never pushed to a registry): "
        f"only this box's image id {info.image_id[:19]}… names it"
    )
    return Pinned(ImagePin(ref=ref, image_id=info.image_id, repo_digests=repo_digests), gaps=[gap])


def run_reference(pin: ImagePin) -> str:
    """What to launch to get exactly the pinned image: repo@digest, never the tag."""
    if pin.digest is None:
        return pin.ref
    return images.by_digest(images.repository_of(pin.ref), pin.digest)


def check_image(pin: ImagePin | None) -> tuple[list[str], list[str]]:
    """(problems, notices) for re-running with ``pin``: the digest must be on this machine with the
    same image id; a tag that moved is named, and does not matter, since the run uses the digest."""
    if pin is None:
        return ["the release pins no image"], []
    if not pin.pinned:
        return [
            f"image {pin.ref} is unpinned (given by tag, no repository digest):"
            " it cannot be re-run as published"
        ], []
    problems, notices = [], []
    wanted = run_reference(pin)
    try:
        info = images.image_info(wanted)
    except StateError:
        problems.append(f"image digest {wanted} is not on this machine")
    else:
        if pin.image_id and info.image_id != pin.image_id:
            problems.append(
                f"image {wanted} has image id {info.image_id[:19]}…, published {pin.image_id[:19]}…"
            )
    notice = _moved_tag(pin)
    if notice:
        notices.append(notice)
    return problems, notices


def _moved_tag(pin: ImagePin) -> str | None:
    if images.digest_of(pin.ref) or not images.has_image(pin.ref):
        return None
    now = images.image_info(pin.ref)
    if pin.image_id and now.image_id != pin.image_id:
        return (
            f"tag {pin.ref} moved since publishing: it now names image {now.image_id[:19]}…, the release "
            f"pinned {pin.image_id[:19]}… (reproducing by digest {run_reference(pin)})"
        )
    return None


# ------------------------------------------------------------------------------------------ model


def model_dir(spec: ModelSpec, repo: Path) -> Path:
    path = Path(spec.path)
    return path if path.is_absolute() else repo / path


def revision_source(revision: str | None) -> RevisionSource | None:
    if revision is None:
        return None
    return (
        "hf-snapshot"
        if revision.startswith("hf:")
        else "content-hash"
        if revision.startswith("sha256:")
        else "stated"
    )


def pin_model(spec: ModelSpec, repo: Path) -> Pinned[ModelPin]:
    """The model's revision: a Hugging Face snapshot's commit, else the directory's content hash."""
    path = model_dir(spec, repo)
    if not path.is_dir():
        raise InputError(
            f"model directory {spec.path} does not exist",
            where=str(path),
            hint="scripts/make_tiny_model.py DIR, or fix model.path in the release spec",
        )
    revision = model_revision(path)
    pin = ModelPin(
        name=spec.name,
        path=spec.path,
        revision=revision,
        revision_source=revision_source(revision),
        container_path=spec.container_path,
    )
    return Pinned(pin)


def check_model(pin: ModelPin | None, repo: Path) -> list[str]:
    if pin is None or not pin.path:
        return ["the release pins no model directory"]
    if pin.revision_source not in ("hf-snapshot", "content-hash"):
        return [
            f"model {pin.name or pin.path} has no pinned revision (only {pin.revision_source or 'nothing'})"
        ]
    path = model_dir(ModelSpec(path=pin.path), repo)
    if not path.is_dir():
        return [f"model directory {pin.path} is not on this machine"]
    now = model_revision(path)
    if now != pin.revision:
        return [
            f"model directory {pin.path} changed since publishing:"
            f" {_short(now)} now, {_short(pin.revision)} pinned"
        ]
    return []


def check_model_in_image(model: ModelPin | None, labels: dict[str, str]) -> list[str]:
    """A model baked into the image says its content hash in a label: it must be the pinned one."""
    baked = labels.get(MODEL_LABEL)
    if not baked or model is None or model.revision is None or baked == model.revision:
        return []
    return [f"the image carries model {_short(baked)}, the model pin is {_short(model.revision)}"]


# ---------------------------------------------------------------------------------------- scripts


def pin_scripts(repo: Path, paths: list[str]) -> Pinned[dict[str, str]]:
    """``{path: git blob hash}`` of each script as it is on disk; a script with changes that no
    commit holds (modified or untracked) cannot be fetched by anyone else: a gap, named."""
    pins = gitinfo.script_blobs(repo, paths)
    gaps = []
    for path, blob in pins.items():
        committed = gitinfo.head_blob(repo, path)
        if committed != blob:
            state = "not committed" if committed is None else "has uncommitted changes"
            gaps.append(f"script {path} is dirty ({state}): its blob {blob[:12]} is in no commit")
    return Pinned(pins, gaps=gaps)


def check_scripts(pins: dict[str, str], repo: Path) -> list[str]:
    problems = []
    for path, blob in sorted(pins.items()):
        file = repo / path
        if not file.is_file():
            problems.append(f"script {path} is missing (pinned blob {blob[:12]})")
            continue
        now = blob_hash(file.read_bytes())
        if now != blob:
            problems.append(
                f"script {path} changed since publishing: blob {now[:12]} now, {blob[:12]} pinned"
            )
    return problems


# -------------------------------------------------------------------------------------------- box


def check_box(published: dict[str, str], now: dict[str, str]) -> list[str]:
    """Numbers compare only on a box that matches in what matters (CPU, GPUs, driver, CUDA)."""
    want, have = comparable_host({**NO_GPU, **published}), comparable_host({**NO_GPU, **now})
    return [
        f"box differs in {key}: {have.get(key, '-')} here, {want.get(key, '-')} published"
        for key in sorted(set(want) | set(have))
        if want.get(key) != have.get(key)
    ]


def _short(revision: str | None) -> str:
    return "-" if revision is None else revision[:19] + "…"
