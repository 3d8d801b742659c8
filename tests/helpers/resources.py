"""What a test needs from outside the package, and what happens when it is missing.

One switch, the environment variable ``RECIPE_LEDGER_REQUIRE``: a comma-separated list of the
resources below, or ``all``. A test that needs a resource calls ``require(name)``:

- the resource is there: the call returns;
- it is missing and not required: the test is skipped, with what is missing and the command that
  provides it (a developer's laptop without docker still runs everything else);
- it is missing and required: the test fails with the same reason. CI requires everything it
  installs (``.ci/run``), so nothing there is skipped silently.

    RECIPE_LEDGER_REQUIRE=all python -m pytest                    # as CI does
    RECIPE_LEDGER_REQUIRE=docker,registry python -m pytest tests/integration/test_release_images.py

Probes answer once per session (they talk to daemons): a resource that appears mid-session is
seen by the next session.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ENV_VAR = "RECIPE_LEDGER_REQUIRE"
REPO = Path(__file__).resolve().parents[2]
SERVE_VLLM = REPO / ".venv-serve" / "bin" / "vllm"
SGLANG_PYTHON = REPO / ".venv-sglang" / "bin" / "python"  # scripts/setup_sglang_venv.sh builds it
AIPERF = REPO / ".venv-aiperf" / "bin" / "aiperf"  # scripts/setup_aiperf_venv.sh builds it
LM_EVAL = REPO / ".venv-eval" / "bin" / "lm_eval"  # scripts/setup_eval_venv.sh builds it
# transformers serve's CLI (scripts/setup_tserve_venv.sh builds the venv); $RECIPE_LEDGER_TRANSFORMERS
# overrides it, as it does for the engine (engines.transformers_serve.find_transformers_bin).
TSERVE = Path(os.environ.get("RECIPE_LEDGER_TRANSFORMERS") or REPO / ".venv-tserve" / "bin" / "transformers")
TINY_MODEL = REPO / ".cache" / "tiny-model"
TINY_MOE = REPO / ".cache" / "tiny-moe"  # scripts/make_tiny_moe.py (./dev serve-setup)
COMPAT = REPO.parent / "shared" / "compat"
REGISTRY = "127.0.0.1:5000"
CPU_LANE_IMAGE = f"{REGISTRY}/recipe-ledger/vllm-cpu:0.32.0-tiny"  # scripts/build_cpu_image.sh's tag
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
BUSYBOX = Path("/bin/busybox")

Probe = Callable[[], "str | None"]  # None when the resource is there, else what is missing and the fix


def _importable(module: str, install: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed ({install})"
    return None


@functools.cache
def docker_sdk() -> str | None:
    return _importable("docker", "pip install 'recipe-ledger[docker]'")


@functools.cache
def docker_daemon() -> str | None:
    """The daemon answers through the SDK, and the static busybox the test images hold is here."""
    missing = docker_sdk()
    if missing:
        return missing
    import docker

    try:
        client = docker.from_env()
        try:
            client.ping()
        finally:
            client.close()
    except docker.errors.DockerException as error:
        return f"no docker daemon answers ({error}): scripts/ci/start_docker.sh"
    if not BUSYBOX.is_file() or shutil.which("busybox") is None:
        return f"no static busybox at {BUSYBOX} for the test images: scripts/ci/start_docker.sh installs it"
    return None


@functools.cache
def registry() -> str | None:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=3).close()
    except OSError as error:
        return f"no registry answers on {REGISTRY} ({error}): scripts/ci/start_registry.sh"
    return None


@functools.cache
def vllm() -> str | None:
    if not SERVE_VLLM.is_file():
        return f"no vLLM serving venv ({SERVE_VLLM} is missing): ./dev serve-setup"
    for model in (TINY_MODEL, TINY_MOE):
        if not (model / "model.safetensors").is_file():
            return f"no tiny model in {model}: ./dev serve-setup"
    return None


@functools.cache
def torch_gloo() -> str | None:
    """The serving venv's torch with torch.distributed's gloo backend: what the multi-GPU studies'
    scripts (gpu_link_study.py, gpu_tp2_step.py) run on when there is no second GPU."""
    python = SERVE_VLLM.parent / "python"
    if not python.is_file():
        return f"no vLLM serving venv ({python} is missing): ./dev serve-setup"
    probe = (
        "import torch.distributed as d; raise SystemExit(not (d.is_available() and d.is_gloo_available()))"
    )
    try:
        checked = subprocess.run([str(python), "-c", probe], capture_output=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return f"{python} -c 'import torch.distributed' took over 120 s: ./dev serve-setup"
    if checked.returncode != 0:
        return f"{python} has no torch.distributed with gloo: ./dev serve-setup rebuilds the venv"
    return None


@functools.cache
def sglang() -> str | None:
    """SGLang's CPU venv imports sglang (a stub or patch gone wrong fails here, not mid-test)."""
    if not SGLANG_PYTHON.is_file():
        return f"no SGLang venv ({SGLANG_PYTHON} is missing): ./dev serve-setup"
    try:
        imported = subprocess.run(
            [str(SGLANG_PYTHON), "-c", "import sglang"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{SGLANG_PYTHON} -c 'import sglang' took over 120 s: scripts/setup_sglang_venv.sh"
    if imported.returncode != 0:
        last_line = (imported.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{SGLANG_PYTHON} cannot import sglang ({last_line}): scripts/setup_sglang_venv.sh rebuilds it"
    if not (TINY_MODEL / "model.safetensors").is_file():
        return f"no tiny model in {TINY_MODEL}: ./dev serve-setup"
    return None


@functools.cache
def tserve() -> str | None:
    """transformers serve's venv can load a model: its CLI, the serving app and ``accelerate``
    (``from_pretrained(device_map=...)`` needs it, so a venv without it crashes every boot), and
    the tiny model it serves."""
    if not TSERVE.is_file():
        return f"no transformers serve venv ({TSERVE} is missing): ./dev serve-setup"
    python = TSERVE.parent / "python"
    try:
        imported = subprocess.run(
            [str(python), "-c", "import accelerate, transformers.cli.serving.server"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{python} cannot import transformers' server ({error}): ./dev serve-setup"
    if imported.returncode != 0:
        last_line = (imported.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python} cannot import accelerate or transformers' server ({last_line}): ./dev serve-setup"
    if not (TINY_MODEL / "model.safetensors").is_file():
        return f"no tiny model in {TINY_MODEL}: ./dev serve-setup"
    return None


@functools.cache
def aiperf() -> str | None:
    """AIPerf's venv (the replay instrument's client) and the vLLM server it replays against."""
    if not AIPERF.is_file():
        return f"no AIPerf venv ({AIPERF} is missing): ./dev serve-setup"
    return vllm()


@functools.cache
def lm_eval() -> str | None:
    """lm-evaluation-harness's venv (the lm_eval instrument's client); a test that also needs a real
    server asks for ``vllm`` besides."""
    if not LM_EVAL.is_file():
        return f"no lm-eval venv ({LM_EVAL} is missing): ./dev serve-setup"
    return None


@functools.cache
def cpu_lane() -> str | None:
    """The verified CPU lane: the serving venv, docker, the registry and the lane's image built."""
    for probe in (vllm, docker_daemon, registry):
        missing = probe()
        if missing:
            return missing
    inspected = subprocess.run(
        ["docker", "image", "inspect", CPU_LANE_IMAGE], capture_output=True, check=False, timeout=60
    )
    if inspected.returncode != 0:
        return (
            f"the CPU lane image {CPU_LANE_IMAGE} is not built: scripts/build_cpu_image.sh (about 7 minutes)"
        )
    return None


@functools.cache
def browser() -> str | None:
    if not CHROMIUM.is_file() or not CHROMEDRIVER.is_file():
        return (
            "Debian's chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
        )
    return _importable("selenium", "pip install selenium")


@functools.cache
def compat() -> str | None:
    if not (COMPAT / "vllm-recipes").is_dir():
        return f"the compat suite is not beside this checkout ({COMPAT}/vllm-recipes is missing)"
    return None


@functools.cache
def mlflow() -> str | None:
    return _importable("mlflow", "pip install 'recipe-ledger[tracking]'")


TRACKING_SERVER_ENV = "tracking-server.env"  # written by scripts/tracking-server/start.sh


def tracking_server_dir() -> Path:
    """The state folder of scripts/tracking-server/start.sh (its TRACKING_SERVER_DIR)."""
    default = Path(os.environ.get("TMPDIR", "/tmp")) / "recipe-ledger-tracking-server"
    return Path(os.environ.get("TRACKING_SERVER_DIR", default))


def tracking_server_settings() -> dict[str, str]:
    """MLFLOW_TRACKING_URI, TRACKING_PG_URI, TRACKING_S3_ENDPOINT, TRACKING_S3_BUCKET of the running stack."""
    path = tracking_server_dir() / TRACKING_SERVER_ENV
    lines = path.read_text().splitlines() if path.is_file() else []
    return dict(line.split("=", 1) for line in lines if "=" in line)


@functools.cache
def tracking_server() -> str | None:
    """The shared tracking stack answers: MLflow on PostgreSQL with S3 artifacts (and boto3, psycopg here)."""
    missing = mlflow() or _importable("boto3", "pip install 'recipe-ledger[dev]'")
    missing = missing or _importable("psycopg", "pip install 'recipe-ledger[dev]'")
    if missing:
        return missing
    uri = tracking_server_settings().get("MLFLOW_TRACKING_URI")
    if not uri:
        where = tracking_server_dir() / TRACKING_SERVER_ENV
        return f"no tracking server started ({where} is missing): scripts/tracking-server/start.sh"
    try:
        urllib.request.urlopen(uri + "/health", timeout=5).close()
    except OSError as error:
        return f"the tracking server at {uri} does not answer ({error}): scripts/tracking-server/start.sh"
    return None


@functools.cache
def dvc() -> str | None:
    if dvc_executable() is None:
        return "dvc is not installed (pip install 'recipe-ledger[publish]')"
    return None


def dvc_executable() -> str | None:
    """The venv's own dvc first (the one the publish extra installed), else any on PATH."""
    return shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")


@functools.cache
def ray() -> str | None:
    """Ray's package and its `ray` command (the sweep tests start their own local cluster)."""
    missing = _importable("ray", "pip install 'recipe-ledger[ray]'")
    if missing:
        return missing
    if not (Path(sys.executable).parent / "ray").is_file():
        return f"no `ray` command beside {sys.executable}: pip install 'recipe-ledger[ray]'"
    return None


PROBES: dict[str, Probe] = {
    "docker-sdk": docker_sdk,
    "docker": docker_daemon,
    "registry": registry,
    "vllm": vllm,
    "torch-gloo": torch_gloo,
    "sglang": sglang,
    "tserve": tserve,
    "aiperf": aiperf,
    "lm_eval": lm_eval,
    "cpu-lane": cpu_lane,
    "browser": browser,
    "compat": compat,
    "mlflow": mlflow,
    "tracking-server": tracking_server,
    "dvc": dvc,
    "ray": ray,
}


def required_resources(environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    """The resources ``RECIPE_LEDGER_REQUIRE`` names (``all``: every one); an unknown name is an error."""
    names = {name.strip() for name in environ.get(ENV_VAR, "").split(",") if name.strip()}
    if "all" in names:
        return frozenset(PROBES)
    unknown = sorted(names - PROBES.keys())
    if unknown:
        raise ValueError(
            f"{ENV_VAR} names unknown resources {unknown}; known: all, {', '.join(sorted(PROBES))}"
        )
    return frozenset(names)


def requires_everything(environ: Mapping[str, str] = os.environ) -> bool:
    return required_resources(environ) == PROBES.keys()


def require(resource: str, reason_if_missing: str | None = None) -> None:
    """Return when ``resource`` is there; otherwise skip the test, or fail it when it is required.

    ``reason_if_missing`` says what the test loses without it (it leads the message); the probe's
    own words, what is missing and the command that provides it, always follow.
    """
    if resource not in PROBES:
        raise ValueError(f"unknown resource {resource!r}; known: {', '.join(sorted(PROBES))}")
    missing = PROBES[resource]()
    if missing is None:
        return
    message = f"{reason_if_missing}: {missing}" if reason_if_missing else missing
    if resource in required_resources():
        pytest.fail(f"{ENV_VAR} requires {resource}, but {message}", pytrace=False)
    pytest.skip(message)
