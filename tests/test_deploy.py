"""deploy/: the Kubernetes manifests pass the Kubernetes schemas (kubernetes-validate, strict) and agree
with the gateway (the ConfigMap's config loads, the probes exist, the drain is as long as the grace
period); the HAProxy configuration is the no-affinity round-robin the scale-out tests run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gateway.config import load_config

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
SECRETS = {"CURSOR_SECRET": "c" * 32, "SESSION_KEY": "s" * 32, "CLIENT_TOKEN": "t" * 32}


def manifest(kind: str) -> dict[str, Any]:
    for path in MANIFESTS:
        document = yaml.safe_load(path.read_text())
        if document["kind"] == kind:
            return document  # type: ignore[no-any-return]
    raise AssertionError(f"no {kind} in deploy/kubernetes")


@pytest.mark.parametrize("version", ["1.30.0", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_passes_the_kubernetes_schema(path: Path, version: str) -> None:
    kubernetes_validate.validate(yaml.safe_load(path.read_text()), version, strict=True)


def test_the_manifests_agree_with_the_gateway(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(manifest("ConfigMap")["data"]["config.toml"])
    config = load_config(tmp_path / "config.toml", SECRETS)
    assert config.cluster.session_keys
    assert config.server.host == "0.0.0.0"  # noqa: S104 - a pod listens on its own address
    spec = manifest("Deployment")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["ports"][0]["containerPort"] == config.server.port
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    drain = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert drain >= config.gateway.shutdown_grace_s
    assert spec["terminationGracePeriodSeconds"] > drain + config.gateway.shutdown_grace_s
    assert {e["name"] for e in container["env"]} == set(SECRETS)
    assert "sessionAffinity" not in manifest("Service")["spec"]
    assert (
        manifest("HorizontalPodAutoscaler")["spec"]["minReplicas"]
        > manifest("PodDisruptionBudget")["spec"]["minAvailable"]
    )


def test_haproxy_spreads_requests_with_no_affinity() -> None:
    text = (DEPLOY / "haproxy.cfg").read_text()
    assert re.search(r"^\s*balance roundrobin$", text, re.MULTILINE)
    assert "option httpchk GET /readyz" in text
    assert not re.search(r"^\s*(cookie|stick|hash-type|balance (source|hdr|url_param))", text, re.MULTILINE)
