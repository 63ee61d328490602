"""deploy/Dockerfile's stages without a Docker engine: the wheel (the session's), installed into a fresh venv,
``querylog kb build`` as the install stage runs it, then the image's entrypoint command line with the image's
config and ENV (addresses on port 0, the state in tmp): it serves gRPC, its HEALTHCHECK command passes, and
SIGTERM ends it with exit 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from helpers.serving import ServeLog

from tests.deploy.dockerfile import ROOT, stages
from tests.packaging.wheelkit import Installed, Wheel, install

pytestmark = pytest.mark.slow

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
ROWS = (
    "142\tstaple remover\t2006-03-01 07:20:41\t1\thttp://www.staples.com/office/remover?id=7",
    "217\tcall 555-867-5309 tonight\t2006-03-02 11:01:05\t\t",
)
SECRETS = {"QUERYLOG_HMAC_KEY": "deploy-test-hmac-key-0123456789", "QUERYLOG_GRPC_TOKEN": "deploy-test-token-0123"}


@pytest.fixture(scope="module")
def image(wheel: Wheel, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The install stage: the wheel in a fresh venv (dependencies linked), the knowledge base built where the
    image's QUERYLOG_KB says (under tmp)."""
    if not Path("/usr/share/wordnet/index.sense").is_file():
        pytest.skip("WordNet is not installed (Debian wordnet-base, wordnet-sense-index: ./run setup installs them)")
    installed = install(wheel, tmp_path_factory.mktemp("image"), linked=True)
    kb = installed.work / stages()[1].env()["QUERYLOG_KB"].lstrip("/")
    built = installed.run("querylog", "kb", "build", timeout=600, extra_env={"QUERYLOG_KB": str(kb)})
    assert built.returncode == 0, built.stderr[-3000:]
    assert kb.is_file()
    return installed


def test_the_wheel_stage_check_passes_the_wheel_with_its_compiled_modules(wheel: Wheel) -> None:
    """The wheel stage's last command (deploy/check_compiled_wheel.py) on the session's wheel: it carries a current
    mypyc build of every module in pyproject.toml [tool.querylog] compiled (setup.py), as the image's will."""
    build = next(r.args for r in stages()[0].all("RUN") if "pip wheel" in r.args)
    _, script, _ = build.split("&&")[-1].split()
    done = subprocess.run(
        [sys.executable, str(ROOT / script), str(wheel.path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "compiled: adapters/otlp/scan.py" in done.stdout
    assert wheel.path.name.endswith("-linux_x86_64.whl")  # a platform wheel: it holds extension modules


def test_the_installed_compiled_modules_load_compiled(image: Installed) -> None:
    """In the install stage's venv every listed module loads from its extension module and counts as current
    (pip writes a wheel's source after its build: the digest, not file times, says it is current)."""
    from setup import compiled_sources

    modules = [s[: -len(".py")].replace("/", ".") for s in compiled_sources()]
    probe = (
        "import importlib, sys\n"
        "from sidecar.api.compiled import compiled_and_current\n"
        "for name in sys.argv[1:]:\n"
        "    m = importlib.import_module(name)\n"
        "    print(name, compiled_and_current(m.__file__), m.__file__)\n"
        "from adapters.otlp.codec import OtlpCodec\n"
        "print('otlp scan used', OtlpCodec().scan is not None)\n"
    )
    done = image.run("python", "-c", probe, *modules)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for name, line in zip(modules, lines):
        got, current, path = line.split()
        assert (got, current) == (name, "True"), line
        assert path.startswith(str(image.site)) and not path.endswith(".py"), line
    assert lines[-1] == "otlp scan used True"


def image_env(installed: Installed) -> dict[str, str]:
    """The runtime stage's ENV, its paths moved under the work folder, its addresses on loopback port 0."""
    env = stages()[-1].env()
    env.pop("PATH")  # the venv's bin is first on the clean environment's PATH already
    env["QUERYLOG_KB"] = str(installed.work / env["QUERYLOG_KB"].lstrip("/"))
    env["QUERYLOG_STATE_DIR"] = str(installed.work / env["QUERYLOG_STATE_DIR"].lstrip("/"))
    env["QUERYLOG_GRPC_LISTEN"] = env["QUERYLOG_METRICS_LISTEN"] = "127.0.0.1:0"
    return installed.environ({**env, **SECRETS})


def test_the_entrypoint_serves_and_stops_on_sigterm(image: Installed) -> None:
    """ENTRYPOINT with the image's config: the Filter RPC returns protected records (token required), the
    HEALTHCHECK command exits 0 against the metrics port, /readyz and /metrics answer 200; SIGTERM: exit 0."""
    runtime = stages()[-1]
    entry = runtime.one("ENTRYPOINT").exec_form()
    config = ROOT / runtime.copies()[entry[-1]]
    env = image_env(image)
    proc = subprocess.Popen(
        image.command(*entry[:-1], str(config)),
        cwd=image.work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = ServeLog(proc)
    try:
        (grpc_port,) = log.ports("grpc")
        metrics_port = log.metrics_port()
        (image.work / "in.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
        sent = image.run(
            "querylog", "send", "--address", f"127.0.0.1:{grpc_port}", "--token-env", "QUERYLOG_GRPC_TOKEN",
            "in.tsv", "-o", "out.tsv", extra_env=SECRETS,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr[-3000:]
        header, *lines = (image.work / "out.tsv").read_text(encoding="utf-8").splitlines()
        assert header == HEADER and len(lines) == 2
        fields = [line.split("\t") for line in lines]
        assert [f[0] for f in fields] != ["142", "217"] and all(f[0].isdigit() for f in fields)  # pseudonymized
        assert fields[0][4] == "http://www.staples.com" and "867-5309" not in lines[1]

        check = runtime.one("HEALTHCHECK").exec_form()
        assert check[0] == "python"
        healthy = image.run(*check, extra_env={**env, "QUERYLOG_METRICS_LISTEN": f"0.0.0.0:{metrics_port}"}, timeout=30)
        assert healthy.returncode == 0, healthy.stderr[-3000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=30) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as answer:
            assert answer.status == 200 and b"querylog_" in answer.read()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, log.text()[-3000:]
    assert (Path(env["QUERYLOG_STATE_DIR"])).is_dir()
