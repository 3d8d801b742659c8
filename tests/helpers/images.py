"""The docker tests' images: ``FROM scratch`` plus Debian's static busybox and a few files.

Built from an in-memory context, so no registry is pulled from; the same files give the same
image id, and a marker file of its own gives a test an image nobody else has.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")


def busybox_context(files: Mapping[str, bytes]) -> io.BytesIO:
    """A build context (a tar in memory): the Dockerfile, the static busybox and ``files``.

    Each top-level name of ``files`` ("www" for "www/health") is copied to the image's root.
    """
    tops = sorted({name.split("/", 1)[0] for name in files})
    dockerfile = "FROM scratch\nCOPY busybox /bin/busybox\n" + "".join(f"COPY {top} /{top}\n" for top in tops)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in [("Dockerfile", dockerfile.encode()), *files.items()]:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        tar.add(BUSYBOX, arcname="busybox")
    buffer.seek(0)
    return buffer


def build_busybox_image(client: Any, tag: str, files: Mapping[str, bytes]) -> Any:
    """Build and tag the image with the docker SDK ``client``; returns the SDK's Image."""
    image, _ = client.images.build(
        fileobj=busybox_context(files), custom_context=True, tag=tag, rm=True, forcerm=True, pull=False
    )
    return image
