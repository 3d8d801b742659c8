"""What both launchers hand back: a running, healthy server that stops when its ``with`` block ends."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

from recipe_ledger.errors import StateError
from recipe_ledger.launch import registry
from recipe_ledger.launch.failures import (
    TAIL_LINES,
    BootCause,
    BootFailure,
    classify_boot_failure,
    hint_for,
    read_log,
    redacted_tail,
)
from recipe_ledger.launch.health import HealthOutcome, wait_until_healthy
from recipe_ledger.launch.ports import connect_host, wait_port_free
from recipe_ledger.launch.spec import LaunchSpec

log = logging.getLogger(__name__)
PORT_RELEASE_TIMEOUT_S = 5.0
READY_CHECK_MIN_TIMEOUT_S = 30.0  # the least an engine's first real request after /health is given


class RunningServer(ABC):
    """A launched server. Use it as a context manager: leaving the block always tears it down."""

    def __init__(self, spec: LaunchSpec, log_start_offset: int):
        self.spec = spec
        self.base_url = f"http://{_url_host(connect_host(spec.host))}:{spec.port}"
        self._log_start_offset = log_start_offset
        self._stopped = False
        self._port_held_by_another = False  # an impostor keeps the port: teardown cannot wait for it
        registry.register(self)

    # --- what a launcher implements -------------------------------------------------------------
    @abstractmethod
    def exit_code(self) -> int | None:
        """None while the server runs; its exit status once it has exited."""

    @abstractmethod
    def _terminate(self) -> None:
        """Stop the server and wait until nothing of it remains (processes, container)."""

    def ownership_problem(self) -> str | None:
        """None when what answers on the port is this launch's server; otherwise what answers
        instead, in one sentence. Each launcher knows how to tell (``launch.owner``)."""
        return None

    # --- shared behaviour -----------------------------------------------------------------------
    @property
    def health_url(self) -> str:
        return self.base_url + self.spec.health_path

    def is_alive(self) -> bool:
        return not self._stopped and self.exit_code() is None

    def log_text(self) -> str:
        """This launch's whole log so far (unredacted: for parsing, not for publishing)."""
        return read_log(self.spec.log_path, self._log_start_offset)

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of this launch's log, secrets hidden: safe to record or print."""
        return redacted_tail(self.log_text(), lines, extra_env=self.spec.env)

    def reset_prefix_cache(self, timeout_s: float = 10.0) -> bool:
        """Empty the server's prefix cache before a point, the engine's way. vLLM: POST
        /reset_prefix_cache, True when it said 200, never raises (it needs VLLM_SERVER_DEV_MODE).
        SGLang: POST /flush_cache, retried while requests drain, and ``CacheFlushFailed`` when it
        will not: the point fails rather than run on a warm cache."""
        return self.spec.engine.reset_prefix_cache(self.base_url, timeout_s)

    def stop(self) -> None:
        """Tear the server down and confirm its port is free. Idempotent; safe from a signal handler."""
        if self._stopped:
            return
        try:
            self._terminate()
        finally:
            self._stopped = True
            registry.unregister(self)
        self._confirm_port_released()

    def wait_until_ready(self) -> None:
        """Return once the health URL answers 200 and the engine's own check after it passed (SGLang:
        one real generate; vLLM has none); otherwise tear down and raise ``BootFailure``."""
        outcome = wait_until_healthy(self.health_url, self.spec.health_timeout_s, self.exit_code)
        if not outcome.ready:
            raise self._boot_failure(outcome)
        # Before anything is sent but /health: the 200 may have come from someone else's server.
        impostor = self.ownership_problem()
        if impostor:
            raise self._impostor_failure(impostor)
        # A first real request may compile or warm caches: give it what is left of the boot budget.
        budget = max(self.spec.health_timeout_s - outcome.waited_s, READY_CHECK_MIN_TIMEOUT_S)
        problem = self.spec.engine.readiness_problem(self.base_url, budget)
        if problem:
            raise self._not_ready_failure(problem)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.stop()
            return
        # Already unwinding (an error, Ctrl-C): tear down, but let the original exception be the one
        # the runner sees; a teardown problem on top of it is logged, not raised.
        self.stop_quietly()

    def stop_quietly(self) -> None:
        try:
            self.stop()
        except Exception:
            log.warning("teardown of %s left something behind", self.describe(), exc_info=True)

    def describe(self) -> str:
        return f"{type(self).__name__}({self.spec.run_id} at {self.base_url})"

    def __repr__(self) -> str:
        return self.describe()

    def _boot_failure(self, outcome: HealthOutcome) -> BootFailure:
        # Stop first so the log is complete (a container's log stream, a process's last lines).
        self.stop_quietly()
        text = self.log_text()
        cause = classify_boot_failure(
            text, outcome.exit_code, outcome.timed_out, self.spec.engine, answered=outcome.answered
        )
        if outcome.timed_out:
            what = f"no 200 from {self.health_url} within {self.spec.health_timeout_s:g} s"
        else:
            what = f"server exited with status {outcome.exit_code} before {self.health_url} answered"
        return BootFailure(
            cause,
            what,
            log_tail=redacted_tail(text, extra_env=self.spec.env),
            where=str(self.spec.log_path),
            hint=hint_for(cause, self.spec.log_path, self.spec.port, self.spec.engine),
            server_exit_code=outcome.exit_code,
        )

    def _not_ready_failure(self, problem: str) -> BootFailure:
        """/health said 200 but the engine's first real request failed: ``generate_failed``, unless
        the server's log names a cause a person can act on more directly (out of memory)."""
        exit_code = self.exit_code()
        self.stop_quietly()
        text = self.log_text()
        logged = classify_boot_failure(text, exit_code, False, self.spec.engine)
        cause: BootCause = logged if logged == "out_of_memory" else "generate_failed"
        return BootFailure(
            cause,
            f"{self.health_url} answered 200 but {problem}",
            log_tail=redacted_tail(text, extra_env=self.spec.env),
            where=str(self.spec.log_path),
            hint=hint_for(cause, self.spec.log_path, self.spec.port, self.spec.engine),
            server_exit_code=exit_code,
        )

    def _impostor_failure(self, problem: str) -> BootFailure:
        """Another process answered /health on our port: stop ours (still loading, or about to fail to
        bind) and refuse the launch; nothing of it is measured."""
        self._port_held_by_another = True
        self.stop_quietly()
        return BootFailure(
            "impostor",
            f"{self.health_url} answered 200, but {problem}; nothing was measured",
            log_tail=redacted_tail(self.log_text(), extra_env=self.spec.env),
            where=f"{self.spec.host}:{self.spec.port}",
            hint=hint_for("impostor", self.spec.log_path, self.spec.port, self.spec.engine),
            server_exit_code=self.exit_code(),
        )

    def _confirm_port_released(self) -> None:
        if self._port_held_by_another:
            return  # the impostor holds it: the refusal says so, teardown must not wait on it
        if not wait_port_free(self.spec.host, self.spec.port, PORT_RELEASE_TIMEOUT_S):
            raise StateError(
                f"port {self.spec.port} is still in use {PORT_RELEASE_TIMEOUT_S:g} s"
                " after the server was stopped",
                where=f"{self.spec.host}:{self.spec.port}",
                hint=f"ss -ltnp 'sport = :{self.spec.port}'",
            )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
