"""Logs redacted as they are written (recipe_ledger.redact.stream): a run killed with -9 leaves no
raw secret in any log, because no raw line ever reached the file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from recipe_ledger.redact import MARK, LogPipe, RedactedLog

SHAPELESS = "correct horse battery staple"  # a DB_PASSWORD of plain words: only the run knows it

# The parent-equivalent of `ledger run`: it starts a "server" whose output goes through LogPipe,
# says the child's pid, and keeps pumping until it is killed.
PARENT = textwrap.dedent(
    """\
    import subprocess, sys, time
    from pathlib import Path
    from recipe_ledger.redact import LogPipe
    log, secret = Path(sys.argv[1]), sys.argv[2]
    child_code = (
        "import os, sys, time\\n"
        "for i in range(100000):\\n"
        "    print(f'line {i} DB_PASSWORD=' + os.environ['DB_PASSWORD'], flush=True)\\n"
        "    print(f'connecting with ' + os.environ['DB_PASSWORD'] + ' to db', flush=True)\\n"
        "    time.sleep(0.002)\\n"
    )
    pipe = LogPipe(log, {"DB_PASSWORD": secret})
    child = subprocess.Popen(
        [sys.executable, "-c", child_code],
        env={"DB_PASSWORD": secret, "PATH": "/usr/bin:/bin"},
        stdout=pipe.child_fd, stderr=subprocess.STDOUT, start_new_session=True,
    )
    pipe.started()
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


def _wait_for_lines(path: Path, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text(errors="replace").count("\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {count} lines")


def test_a_parent_killed_with_sigkill_mid_stream_leaves_no_raw_secret_in_the_log(tmp_path):
    log = tmp_path / "server-control-r1.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(log), SHAPELESS], stdout=subprocess.PIPE, text=True, env=env
    )
    child_pid = int(parent.stdout.readline())  # type: ignore[union-attr]
    try:
        _wait_for_lines(log, 200)
        parent.send_signal(signal.SIGKILL)  # mid-stream: the child is still printing
        parent.wait(timeout=10)
        time.sleep(0.3)  # the child writes on into a pipe nobody reads
    finally:
        parent.kill()
        _kill_group(child_pid)
    text = log.read_text(errors="replace")
    assert text.count("\n") >= 200
    assert SHAPELESS not in text and "horse battery" not in text
    assert "DB_PASSWORD=[REDACTED]" in text and f"connecting with {MARK} to db" in text


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _written(chunks: list[bytes], secrets: dict[str, str] | None = None, *, tmp_path: Path) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "x.log"
    log = RedactedLog(path, secrets or {})
    for chunk in chunks:
        log.write(chunk)
    log.close()
    return path.read_text(encoding="utf-8")


def test_a_line_arriving_in_pieces_is_redacted_whole(tmp_path):
    data = b"boot HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUv12 ok\nnext line\n"
    chunks = [data[i : i + 3] for i in range(0, len(data), 3)]  # split mid-token, mid-word
    assert _written(chunks, tmp_path=tmp_path) == f"boot HF_TOKEN={MARK} ok\nnext line\n"


def test_a_token_split_across_two_lines_is_hidden_on_both(tmp_path):
    out = _written([b"auth with hf_AbCdEfGhIj\n", b"KlMnOpQrStUv12 then\n", b"done\n"], tmp_path=tmp_path)
    assert "KlMnOpQr" not in out and "AbCdEf" not in out
    assert out == f"auth with {MARK}\n{MARK} then\ndone\n"  # line count kept


def test_a_private_key_block_is_a_marker_per_line_until_its_end(tmp_path):
    pem = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEpQIBAAKCAQEA3Tz2mr7SZ\nAbCdEfGh1234\n"
    pem += b"-----END RSA PRIVATE KEY-----\n"
    out = _written([b"key follows\n", pem, b"after\n"], tmp_path=tmp_path)
    assert out.splitlines() == ["key follows", MARK, MARK, MARK, MARK, "after"]


def test_the_run_s_secret_values_are_hidden_without_a_shape_or_a_name(tmp_path):
    line = f"the pool uses {SHAPELESS}\n".encode()
    out = _written([line], {"LAB_DB_PASSWORD": SHAPELESS}, tmp_path=tmp_path)
    assert out == f"the pool uses {MARK}\n"


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(tmp_path):
    out = _written([b"\xff\xfe password=Hunter2Xyz \xe2\x82\n"], tmp_path=tmp_path)
    assert "Hunter2Xyz" not in out and "password=[REDACTED]" in out


def test_the_pipe_drains_to_its_end_when_closed(tmp_path):
    path = tmp_path / "client.log"
    pipe = LogPipe(path, {})
    code = "for i in range(2000): print(i, 'token=abcdef123456')"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=pipe.child_fd, stderr=subprocess.STDOUT)
    pipe.started()
    proc.wait(timeout=30)
    pipe.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 2000 and lines[-1] == "1999 token=[REDACTED]"


@pytest.mark.parametrize("hold", [True, False])
def test_a_held_line_is_written_when_nothing_follows(tmp_path, hold):
    """The last line waits for the next one (a split token), but not forever: silence writes it."""
    path = tmp_path / "server.log"
    pipe = LogPipe(path, {})
    code = "import time; print('ready', flush=True); time.sleep(%s)" % ("1" if hold else "0")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=pipe.child_fd, stderr=subprocess.STDOUT)
    pipe.started()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "ready" not in (path.read_text() if path.exists() else ""):
        time.sleep(0.05)
    assert path.read_text() == "ready\n"  # before the process ended (hold) or after (no hold)
    proc.wait(timeout=30)
    pipe.close()


def test_a_token_split_after_a_private_key_block_s_end_is_still_joined(tmp_path):
    lines = [b"-----BEGIN RSA PRIVATE KEY-----\n", b"MIIEpQIBAAKCAQEA3Tz2mr7SZ\n"]
    lines += [b"-----END RSA PRIVATE KEY----- --note hf_SpLiTaAbBcCdD\n", b"EeFfGgHh12345 --note x\n"]
    out = _written(lines, tmp_path=tmp_path)
    assert "SpLiTa" not in out and "EeFfGgHh" not in out
    assert out.splitlines() == [MARK, MARK, f"{MARK} --note {MARK}", f"{MARK} --note x"]


def test_any_chunking_of_a_log_keeps_its_lines_and_hides_every_secret(tmp_path):
    """Seeded random chunkings of ordinary serving-log lines mixed with secrets: the same lines
    come out, ordinary ones unchanged, and no secret in any of them."""
    import random

    ordinary = [
        "INFO 12-01 07:46:29 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000",
        "Decode batch, #running-req: 1, #token: 48, #new-token: 5, #pending-token: 0",
        "server_args={'api_key': None, 'max_num_seqs': 16, 'ms_per_token': 3.3}",
        "sha256:" + "ab" * 32 + " df42c109f1defefcbfcedbe7d905718a12266e40",
    ]
    secrets = {
        "DB_PASSWORD=hunter2hunter2": "hunter2hunter2",
        "auth with hf_AbCdEfGhIjKlMnOpQrStUv12": "AbCdEfGhIjKlMnOpQrStUv12",
        f"connecting with {SHAPELESS}": SHAPELESS,
        "the db password is Tr0ub4dorX3": "Tr0ub4dorX3",
        "https://alice:UrlPassW0rd@models.example.com/m": "UrlPassW0rd",
    }
    rng = random.Random(26)
    for case in range(20):
        lines = [rng.choice(ordinary + list(secrets)) for _ in range(30)]
        data = "".join(line + "\n" for line in lines).encode()
        cuts = sorted(rng.sample(range(1, len(data)), 12))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        out = _written(chunks, {"DB_PASSWORD": SHAPELESS}, tmp_path=tmp_path / str(case)).splitlines()
        assert len(out) == len(lines)
        assert [o for o, i in zip(out, lines, strict=True) if i in ordinary and o != i] == []
        assert [n for n in secrets.values() if any(n in o for o in out)] == []
