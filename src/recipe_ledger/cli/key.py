"""`ledger key`: this box's signing key for its writer's chain, and its rotation."""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import root_option, writer_option
from recipe_ledger.errors import InputError
from recipe_ledger.ledger import actions, signing
from recipe_ledger.ledger.store import Ledger


@click.group("key")
def key_group() -> None:
    """This box's signing key: a key entry in its chain, chain heads signed with it."""


@key_group.command("init")
@click.option(
    "--adopt",
    is_flag=True,
    help="Sign an existing unsigned chain forward: a key entry now, every head signed from then on.",
)
@root_option
@writer_option
def init(adopt: bool, root: Path, writer: str) -> None:
    """Make this writer's key (once, outside the repository), write its key entry, sign the head.

    The private key goes to ~/.config/recipe-ledger/keys/WRITER.key ($RECIPE_LEDGER_KEY_DIR
    overrides); its public half goes into the chain as a key entry and into ledger/allowed_signers,
    which you commit. An unsigned chain needs --adopt. Safe to run again: it signs the chain's
    current head again (after an interrupted append).
    """
    setup, head = actions.key_init(Ledger.open(root), writer=writer, adopt=adopt)
    made = "made" if setup.created_key else "kept"
    click.echo(f"{made} {setup.key_file} ({signing.fingerprint(setup.public)})")
    if setup.added_signer:
        click.echo(f"listed {writer} in ledger/allowed_signers")
    if head is not None:
        what = "key entry" if head.get("kind") == "key" else "head"
        click.echo(f"signed the {what} of {writer}: seq {head['seq']} ({head['id'][:12]})")
    click.echo(f"next: git add ledger/ && git commit -m '{writer} signs its chain'")


@key_group.command("rotate")
@click.option(
    "--grant",
    metavar="MAINTAINER:SIGNATURE",
    default=None,
    help="The old key is lost: a maintainer's signature (`ledger key grant`) for this box's next key.",
)
@click.option(
    "--request", is_flag=True, help="Only make this box's next key and print it (for a maintainer's grant)."
)
@root_option
@writer_option
def rotate(grant: str | None, request: bool, root: Path, writer: str) -> None:
    """Replace this writer's key by a new one, through a rotation entry signed by the old key.

    Without the old key (its box is gone): `ledger key rotate --request` prints the next key, a
    maintainer listed in ledger/root_of_trust signs it with `ledger key grant`, and
    `ledger key rotate --grant MAINTAINER:SIGNATURE` writes the rotation.
    """
    ledger = Ledger.open(root)
    if request:
        next_file = actions.next_key_file(writer)
        signing.ensure_key_file(next_file)
        click.echo(signing.public_text(signing.load_private(next_file)))
        return
    entry = actions.rotate_key(ledger, writer=writer, grant=_grant(ledger, grant))
    payload = entry["payload"]
    click.echo(
        f"rotated {writer}: {signing.fingerprint(payload['previous_key'])} -> "
        f"{signing.fingerprint(payload['public_key'])} at seq {entry['seq']} ({entry['id'][:12]})"
    )
    click.echo(f"next: git add ledger/ && git commit -m '{writer} rotates its key'")


def _grant(ledger: Ledger, text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    maintainer, _, signature = text.partition(":")
    keys = signing.root_of_trust(ledger.dir).get(maintainer)
    if not keys or not signature:
        raise InputError(
            f"{maintainer!r} is not a maintainer in ledger/{signing.ROOT_FILE}, or no signature follows",
            where="--grant",
            hint="--grant MAINTAINER:SIGNATURE, as `ledger key grant` printed it",
        )
    if len(keys) != 1:
        raise InputError(
            f"{maintainer!r} has {len(keys)} keys in ledger/{signing.ROOT_FILE}; a grant needs one",
            where="--grant",
        )
    return next(iter(keys)), signature


@key_group.command("grant")
@click.argument("writer_name", metavar="WRITER")
@click.argument("new_key", metavar="'ssh-ed25519 BASE64'")
@click.option("--as", "maintainer", required=True, help="The maintainer (ledger/root_of_trust) signing.")
@root_option
def grant(writer_name: str, new_key: str, maintainer: str, root: Path) -> None:
    """As a maintainer, sign WRITER's rotation to NEW_KEY (its old key lost); print the grant."""
    signature = actions.grant_rotation(
        Ledger.open(root), writer=writer_name, new_key=new_key, maintainer=maintainer
    )
    click.echo(f"{maintainer}:{signature}")
