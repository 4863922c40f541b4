"""deploy/monitoring: the Grafana dashboard and the PrometheusRule name only Kueue's metric families.

Every metric an alert or a panel queries must be one of Kueue's families as kueue-es exports them
(:data:`kueue_es.projections.kueue_metrics.FAMILIES`, held to Kueue's reference by
tests/unit/test_kueue_metrics.py), a histogram's through its ``_bucket``, ``_sum`` or ``_count``
series, and every label it groups or filters by must be a label of those families: so the same
rules and dashboard work on Kueue. ``kubectl kustomize deploy/monitoring`` builds the ConfigMap the
Grafana sidecar loads (label ``grafana_dashboard``) from the raw JSON.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kueue_es.projections.kueue_metrics import FAMILIES
from tests.deploy.manifests import MONITORING, find

METRIC = re.compile(r"\b((?:multi)?kueue_[a-z_]+)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
MATCHERS = re.compile(r"\b((?:multi)?kueue_[a-z_]+)\{([^}]*)\}")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _series() -> dict[str, set[str]]:
    """Every series name kueue-es exports -> its label names (``le`` too for a histogram's buckets)."""
    out: dict[str, set[str]] = {}
    for family in FAMILIES:
        labels = set(family.labels)
        if family.kind == "histogram":
            out[f"{family.name}_bucket"] = {*labels, "le"}
            out[f"{family.name}_sum"] = labels
            out[f"{family.name}_count"] = labels
        else:
            out[family.name] = labels
    return out


def _rules() -> list[dict[str, Any]]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def _dashboard() -> dict[str, Any]:
    return json.loads((MONITORING / "kueue-dashboard.json").read_text())


def _dashboard_queries() -> list[str]:
    dashboard = _dashboard()
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"])
    return queries


def _problems(expr: str) -> list[str]:
    series = _series()
    used = METRIC.findall(expr)
    problems = [f"{name} is not a Kueue series" for name in used if name not in series]
    labels = set().union(*(series.get(name, set()) for name in used)) if used else set()
    for group in GROUPING.findall(expr):
        for label in (part.strip() for part in group.split(",") if part.strip()):
            if label not in labels:
                problems.append(f"label {label} is on none of {used}")
    for name, matchers in MATCHERS.findall(expr):
        for label in re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", matchers):
            if label not in series.get(name, set()):
                problems.append(f"{name} has no label {label}")
    return problems


def test_every_alert_queries_only_kueue_families_and_their_labels() -> None:
    rules = _rules()
    assert {r["alert"] for r in rules} >= {
        "KueueWorkloadsPendingTooLong",
        "KueueClusterQueueInactive",
        "KueueEvictionsSpike",
        "KueueQuotaNearlyFull",
    }
    for rule in rules:
        assert METRIC.search(rule["expr"]), rule["alert"]
        assert _problems(rule["expr"]) == [], rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_every_dashboard_query_names_only_kueue_families_and_their_labels() -> None:
    queries = _dashboard_queries()
    assert len(queries) >= 10
    for query in queries:
        assert METRIC.search(query), query
        assert _problems(query) == [], query


def test_the_checker_catches_a_name_kueue_does_not_have() -> None:
    assert _problems("sum by (cluster_queue) (kueue_pending_workload)") != []
    assert _problems('kueue_pending_workloads{state="active"}') != []
    assert _problems("sum by (flavor) (kueue_pending_workloads)") != []
    assert _problems("sum by (cluster_queue, le) (rate(kueue_admission_wait_time_seconds_bucket[5m]))") == []


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_dashboard_configmap_for_the_grafana_sidecar() -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(MONITORING)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    docs = [d for d in yaml.safe_load_all(built) if d]
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "PodMonitor", "PrometheusRule"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    kubernetes_validate.validate(config_map, "1.36", strict=True)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "kueue-es"
    assert json.loads(config_map["data"]["kueue-dashboard.json"]) == _dashboard()


def test_the_pod_monitor_scrapes_the_admitters_metrics_where_its_pods_serve_them() -> None:
    """Kueue's e2e prometheus_test.go "should discover Kueue target and report it as up": an operator's Prometheus
    finds Kueue through its ServiceMonitor. kueue-es's PodMonitor must select the admitter's pods (only its
    /metrics has Kueue's families), name the container port its health server listens on, and the path its
    pod annotations give, or the target never comes up."""
    monitor = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())
    admitter = find("Deployment", "kueue-es-admitter")
    template = admitter["spec"]["template"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert monitor["metadata"]["namespace"] == admitter["metadata"]["namespace"]
    assert selector.items() <= template["metadata"]["labels"].items()
    for other in ("kueue-es-dispatcher", "kueue-es-watcher", "kueue-es-preemptor"):
        labels = find("Deployment", other)["spec"]["template"]["metadata"]["labels"]
        assert not selector.items() <= labels.items(), other
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (container,) = template["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
    args = container["args"]
    assert ports[endpoint["port"]] == int(args[args.index("--health-port") + 1])
    annotations = template["metadata"]["annotations"]
    assert endpoint["path"] == annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/port"] == str(ports[endpoint["port"]])
