"""deploy/kubernetes/: the manifests pass ``kubernetes-validate --strict``; the sidecar is a native sidecar with
its probes on the config's metrics port, a locked-down security context, its config from a ConfigMap (which
check-config accepts), its secrets from a Secret, its state on a volume; Fluent Bit forwards to it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sidecar.cli.core import check_config

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
#: The oldest Kubernetes with native sidecars on by default (init containers with restartPolicy: Always).
KUBERNETES = "1.29.0"


def documents(name: str) -> dict[str, dict[str, Any]]:
    """The manifests of deploy/kubernetes/NAME by ``Kind/name``."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / name).read_text(encoding="utf-8"))
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def sidecar_config(doc: dict[str, Any]) -> dict[str, Any]:
    """The querylog.yaml of a ConfigMap."""
    config = yaml.safe_load(doc["data"]["querylog.yaml"])
    assert isinstance(config, dict)
    return config


def port(address: str) -> int:
    return int(address.rpartition(":")[2])


def check_locked_down(container: dict[str, Any]) -> None:
    """Non-root, read-only root file system, no capability, no privilege escalation, requests and limits."""
    ctx = container["securityContext"]
    assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert {"requests", "limits"} <= set(container["resources"])
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])


def check_sidecar(pod: dict[str, Any], container: dict[str, Any], config: dict[str, Any], configmap: str) -> None:
    """The sidecar container of a Pod spec: probes on the metrics port, config, secrets and state mounted."""
    check_locked_down(container)
    assert pod["securityContext"]["runAsNonRoot"] is True and container["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] >= 1000
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == port(config["metrics_listen"])
    assert config["metrics_listen"].startswith("0.0.0.0:")  # the kubelet probes the Pod's address
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    readiness = container["readinessProbe"]
    assert readiness["httpGet"] == {"path": "/readyz", "port": "metrics"}
    # SIGTERM turns /readyz 503: input goes on until the probe has failed and the Pod left the Service's endpoints
    assert config["drain_seconds"] > readiness["periodSeconds"] * readiness["failureThreshold"]
    assert pod["terminationGracePeriodSeconds"] > config["drain_seconds"] + 30
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert volumes[mounts["/etc/querylog"]]["configMap"]["name"] == configmap  # the image's config path
    assert mounts[config["state_dir"]] == "state"
    assert "emptyDir" in volumes["state"] or "persistentVolumeClaim" in volumes["state"]
    assert "/tmp" in mounts  # the root file system is read-only
    secret_files = [str(v) for f in config["filters"] for opts in f.values() for k, v in opts.items() if "file" in k]
    secrets = [p for p, name in mounts.items() if "secret" in volumes[name]]
    assert secret_files and all(any(f.startswith(f"{s}/") for s in secrets) for f in secret_files)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_validate_strict(manifest: Path) -> None:
    """kubernetes-validate --strict (PyPI, in the dev extra) accepts every document of the file."""
    tool = shutil.which("kubernetes-validate", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    if tool is None:
        pytest.skip("kubernetes-validate is not installed (pip install kubernetes-validate: the dev extra has it)")
    run = subprocess.run(
        [tool, "--strict", "--kubernetes-version", KUBERNETES, str(manifest)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("name", ["querylog-config", "querylog-forward-config"])
def test_the_configmaps_configs_pass_check_config(name: str, tmp_path: Path) -> None:
    """The sidecar's YAML in each ConfigMap is a valid config (check-config touches no file, socket or state)."""
    (doc,) = [d for m in MANIFESTS for key, d in documents(m.name).items() if key == f"ConfigMap/{name}"]
    text = doc["data"]["querylog.yaml"]
    secrets = tmp_path / "secrets"  # check-config reads the secret files: the Secret's keys, mounted here
    secrets.mkdir()
    for key in re.findall(r"/run/secrets/querylog/([\w-]+)", text):
        (secrets / key).write_text(f"{key}-0123456789abcdef\n", encoding="utf-8")
    path = tmp_path / "querylog.yaml"
    path.write_text(text.replace("/run/secrets/querylog/", f"{secrets}/"), encoding="utf-8")
    result = CliRunner().invoke(check_config, [str(path)])
    assert result.exit_code == 0, result.output


def test_the_frontend_has_the_sidecar_as_a_native_sidecar() -> None:
    """An init container with restartPolicy: Always, ready (startup probe on /readyz) before the frontend."""
    docs = documents("frontend-with-sidecar.yaml")
    pod = docs["Deployment/search-frontend"]["spec"]["template"]["spec"]
    (sidecar,) = pod["initContainers"]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    config = sidecar_config(docs["ConfigMap/querylog-config"])
    check_sidecar(pod, sidecar, config, "querylog-config")
    assert config["sources"][0]["grpc"]["listen"].startswith("127.0.0.1:")  # only the Pod's containers reach it
    (frontend,) = pod["containers"]
    check_locked_down(frontend)
    token = {e["name"]: e for e in frontend["env"]}["QUERYLOG_GRPC_TOKEN"]["valueFrom"]["secretKeyRef"]
    secret = {v["name"]: v for v in pod["volumes"]}["secrets"]["secret"]["secretName"]
    assert token["name"] == secret
    assert config["sources"][0]["grpc"]["auth_token_file"].endswith("/" + token["key"])


def test_fluent_bit_forwards_to_the_sidecar_with_a_shared_key() -> None:
    """The DaemonSet's forward output reaches the Service's port, the sidecar's forward source, with the shared
    key of the Secret the sidecar reads; one sidecar replica (one writer of its state volume)."""
    docs = documents("fluent-bit-daemonset.yaml")
    deployment = docs["Deployment/querylog"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    pod = deployment["template"]["spec"]
    (sidecar,) = pod["containers"]
    config = sidecar_config(docs["ConfigMap/querylog-forward-config"])
    check_sidecar(pod, sidecar, config, "querylog-forward-config")
    forward = config["sources"][0]["forward"]
    (service_port,) = docs["Service/querylog"]["spec"]["ports"]
    assert (
        service_port["port"]
        == port(forward["listen"])
        == {p["name"]: p for p in sidecar["ports"]}["forward"]["containerPort"]
    )
    conf = docs["ConfigMap/fluent-bit-config"]["data"]["fluent-bit.conf"]
    output = conf[conf.index("[OUTPUT]") :]
    settings = dict(line.split(None, 1) for line in output.splitlines()[1:] if line.strip())
    assert settings["Name"] == "forward" and settings["Require_ack_response"] == "On"
    assert settings["Host"].startswith("querylog.") and int(settings["Port"]) == service_port["port"]
    assert settings["Shared_Key"] == "${FORWARD_SHARED_KEY}"
    assert "Parsers_File" in conf and "parsers.conf" in docs["ConfigMap/fluent-bit-config"]["data"]
    (bit,) = docs["DaemonSet/fluent-bit"]["spec"]["template"]["spec"]["containers"]
    check_locked_down(bit)
    key = {e["name"]: e for e in bit["env"]}["FORWARD_SHARED_KEY"]["valueFrom"]["secretKeyRef"]
    secret = {v["name"]: v for v in pod["volumes"]}["secrets"]["secret"]
    assert key["name"] == secret["secretName"]
    assert forward["shared_key_file"].endswith("/" + key["key"])
