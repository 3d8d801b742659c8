"""Image pins against the real docker daemon and the local registry (scripts/ci/start_registry.sh).

Images like the launcher tests' (tests/helpers/images.py: static busybox plus a marker of their
own): tagged into the registry's namespace and pushed, they get a real repository digest. Needs
``require("docker")`` and ``require("registry")`` (tests/helpers/resources.py).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from recipe_ledger.errors import StateError
from recipe_ledger.launch import images
from recipe_ledger.ledger.models import ImagePin
from recipe_ledger.releases import pins

from helpers.images import build_busybox_image
from helpers.resources import REGISTRY, require


@pytest.fixture(scope="module")
def client(docker_client):
    require("registry")
    return docker_client


def _build(client, text: str, tag: str) -> str:
    """A two-file image FROM scratch (static busybox plus a marker), so each build has its own id."""
    return build_busybox_image(client, tag, {"marker": text.encode()}).id


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
