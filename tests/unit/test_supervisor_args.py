"""Which arguments each service gets from the supervisor (``up``, ``demo`` and the bus and cluster engines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es.supervisor import PROVISIONING, SERVICES, Supervisor


def test_each_service_gets_only_its_own_arguments() -> None:
    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=Path("/tmp/unused"),
        kube_args=["--kube-server", "http://127.0.0.1:1"],
        watcher_args=["--config", "/etc/kueue/config.yaml"],
        decider_args=["--stepped"],
        health_port=9000,
    )
    args = {name: supervisor.service_args(name) for name in SERVICES}

    assert args["watcher"][:4] == ["service", "watcher", "--nats", "nats://127.0.0.1:4222"]
    assert "--config" in args["watcher"] and "--kube-server" in args["watcher"]
    assert "--kube-server" in args["dispatcher"]
    assert "--config" not in args["dispatcher"] and "--stepped" not in args["dispatcher"]
    for decider in ("admitter", "preemptor", "tas-placer"):
        assert "--stepped" in args[decider]
        assert "--kube-server" not in args[decider] and "--config" not in args[decider]
    ports = [args[name][args[name].index("--health-port") + 1] for name in SERVICES]
    assert ports == [str(9000 + i) for i in range(len(SERVICES))]


def test_the_compactor_gets_the_compact_command_and_a_health_port_of_its_own() -> None:
    """The compactor's health port comes after the supervisor's (PORT+5), so neither takes the other's:
    a shared one made ``up --compact --health-port`` crash-loop the compactor."""
    from kueue_es.supervisor import COMPACTOR

    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=Path("/tmp/unused"),
        compact_args=["--retain-age", "30d"],
        health_port=9000,
    )
    args = supervisor.service_args(COMPACTOR)
    assert args[:3] == ["compact", "--nats", "nats://127.0.0.1:4222"] and "--retain-age" in args
    assert args[args.index("--health-port") + 1] == str(9000 + len(SERVICES) + 1)
    assert supervisor.health_url(COMPACTOR) == f"http://127.0.0.1:{9000 + len(SERVICES) + 1}"
    ports = [
        int(supervisor.service_args(name)[supervisor.service_args(name).index("--health-port") + 1])
        for name in (*SERVICES, COMPACTOR)
    ]
    assert supervisor.supervisor_port is not None
    assert len({*ports, supervisor.supervisor_port}) == len(SERVICES) + 2


def test_the_visibility_server_reads_as_reader_on_its_own_ports(tmp_path: Path) -> None:
    """The visibility server's health port comes after the compactor's (PORT+7); it gets its API port and a
    certificate directory that survives its restarts."""
    from kueue_es.supervisor import COMPACTOR, VISIBILITY

    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=tmp_path / "logs",
        kube_args=["--kube-server", "http://127.0.0.1:1"],
        health_port=9000,
        visibility_port=9443,
    )
    args = supervisor.service_args(VISIBILITY)
    assert args[:4] == ["service", "visibility", "--nats", "nats://127.0.0.1:4222"]
    assert args[args.index("--api-port") + 1] == "9443"
    assert args[args.index("--cert-dir") + 1] == str(tmp_path / "visibility-cert")
    assert "--kube-server" not in args
    assert args[args.index("--health-port") + 1] == str(9000 + len(SERVICES) + 2)
    ports = [
        int(supervisor.service_args(name)[supervisor.service_args(name).index("--health-port") + 1])
        for name in (*SERVICES, COMPACTOR, VISIBILITY)
    ]
    assert supervisor.supervisor_port is not None
    assert len({*ports, supervisor.supervisor_port}) == len(SERVICES) + 3


async def test_the_dashboard_reads_as_reader_on_its_own_port(tmp_path: Path) -> None:
    """``up --dashboard [PORT]`` and ``demo --keep`` run ``kueue-es dashboard`` on 127.0.0.1, as NATS user
    reader (its password file in the environment, as every service gets its own)."""
    import argparse
    import sys

    from kueue_es.cli import _parser
    from kueue_es.events.bus.server import LocalAuth
    from kueue_es.supervisor import DASHBOARD, MULTIKUEUE_EDGE, PUBLISHER, VISIBILITY, _processes

    auth = LocalAuth.create(tmp_path / "creds")
    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=tmp_path / "logs",
        health_port=9000,
        dashboard_port=8091,
        auth=auth,
        program=(sys.executable, "-c", "import os, sys; print(os.environ['KUEUE_ES_NATS_USER'], sys.argv[1:])"),
    )
    args = supervisor.service_args(DASHBOARD)
    assert args == ["dashboard", "--nats", "nats://127.0.0.1:4222", "--host", "127.0.0.1", "--port", "8091"]
    parsed = _parser().parse_args(args)
    assert (parsed.nats, parsed.host, parsed.port) == ("nats://127.0.0.1:4222", "127.0.0.1", 8091)
    assert supervisor.dashboard_url == "http://127.0.0.1:8091/"
    await supervisor.start((DASHBOARD,))
    [process] = supervisor.running
    assert await process.process.wait() == 0
    assert (tmp_path / "logs" / "dashboard.log").read_text().startswith("reader ['dashboard', '--nats'")

    up = _parser().parse_args(["up", "--emulator", "--dashboard"])
    assert up.dashboard == 0 and _processes(up)[-5:] == (
        VISIBILITY,
        PUBLISHER,
        PROVISIONING,
        MULTIKUEUE_EDGE,
        DASHBOARD,
    )
    assert _parser().parse_args(["up", "--emulator", "--dashboard", "8092"]).dashboard == 8092
    assert DASHBOARD not in _processes(argparse.Namespace(dashboard=None))


def test_the_publisher_runs_as_its_own_user_on_the_port_after_visibility(tmp_path: Path) -> None:
    """``up`` and ``demo`` run the publisher (KQ_PUB, services/publisher) with its health port after the
    visibility server's (PORT+8), no Kubernetes arguments, as NATS user publisher."""
    import argparse

    from kueue_es.supervisor import MULTIKUEUE_EDGE, PUBLISHER, VISIBILITY, _processes

    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=tmp_path / "logs",
        kube_args=["--kube-server", "http://127.0.0.1:1"],
        decider_args=["--partitions", "p1"],
        health_port=9000,
    )
    args = supervisor.service_args(PUBLISHER)
    assert args[:4] == ["service", "publisher", "--nats", "nats://127.0.0.1:4222"]
    assert "--kube-server" not in args and "--partitions" not in args
    assert args[args.index("--health-port") + 1] == str(9000 + len(SERVICES) + 3)
    assert _processes(argparse.Namespace(compact=None))[-4:] == (VISIBILITY, PUBLISHER, PROVISIONING, MULTIKUEUE_EDGE)


def test_the_provisioning_controller_gets_the_kubernetes_api_and_no_nats(tmp_path: Path) -> None:
    """``up`` and ``demo`` run the ProvisioningRequest check controller with the Kubernetes arguments and its
    health port (after the MultiKueue edge's) only: no NATS URL, no NATS credentials in its environment (it
    talks to the API server alone)."""
    from kueue_es.cli import _parser

    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=tmp_path / "logs",
        kube_args=["--kube-server", "http://127.0.0.1:1"],
        health_port=9000,
    )
    args = supervisor.service_args(PROVISIONING)
    port = 9000 + len(SERVICES) + 5
    assert args == [
        "service", "provisioning", "--kube-server", "http://127.0.0.1:1",
        "--health-port", str(port), "--health-host", "127.0.0.1",
    ]  # fmt: skip
    parsed = _parser().parse_args(args)
    assert (parsed.name, parsed.kube_server, parsed.nats) == ("provisioning", "http://127.0.0.1:1", None)
    assert supervisor.health_url(PROVISIONING) == f"http://127.0.0.1:{port}"  # in up's and demo's lists
    no_health = Supervisor(nats_url="nats://x", log_dir=tmp_path / "logs", kube_args=["--kube-server", "http://h"])
    assert no_health.service_args(PROVISIONING) == ["service", "provisioning", "--kube-server", "http://h"]


def test_the_demos_health_list_names_every_process_it_starts(tmp_path: Path) -> None:
    """``demo --keep`` lists where each process it starts serves its health endpoints: the provisioning
    controller and the multikueue processes too (it left the provisioning controller out)."""
    from kueue_es.demo import demo_processes, health_lines

    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222", log_dir=tmp_path / "logs", health_port=9000, dashboard_port=8999
    )
    names = demo_processes(keep=True)
    assert {PROVISIONING, "multikueue", "multikueue-edge", "dashboard", *SERVICES} <= set(names)
    lines = health_lines(supervisor, names)
    assert [line.split()[0] for line in lines] == list(names)
    assert not any("no health port" in line for line in lines)
    by_name = {line.split()[0]: line.split()[1:] for line in lines}
    assert by_name[PROVISIONING] == [f"http://127.0.0.1:{9000 + len(SERVICES) + 5}/healthz", "/readyz"]
    assert by_name["admitter"][0].endswith("/metrics")
    ports = [line.split()[1].split("/")[2] for line in lines]
    assert len(set(ports)) == len(ports)  # no two processes on one port


def test_the_multikueue_edge_gets_the_kubernetes_arguments_and_its_namespace(tmp_path: Path) -> None:
    """``up`` runs the MultiKueue edge after the publisher (health port PORT+9), against the API server the
    edges use (``--leader-elect`` too: a second ``up --leader-elect`` waits instead of writing to the workers
    twice), with its own arguments, as NATS user multikueue-edge."""
    import argparse

    from kueue_es.supervisor import MULTIKUEUE_EDGE, _processes

    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:4222",
        log_dir=tmp_path / "logs",
        kube_args=["--kube-server", "http://127.0.0.1:1", "--leader-elect"],
        decider_args=["--partitions", "p1"],
        multikueue_args=["--multikueue-namespace", "kueue-system"],
        health_port=9000,
    )
    args = supervisor.service_args(MULTIKUEUE_EDGE)
    assert args[:4] == ["service", "multikueue-edge", "--nats", "nats://127.0.0.1:4222"]
    assert args[args.index("--kube-server") + 1] == "http://127.0.0.1:1" and "--leader-elect" in args
    assert args[args.index("--multikueue-namespace") + 1] == "kueue-system" and "--partitions" not in args
    assert args[args.index("--health-port") + 1] == str(9000 + len(SERVICES) + 4)
    assert _processes(argparse.Namespace(compact=None))[-1] == MULTIKUEUE_EDGE


def test_a_finished_command_takes_over_late_stop_signals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``up`` stops its services with SIGTERM; Ctrl-C reaches them first through the terminal's process group,
    so the SIGTERM can land while one is already exiting: it then exited -15 instead of 0 (found by a new
    user). Run as a process (no argv), the command handles stop signals once it has returned (exiting with
    its own code: tests/unit/test_cli_late_signals.py); called with argv (a test, a caller) it leaves the
    caller's handlers alone."""
    import signal

    from kueue_es.cli import main

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert main(["events", "schema", "--output", str(tmp_path / "a.json")]) == 0
        assert signal.getsignal(signal.SIGTERM) == saved[signal.SIGTERM]
        monkeypatch.setattr("sys.argv", ["kueue-es", "events", "schema", "--output", str(tmp_path / "b.json")])
        assert main() == 0
        for sig in (signal.SIGTERM, signal.SIGINT):
            handler = signal.getsignal(sig)
            assert callable(handler) and handler not in (saved[sig], signal.default_int_handler)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
