"""Image pins against the real docker daemon and the local registry (scripts/ci/start_registry.sh).

Uses the launcher tests' busybox image (tests/integration/test_launch_docker.py builds it): tagged
into the registry's namespace and pushed, it gets a real repository digest. Skipped, with the
reason, when the daemon or the registry does not answer, unless RECIPE_LEDGER_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import urllib.request
import uuid
from pathlib import Path

import pytest

from recipe_ledger.errors import StateError
from recipe_ledger.launch import images
from recipe_ledger.ledger.models import ImagePin
from recipe_ledger.releases import pins

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install docker)")

pytestmark = pytest.mark.integration

REGISTRY = "127.0.0.1:5000"


def _require(reason: str) -> None:
    if os.environ.get("RECIPE_LEDGER_REQUIRE_DOCKER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def client():
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        _require(f"no docker daemon ({error}): scripts/ci/start_docker.sh")
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=3).read()
    except OSError as error:
        _require(f"no registry on {REGISTRY} ({error}): scripts/ci/start_registry.sh")
    return client


def _build(client, text: str, tag: str) -> str:
    """A two-file image FROM scratch (static busybox plus a marker), so each build has its own id."""
    if not Path("/bin/busybox").is_file():
        _require("no /bin/busybox to build a test image from (apt-get install busybox-static)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in [
            ("Dockerfile", b"FROM scratch\nCOPY busybox /bin/busybox\nCOPY marker /marker\n"),
            ("marker", text.encode()),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        tar.add("/bin/busybox", arcname="busybox")
    buffer.seek(0)
    image, _ = client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True)
    return image.id


def _push(tag: str) -> None:
    # The CLI, not the SDK: it is what the build script uses, and it reports errors plainly.
    subprocess.run(
        [shutil.which("docker") or "docker", "push", tag], check=True, capture_output=True, timeout=120
    )


@pytest.fixture()
def pushed(client):
    repository = f"{REGISTRY}/recipe-ledger-test/pins-{uuid.uuid4().hex[:8]}"
    tag = f"{repository}:1"
    image_id = _build(client, uuid.uuid4().hex, tag)
    _push(tag)
    yield repository, tag, image_id
    for image in client.images.list(name=repository):
        client.images.remove(image.id, force=True)


def test_a_pushed_image_has_a_repository_digest_and_pins(pushed):
    repository, tag, image_id = pushed
    found_id, digests = images.image_pins(tag)
    assert found_id == image_id and any(d.startswith(f"{repository}@sha256:") for d in digests)
    reference = images.resolve_digest(tag)
    assert reference is not None and reference.startswith(f"{repository}@sha256:")
    pinned = pins.pin_image(tag)
    assert pinned.gaps == [] and pinned.pin.pinned and pinned.pin.image_id == image_id
    assert pins.check_image(pinned.pin) == ([], [])


def test_a_digest_that_does_not_exist_is_named(pushed):
    repository, _, _ = pushed
    missing = f"{repository}@sha256:{'0' * 64}"
    with pytest.raises(StateError, match=f"image {missing} is not on this machine"):
        pins.pin_image(missing)
    problems, _ = pins.check_image(ImagePin(ref=missing, digest="sha256:" + "0" * 64, pinned=True))
    assert problems == [f"image digest {missing} is not on this machine"]


def test_a_local_only_image_is_unpinned(client):
    tag = f"recipe-ledger-test/local-{uuid.uuid4().hex[:8]}:1"
    _build(client, uuid.uuid4().hex, tag)
    try:
        pinned = pins.pin_image(tag)
        assert not pinned.pin.pinned and "never pushed to a registry" in pinned.gaps[0]
        assert images.resolve_digest(tag) is None
    finally:
        client.images.remove(tag, force=True)


def test_a_tag_that_moved_is_named_and_the_digest_still_reproduces(client, pushed):
    _, tag, _ = pushed
    published = pins.pin_image(tag).pin
    _build(client, "a new build under the same tag", tag)
    _push(tag)
    problems, notices = pins.check_image(published)
    assert problems == []
    assert len(notices) == 1 and f"tag {tag} moved since publishing" in notices[0]
    assert images.image_pins(pins.run_reference(published))[0] == published.image_id
