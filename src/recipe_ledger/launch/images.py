"""What the docker daemon knows about an image: its id, its repository digests, its labels.

A release pins an image by its *repository digest* (``repo@sha256:...``): the digest a registry
computed from the pushed manifest, which names the same bytes on every box. A tag moves; the
image id (the sha256 of the image config) is stable but only local, and an image that was never
pushed has no repository digest at all. This module only asks the daemon; deciding what counts
as pinned is ``recipe_ledger.releases``'s business.

Like ``containers``, it imports the docker SDK lazily (``containers.connect``) and never pulls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recipe_ledger.errors import StateError
from recipe_ledger.launch.containers import connect, repository_of

if TYPE_CHECKING:
    from docker import DockerClient

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageInfo:
    """The daemon's answer for one reference."""

    ref: str
    image_id: str  # sha256:... of the image config
    repo_digests: list[str] = field(default_factory=list)  # ["registry/repo@sha256:...", ...]
    tags: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    size_bytes: int = 0

    def digest_for(self, repository: str) -> str | None:
        """The manifest digest (sha256:...) this image has in ``repository``, if it was pushed there."""
        for item in self.repo_digests:
            repo, _, digest = item.partition("@")
            if repo == repository:
                return digest
        return None


def digest_of(ref: str) -> str | None:
    """The ``sha256:...`` of a digest reference (``repo@sha256:...``); None for a tag."""
    _, at, digest = ref.partition("@")
    return digest if at and _DIGEST.match(digest) else None


def by_digest(repository: str, digest: str) -> str:
    return f"{repository}@{digest}"


def image_info(ref: str, client: DockerClient | None = None) -> ImageInfo:
    """The daemon's view of ``ref``; a StateError naming the reference when the image is not here."""
    from docker.errors import DockerException, ImageNotFound, NotFound
    from requests.exceptions import RequestException

    client = client or connect()
    try:
        image = client.images.get(ref)
    except (ImageNotFound, NotFound):
        raise StateError(
            f"image {ref} is not on this machine",
            where=ref,
            hint=f"docker images --digests {repository_of(ref)}  # or: docker pull {ref}",
        ) from None
    except (DockerException, RequestException) as error:  # the daemon went away or refused: exit 3, one line
        raise StateError(f"the docker daemon did not answer for {ref} ({error})", where=ref) from None
    attrs = image.attrs
    return ImageInfo(
        ref=ref,
        image_id=attrs["Id"],
        repo_digests=list(attrs.get("RepoDigests") or []),
        tags=list(attrs.get("RepoTags") or []),
        labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
        size_bytes=int(attrs.get("Size") or 0),
    )


def image_pins(ref: str, client: DockerClient | None = None) -> tuple[str, list[str]]:
    """``(image_id, repo_digests)`` of ``ref`` as the daemon has it."""
    info = image_info(ref, client)
    return info.image_id, info.repo_digests


def resolve_digest(ref: str, client: DockerClient | None = None) -> str | None:
    """The repository digest reference (``repo@sha256:...``) that ``ref`` stands for right now, or
    None when the image never came from (or went to) a registry under that repository."""
    info = image_info(ref, client)
    digest = info.digest_for(repository_of(ref))
    return by_digest(repository_of(ref), digest) if digest else None


def has_image(ref: str, client: DockerClient | None = None) -> bool:
    try:
        image_info(ref, client)
    except StateError:
        return False
    return True


def container_runtime(client: DockerClient | None = None) -> dict[str, str]:
    """The container runtime that would run a release: daemon version, default OCI runtime, storage."""
    info = (client or connect()).info()
    return {
        "container_runtime": f"docker {info.get('ServerVersion', '?')}",
        "oci_runtime": str(info.get("DefaultRuntime", "?")),
        "storage_driver": str(info.get("Driver", "?")),
        "cgroup": f"{info.get('CgroupDriver', '?')} v{info.get('CgroupVersion', '?')}",
    }
