"""`ledger sync`'s rounds against a fake checkout: what is retried, what is refused, what is undone."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from recipe_ledger.errors import StateError
from recipe_ledger.ledger import actions
from recipe_ledger.ledger.gitremote import PushOutcome
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.sync import sync


@dataclass
class FakeCheckout:
    """A remote whose pushes answer from a script; merges can bring a chain file with them."""

    pushes: list[PushOutcome]
    remote_head: str | None = "theirs"
    brings: tuple[str, bytes] | None = None  # (chain file name, bytes) that the merge writes
    root: object = None
    remote_name: str = "origin"
    branch: str = "main"
    calls: list[str] = field(default_factory=list)
    head_commit: str = "ours"

    @property
    def tracking_ref(self) -> str:
        return "origin/main"

    def head(self) -> str | None:
        return self.head_commit

    def commit_ledger(self) -> bool:
        self.calls.append("commit")
        return True

    def fetch(self) -> str | None:
        self.calls.append("fetch")
        return self.remote_head

    def merge(self, commit: str) -> bool:
        self.calls.append(f"merge {commit}")
        if self.brings is None:
            return False
        name, data = self.brings
        (self.root / "ledger" / name).write_bytes(data)
        self.head_commit = "merged"
        return True

    def undo_merge(self, to: str | None) -> None:
        self.calls.append(f"undo to {to}")
        name, _ = self.brings
        (self.root / "ledger" / name).unlink()
        self.head_commit = to

    def push(self) -> PushOutcome:
        self.calls.append("push")
        return self.pushes.pop(0)


@pytest.fixture
def root(tmp_path):
    ledger = Ledger.init(tmp_path)
    actions.note(ledger, "mine", writer="box-a", git=None)
    return tmp_path


def test_a_stale_push_starts_a_new_round_with_a_new_fetch(root):
    fake = FakeCheckout([PushOutcome(False, stale=True), PushOutcome(False, stale=True), PushOutcome(True)])
    result = sync(root, checkout=fake, pause=lambda s: None)
    assert result.rounds == 3 and result.committed
    assert fake.calls == ["commit"] + ["fetch", "merge theirs", "push"] * 3


def test_giving_up_after_the_last_round_says_everything_is_merged_locally(root):
    fake = FakeCheckout([PushOutcome(False, stale=True)] * 2)
    with pytest.raises(StateError, match="moved on during each of 2 push attempts"):
        sync(root, checkout=fake, max_rounds=2, pause=lambda s: None)


def test_a_refused_push_is_not_retried(root):
    fake = FakeCheckout([PushOutcome(False, reason="pre-receive hook declined")])
    with pytest.raises(StateError, match="origin refused the push \\(pre-receive hook declined\\)") as error:
        sync(root, checkout=fake)
    assert error.value.exit_code == 3 and fake.calls.count("push") == 1


def test_a_remote_without_the_branch_is_pushed_to_without_a_merge(root):
    fake = FakeCheckout([PushOutcome(True)], remote_head=None)
    assert sync(root, checkout=fake).rounds == 1
    assert fake.calls == ["commit", "fetch", "push"]


def test_a_merged_chain_that_does_not_verify_is_undone_before_any_push(root):
    (root / "elsewhere").mkdir()
    other = Ledger.init(root / "elsewhere")
    actions.note(other, "theirs", writer="box-b", git=None)
    tampered = (root / "elsewhere" / "ledger" / "box-b.jsonl").read_bytes().replace(b"theirs", b"THEIRS")
    fake = FakeCheckout([PushOutcome(True)], brings=("box-b.jsonl", tampered), root=root)
    with pytest.raises(StateError, match="not whole after merging origin/main \\(the merge was undone\\)"):
        sync(root, checkout=fake)
    assert fake.calls[-1] == "undo to ours" and "push" not in fake.calls
    assert not (root / "ledger" / "box-b.jsonl").exists()


def test_a_ledger_that_is_not_whole_is_never_pushed(root):
    chain_file = root / "ledger" / "box-a.jsonl"
    chain_file.write_bytes(chain_file.read_bytes().replace(b"mine", b"MINE"))
    fake = FakeCheckout([PushOutcome(True)])
    with pytest.raises(StateError, match="not whole before syncing: ledger/box-a.jsonl:1"):
        sync(root, checkout=fake)
    assert fake.calls == []
