"""``kueue-es``: the command line.

Commands (``kueue-es COMMAND --help`` for each):

- ``demo``: the whole system on an emulated cluster with Kueue's quick start;
- ``up``: nats-server and the five services, against a kubeconfig or an emulator;
- ``service NAME``: one service in this process (what ``up`` starts);
- ``apply -f FILE|DIR|-``: validate and apply manifests to the cluster, as kubectl would;
- ``nats-setup``: as NATS user admin, create the log stream (the services only check it exists);
- ``replay``: re-check every recorded decision against the log;
- ``explain NS/NAME``, ``list KIND``, ``status``: a workload's story and needs, kueuectl-like lists,
  usage against quota; from the log, as of now or ``--at SEQ|RFC3339``;
- ``dashboard``: a read-only web UI over the log, folded live, with a history slider (docs/dashboard.md);
- ``what-if -f CHANGES.yaml``: re-run the recorded history with changed objects (docs/what-if.md);
- ``diff LOG_A LOG_B``: where two logs' decisions first diverge, and why;
- ``scenario check|run``: admission scenarios (shared/scenarios/README.md) on an engine;
- ``events schema``: the JSON Schema of every event; ``events asyncapi``: the AsyncAPI 3.0 document of the
  public stream KQ_PUB and the log (docs/subscribing.md);
- ``deploy crds``: the CRDs of the kueue.x-k8s.io kinds kueue-es serves, from its models.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_HOME = Path(".kueue-es")
#: Seconds a Job or plain Pod runs on the simulated kubelet of ``demo`` and ``up --emulator`` (``--duration``).
DEFAULT_SIM_DURATION = 3.0
#: The decider services (kueue_es.deciders): the roles replay re-checks, each on its own NATS head.
DECIDER_SERVICES = ("admitter", "preemptor", "tas-placer", "multikueue")
COHOSTED = "deciders"
"""``kueue-es service deciders``: the admitter, preemptor and TAS placer in one process over one fold
(kueue_es.services.deciding.serve_deciders), as Kueue runs its scheduler in one manager."""
PASSWORD_DIR_ENV = "KUEUE_ES_NATS_PASSWORD_DIR"


def _exit_on_late_stop_signals(code: int) -> None:
    """The command is done and the process exits with ``code``: a SIGTERM or SIGINT now (``up`` stopping a
    service that Ctrl-C already reached through the terminal's process group) must not turn a clean exit
    into -15, and must not be lost either: if the interpreter's shutdown hangs (a worker thread still
    blocked in a read), the signal ends the process at once with ``code``. Ignoring the signal instead left
    a ``demo --keep`` that had stopped its services alive through SIGTERM, killable only with SIGKILL.
    Only for a process of its own (``argv`` None), never for a caller such as a test."""
    import signal

    def exit_now(signum: int, frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 -- a write the signal interrupted: exit anyway
                pass
        os._exit(code)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, exit_now)


def _forget_run_credentials() -> None:
    """Drop ``$KUEUE_ES_NATS_USER`` / ``$KUEUE_ES_NATS_PASSWORD_FILE`` for a command reading a stopped
    store: the server over it (``open_stopped_store``) has fresh passwords and takes a connection without
    credentials as the reader, so the run's reader password (the README's for ``--nats``), left in the
    environment, was refused with an Authorization Violation (found by a new user)."""
    from kueue_es.events.bus.nats import PASSWORD_FILE_ENV, USER_ENV

    for name in (USER_ENV, PASSWORD_FILE_ENV):
        os.environ.pop(name, None)


def main(argv: list[str] | None = None, *, prog: str = "kueue-es") -> int:
    """Parse ``argv`` and run the command; returns the process exit code. ``prog`` names the command in
    usage errors (``kubectl kueue`` when the plugin forwards to it)."""
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.command != "service":
        from kueue_es.services.runtime import configure_logging

        configure_logging(service=f"kueue-es {args.command}", level=logging.WARNING, cache=False)
    from kueue_es.events.bus.base import BusError
    from kueue_es.events.bus.server import StoreNotFoundError

    if getattr(args, "store", None) is not None and getattr(args, "nats", None) is None:
        _forget_run_credentials()
    code = 1  # what a late stop signal exits with if the command raised
    try:
        code = int(args.run(args) or 0)
        return code
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM for demo and up
        code = 130
        return code
    except StoreNotFoundError as err:  # --store DIR that holds no store: the path to give, not a NATS hint
        print(f"error: {err}", file=sys.stderr)
        code = 2
        return code
    except BusError as err:
        if args.command == "service":  # a service's failure is its supervisor's to report, with the traceback
            raise
        from kueue_es.services.runtime import LogPurgedError

        print(f"error: {err}", file=sys.stderr)
        if not isinstance(err, LogPurgedError):  # connected, with a user: the log's start is the problem
            print(
                "hint: a NATS server started by kueue-es up or demo refuses connections without a user: "
                f"set {CREDENTIAL_ENV_HINT}",
                file=sys.stderr,
            )
        code = 2
        return code
    finally:
        if argv is None:
            _exit_on_late_stop_signals(code)


#: How a one-shot command is told its NATS user (events/bus/nats.py credentials_from_env).
CREDENTIAL_ENV_HINT = "KUEUE_ES_NATS_USER=reader KUEUE_ES_NATS_PASSWORD_FILE=<run dir>/creds/reader.password"


def _parser(prog: str = "kueue-es") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Kueue-compatible admission, event-sourced on NATS.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the quick start on an emulated cluster and replay it")
    demo.add_argument("--keep", action="store_true", help="leave everything running and say how to connect")
    demo.add_argument("--jobs", type=int, default=5, help="copies of Kueue's sample Job to submit (default 5)")
    demo.add_argument(
        "--duration",
        type=float,
        default=DEFAULT_SIM_DURATION,
        help=f"seconds each Job runs (default {DEFAULT_SIM_DURATION:g})",
    )
    demo.add_argument("--dir", type=Path, default=None, help="run directory (default: a new temp dir)")
    demo.add_argument(
        "--preempt",
        action="store_true",
        help="let the ClusterQueue preempt lower priorities and submit a high-priority Job once the samples run",
    )
    demo.add_argument(
        "--multikueue",
        action="store_true",
        help="a manager and two emulated worker clusters, each with its own kueue-es: Jobs run on the workers,"
        " one worker is stopped mid-run (docs/multikueue.md)",
    )
    demo.add_argument(
        "--worker-lost-timeout",
        default="5s",
        help="with --multikueue: the manager's multiKueue.workerLostTimeout (a Go duration; default 5s)",
    )
    _config_options(demo)
    _crd_options(demo)
    demo.set_defaults(run=_run_demo)

    up = sub.add_parser("up", help="start nats-server and the five services against a cluster")
    _kube_options(up)
    up.add_argument("--emulator", action="store_true", help="start an emulated API server instead of a cluster")
    up.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --emulator: seconds each Job or plain Pod runs on its simulated kubelet, as in the demo"
        f" (default {DEFAULT_SIM_DURATION:g}; the annotation kueue-es.dev/sim-duration-seconds sets one's own)",
    )
    up.add_argument(
        "--visibility-port",
        type=int,
        default=None,
        help="HTTPS port of the visibility API on 127.0.0.1 (default a free one it binds itself; with --emulator the emulated"
        " API server proxies /apis/visibility.kueue.x-k8s.io to it)",
    )
    up.add_argument(
        "--dashboard",
        nargs="?",
        type=int,
        const=0,
        default=None,
        metavar="PORT",
        help="also run the dashboard (kueue-es dashboard, read-only web UI) on 127.0.0.1:PORT (default a free port)",
    )
    up.add_argument("--nats", default=None, help="use this NATS server instead of starting one")
    up.add_argument(
        "--nats-auth-dir",
        type=Path,
        default=None,
        help="with --nats: a directory of USER.password files (admin, watcher, admitter, preemptor, tas-placer,"
        " dispatcher); each service connects as its user, admin creates the stream (default: no user)",
    )
    up.add_argument("--dir", type=Path, default=DEFAULT_HOME, help="NATS store and logs (default ./.kueue-es)")
    _manage_option(up)
    _config_options(up)
    _crd_options(up, note=" (with --emulator)")
    up.add_argument(
        "--health-port",
        type=int,
        default=None,
        help="serve /healthz, /readyz, /metrics: the watcher on this port, the others on the next four, up's own"
        " supervisor (restarts, which processes run) on the port after them; 0: each a free port of its own,"
        " printed (default off)",
    )
    up.add_argument(
        "--crash-loop-restarts",
        type=int,
        default=5,
        metavar="N",
        help="a process that exits is restarted (backoff 1 s to 30 s); up exits 1 after more than N exits of one"
        " within --crash-loop-window (default 5)",
    )
    up.add_argument(
        "--crash-loop-window",
        type=float,
        default=2.0,
        metavar="MINUTES",
        help="the window of --crash-loop-restarts, in minutes (default 2)",
    )
    up.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="watcher, dispatcher and multikueue-edge take a Lease before working (default off: one copy of each runs)",
    )
    up.add_argument(
        "--checkpoints",
        type=Path,
        default=None,
        metavar="DIR",
        help="the deciders start from the newest checkpoint in DIR of this log (see service --checkpoints)",
    )
    up.add_argument(
        "--compact",
        nargs="?",
        const="",
        default=None,
        metavar="'ARGS'",
        help="also run the compactor (kueue-es compact: verified snapshots, retention) with these arguments,"
        " e.g. --compact '--retain-age 30d'",
    )
    _partition_options(up)
    _deciders_option(up)
    up.set_defaults(run=_run_up)

    service = sub.add_parser("service", help="run one service in this process")
    service.add_argument(
        "name",
        choices=[
            "watcher",
            "admitter",
            "preemptor",
            "tas-placer",
            COHOSTED,
            "multikueue",
            "dispatcher",
            "visibility",
            "publisher",
            "webhook",
            "provisioning",
            "multikueue-edge",
        ],
    )
    service.add_argument("--nats", default=None, help="NATS URL, e.g. nats://127.0.0.1:4222 (all but the webhook)")
    _nats_credential_options(service)
    service.add_argument(
        "--nats-password-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="deciders (the admitter, preemptor and TAS placer in one process): a directory of USER.password"
        " files, admitter.password, preemptor.password and tas-placer.password; each role connects as its own"
        f" user (default ${PASSWORD_DIR_ENV}, else no user)",
    )
    service.add_argument(
        "--stepped", action="store_true", help="deciders: run cycles only when a SchedulingRequested fact asks"
    )
    _kube_options(service)
    _manage_option(service)
    _config_options(service)
    _ops_options(service)
    service.add_argument(
        "--simulate-api",
        action="store_true",
        help="dispatcher: no Kubernetes; each write takes a limiter slot and lands",
    )
    service.add_argument("--api-qps", type=float, default=None, help="with --simulate-api: writes/s (default uncapped)")
    service.add_argument("--api-burst", type=int, default=None, help="with --simulate-api: burst (default 100)")
    service.add_argument(
        "--multikueue-namespace",
        default=None,
        help="multikueue-edge: the namespace of the workers' kubeconfig Secrets (default $POD_NAMESPACE,"
        " the pod's namespace, or default)",
    )
    service.add_argument(
        "--checkpoints",
        type=Path,
        default=None,
        metavar="DIR",
        help="deciders: start from the newest checkpoint in DIR (replay --write-checkpoints) whose log is the"
        " stream's, folding only what follows; else fold from the start",
    )
    _standby_options(service)
    _visibility_options(service)
    _webhook_options(service)
    service.add_argument(
        "--snapshots",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start from the newest verified snapshot of the log in the bucket"
        " KQ_SNAPSHOTS (kueue-es compact), when there is one (default on)",
    )
    service.set_defaults(run=_run_service)

    compact = sub.add_parser(
        "compact", help="snapshot the log's folds beside it, verified by replay, and purge what they cover"
    )
    compact.add_argument("--nats", required=True, help="NATS URL of the running system")
    _nats_credential_options(compact)
    compact.add_argument("--every", type=int, default=50_000, metavar="N", help="a snapshot every N messages")
    compact.add_argument(
        "--interval", default="10m", metavar="DURATION", help="or after DURATION when the log grew (default 10m)"
    )
    compact.add_argument(
        "--settle", default="2s", metavar="DURATION", help="check the log this long past the snapshot (default 2s)"
    )
    compact.add_argument(
        "--retain-age", default=None, metavar="DURATION", help="purge below the newest snapshot older than this (30d)"
    )
    compact.add_argument(
        "--retain-bytes", default=None, metavar="SIZE", help="purge below the newest snapshot when the log is larger"
    )
    compact.add_argument("--keep", type=int, default=2, metavar="N", help="snapshots kept above the log's start")
    compact.add_argument("--once", action="store_true", help="one round (snapshot what is new, retention) and exit")
    compact.add_argument(
        "--health-port", type=int, default=None, help="serve /healthz, /readyz (a round ran and verified), /metrics"
    )
    compact.add_argument("--health-host", default="127.0.0.1", help="the address the health port binds")
    compact.set_defaults(run=_run_compact)

    apply = sub.add_parser("apply", help="apply manifests to the cluster, as kubectl apply -f does")
    apply.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        help="a YAML/JSON file, a directory of them, or - for stdin (repeatable)",
    )
    apply.add_argument("-R", "--recursive", action="store_true", help="with -f DIR: also its subdirectories")
    apply.add_argument("-v", "--verbose", action="store_true", help="a line per object even for large inputs")
    _kube_options(apply)
    apply.set_defaults(run=_run_apply)

    setup = sub.add_parser("nats-setup", help="as NATS user admin: create the log stream, or bring it up to date")
    setup.add_argument("--nats", required=True, help="NATS URL, e.g. tls://kueue-es-nats.kueue-es.svc:4222")
    _nats_credential_options(setup)
    setup.add_argument(
        "--public",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also the public stream KQ_PUB, which the publisher writes (default on)",
    )
    setup.set_defaults(run=_run_nats_setup)

    replay = sub.add_parser(
        "replay",
        help="re-run every recorded decision and compare bytes",
        epilog="exit codes: 0 every decision re-checked and matched, the log complete; 1 a difference; "
        "3 some records could not be re-checked (another logic version, an unknown role, scenario seeds); "
        "4 the log is incomplete (a gap, an orphan decision, a dispatch result of no decision). "
        "1 wins over 4, 4 over 3.",
    )
    replay.add_argument(
        "--nats",
        default=None,
        help="NATS URL of a running system (none of --nats, --store, --file: the running demo --keep or up, "
        "as explain finds it)",
    )
    replay.add_argument(
        "--store", type=Path, default=None, help="a stopped system's nats store directory, or its up/demo run directory"
    )
    replay.add_argument(
        "--file", type=Path, default=None, help="a log file of JSON lines (kueue-es bench core --write-log)"
    )
    replay.add_argument(
        "--max-diffs", type=int, default=10, metavar="N", help="show the first N differences, each field by field"
    )
    replay.add_argument(
        "--progress", action="store_true", help="a progress bar on stderr even when it is not a terminal"
    )
    ranges = replay.add_argument_group("ranges and checkpoints (a checkpoint is a cache of the fold beside the log)")
    ranges.add_argument("--from", dest="start", default=None, metavar="SEQ|RFC3339", help="re-run decisions from here")
    ranges.add_argument("--to", dest="stop", default=None, metavar="SEQ|RFC3339", help="re-run decisions up to here")
    ranges.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="re-run decisions in up to N forked processes while one folds (no checkpoints needed); "
        "with --checkpoints DIR, --from or --to: re-check parts between checkpoints in N processes",
    )
    ranges.add_argument(
        "--checkpoints", type=Path, default=None, metavar="DIR", help="checkpoint directory (default LOG.checkpoints)"
    )
    ranges.add_argument(
        "--write-checkpoints", action="store_true", help="replay from the start writing a checkpoint every N events"
    )
    ranges.add_argument(
        "--checkpoint-every", type=int, default=250_000, metavar="N", help="with --write-checkpoints (default 250000)"
    )
    ranges.add_argument(
        "--verify-checkpoints", action="store_true", help="replay from the start comparing each checkpoint's state"
    )
    replay.set_defaults(run=_run_replay)

    _what_if_commands(sub)
    _scenario_commands(sub)

    from kueue_es.explain import add_commands as _log_reader_commands

    _log_reader_commands(sub)  # explain, list, status

    dashboard = sub.add_parser("dashboard", help="a read-only web UI over the log, folded live (docs/dashboard.md)")
    dashboard.add_argument("--nats", default=None, help="NATS URL of a running system (default: the one demo/up runs)")
    _nats_credential_options(dashboard)
    dashboard.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    dashboard.add_argument("--port", type=int, default=8090, help="port to serve on (default 8090; 0: a free one)")
    dashboard.set_defaults(run=_run_dashboard)

    checkpoint = sub.add_parser(
        "checkpoint", help="fold a log and write checkpoints of it, for service --checkpoints and replay"
    )
    checkpoint.add_argument("--nats", default=None, help="the log of a running system at this NATS URL")
    checkpoint.add_argument("--store", type=Path, default=None, help="the log in a stopped system's nats store")
    checkpoint.add_argument("--file", type=Path, default=None, help="a JSON-lines log (bench core --write-log)")
    checkpoint.add_argument(
        "--checkpoints", type=Path, default=None, metavar="DIR", help="where (default LOG.checkpoints)"
    )
    checkpoint.add_argument(
        "--every", type=int, default=0, metavar="N", help="also every N events (default: only at the log's end)"
    )
    checkpoint.set_defaults(run=_run_checkpoint)

    bench = sub.add_parser("bench", help="benchmarks: --config GENERATOR.yaml (Kueue's scalability test), or core")
    from kueue_es.perfbench.cli import add_options

    add_options(bench)
    bench.set_defaults(run=_run_bench)
    bench_sub = bench.add_subparsers(dest="bench_command", required=False, metavar="SUBCOMMAND")
    core = bench_sub.add_parser("core", help="the pure admission core on Kueue's large-scale shape")
    core.add_argument("--cohorts", type=int, default=10, help="cohorts (default 10)")
    core.add_argument("--queues", type=int, default=100, help="ClusterQueues per cohort (default 100)")
    core.add_argument("--scale", type=float, default=1.0, help="fraction of the 50 workloads per queue (default 1)")
    core.add_argument(
        "--tas",
        action="store_true",
        help="topology-aware placement instead: 640 nodes (10 racks x 64), 15,000 workloads (--scale shrinks them)",
    )
    core.add_argument(
        "--write-log",
        type=Path,
        default=None,
        metavar="FILE",
        help="instead: write a log of --events messages as the services encode them, as JSON lines "
        "(kueue-es replay --file FILE reads it)",
    )
    core.add_argument(
        "--events", type=int, default=1_000_000, help="with --write-log: at least this many messages (default 1M)"
    )
    core.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --write-log: also load the log into a new nats store here (kueue-es replay --store DIR)",
    )
    core.set_defaults(run=_run_bench_core)
    fold = bench_sub.add_parser("fold", help="how fast a log file folds, as every service folds it (medians of three)")
    fold.add_argument(
        "--file", type=Path, required=True, metavar="LOG", help="a JSON-lines log (bench core --write-log)"
    )
    fold.add_argument("--runs", type=int, default=3, help="runs, each from an empty state (default 3)")
    fold.set_defaults(run=_run_bench_fold)
    rules = bench_sub.add_parser(
        "rules",
        help="Kueue's rules in virtual time: the wall the admitter and preemptor cores give on a configuration"
        " when every hop between the services takes a set time (no bus, no processes)",
    )
    rules.add_argument(
        "--config", type=Path, required=True, metavar="GENERATOR", help="a Kueue scheduler-performance generator.yaml"
    )
    rules.add_argument(
        "--hop-ms",
        action="append",
        default=None,
        metavar="MS[,MS,MS,MS]",
        help="one run per use: every hop this many ms, or admitter,preemptor,dispatch,report ms"
        " (default: 0, 1, 5, 10 and 20)",
    )
    rules.add_argument(
        "--api-qps",
        type=float,
        default=None,
        metavar="N",
        help="the dispatcher's Job writes through client-go's limiter at N a second (burst 100), one at a time"
        " in log order, as the bench's --api-qps (default: none, every write lands after the dispatch hop)",
    )
    rules.add_argument(
        "--pace",
        action="append",
        type=int,
        default=None,
        metavar="N",
        help="with --api-qps, one run per use per hop setting: the admitter holds its cycles while N admitted"
        " workloads wait for their start's write (a rule Kueue does not have: what pacing would give);"
        " 0 for none (default: 0)",
    )
    rules.set_defaults(run=_run_bench_rules)

    events = sub.add_parser("events", help="the event vocabulary")
    events_sub = events.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    schema = events_sub.add_parser("schema", help="print the JSON Schema of every event")
    schema.add_argument("--output", type=Path, default=None, help="write to this file instead of stdout")
    schema.set_defaults(run=_run_schema)
    asyncapi = events_sub.add_parser(
        "asyncapi", help="print the AsyncAPI 3.0 document of KQ_PUB and KQ_LOG (channels, messages, headers)"
    )
    asyncapi.add_argument("--output", type=Path, default=None, help="write to this file instead of stdout")
    asyncapi.add_argument(
        "--server",
        default="127.0.0.1:4222",
        help="host:port the document names as its NATS server (default %(default)s)",
    )
    asyncapi.set_defaults(run=_run_asyncapi)

    deploy = sub.add_parser("deploy", help="Kubernetes manifests")
    deploy_sub = deploy.add_subparsers(dest="deploy_command", required=True, metavar="SUBCOMMAND")
    crds = deploy_sub.add_parser("crds", help="the kueue.x-k8s.io/v1beta2 CRDs, generated from the models")
    crds.add_argument("-o", "--output-dir", type=Path, default=None, help="write one file per CRD here (deploy/crds)")
    crds.add_argument("--check", action="store_true", help="with -o: exit 1 if the files there are not up to date")
    crds.set_defaults(run=_run_deploy_crds)
    hooks = deploy_sub.add_parser(
        "webhooks", help="the Mutating/ValidatingWebhookConfiguration of every kind the webhook serves"
    )
    hooks.add_argument("-o", "--output", type=Path, default=None, help="write them to this file")
    hooks.add_argument("--check", action="store_true", help="with -o: exit 1 if the file is not up to date")
    hooks.set_defaults(run=_run_deploy_webhooks)
    roles = deploy_sub.add_parser(
        "roles", help="Kueue's user-facing ClusterRoles (kueue-batch-admin-role, kueue-batch-user-role, ...)"
    )
    roles.add_argument("-o", "--output", type=Path, default=None, help="write them to this file")
    roles.add_argument("--check", action="store_true", help="with -o: exit 1 if the file is not up to date")
    roles.set_defaults(run=_run_deploy_roles)
    return parser


def _what_if_commands(sub: Any) -> None:
    """``what-if`` and ``diff`` (kueue_es/whatif, docs/what-if.md)."""
    what_if = sub.add_parser(
        "what-if",
        help="re-run the recorded history with changed objects and report what would differ",
        epilog="exit codes: 0 the report was printed; 1 the simulation did not settle (a livelock); 2 bad input "
        "(the CHANGES file, the log source, --from) or no running system found. See docs/what-if.md for the "
        "CHANGES format.",
    )
    what_if.add_argument("-f", "--filename", dest="changes", required=True, metavar="CHANGES.yaml")
    what_if.add_argument(
        "--from", dest="start", default=None, metavar="SEQ|RFC3339", help="keep the log as recorded up to here"
    )
    what_if.add_argument("--nats", default=None, help="NATS URL of a running system (default: the one demo/up runs)")
    what_if.add_argument("--store", type=Path, default=None, help="a stopped system's nats store directory")
    what_if.add_argument("--file", type=Path, default=None, help="a log file of JSON lines")
    what_if.add_argument("--all", action="store_true", help="list every workload, not only those that differ")
    what_if.add_argument(
        "--write-log", type=Path, default=None, metavar="FILE", help="write the what-if's log (JSON lines)"
    )
    what_if.add_argument("--progress", action="store_true", help="progress bars on stderr even when not a terminal")
    what_if.set_defaults(run=_run_what_if)

    diff = sub.add_parser(
        "diff",
        help="where two logs' decisions first diverge, and why",
        epilog="LOG_A and LOG_B: each a nats:// or tls:// URL (the user from $KUEUE_ES_NATS_USER and "
        "$KUEUE_ES_NATS_PASSWORD_FILE), a stopped system's store directory, or a JSON-lines log file. "
        "Exit codes: 0 the logs decide the same; 1 they diverge; 2 bad input.",
    )
    diff.add_argument("log_a", metavar="LOG_A")
    diff.add_argument("log_b", metavar="LOG_B")
    diff.add_argument("--ignore-times", action="store_true", help="compare decisions without their times")
    diff.set_defaults(run=_run_diff)


def _run_what_if(args: argparse.Namespace) -> int:
    from kueue_es.whatif import command

    return command.run(args)


def _run_diff(args: argparse.Namespace) -> int:
    from kueue_es.whatif import command

    return command.run_diff(args)


def _scenario_commands(sub: Any) -> None:
    from kueue_es.scenarios.specs import ENGINE_NAMES

    scenario = sub.add_parser("scenario", help="run admission scenarios and check their outcome")
    scenario_sub = scenario.add_subparsers(dest="scenario_command", required=True, metavar="SUBCOMMAND")
    check = scenario_sub.add_parser(
        "check", help="run scenarios and compare with their expect; exit 1 on a mismatch, 2 on a bad file"
    )
    check.add_argument("paths", nargs="+", type=Path, metavar="FILE_OR_DIR", help="scenario files or directories")
    check.add_argument("--engine", choices=ENGINE_NAMES, default="core", help="engine to run on (default core)")
    check.set_defaults(run=_run_scenario_check)
    run = scenario_sub.add_parser("run", help="run one scenario and print its outcome")
    run.add_argument("path", type=Path, metavar="FILE", help="a scenario file")
    run.add_argument("--engine", choices=ENGINE_NAMES, default="core", help="engine to run on (default core)")
    run.add_argument("--output", choices=("json", "yaml"), default="yaml", help="output format (default yaml)")
    run.set_defaults(run=_run_scenario_run)


def _kube_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kubernetes API")
    group.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG)")
    group.add_argument("--context", default=None, help="kubeconfig context (default: its current context)")
    group.add_argument("--kube-server", default=None, help="plain http URL of an API server (an emulator)")


def _run_bench(args: argparse.Namespace) -> int:
    from kueue_es.perfbench.cli import run

    return run(args)


#: Leader election timings (seconds): controller-runtime's, as kueue_es.services.leader.LeaseSettings has them (not
#: imported here: kubernetes-asyncio would slow down every command's start).
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15, 10.0, 2.0


def _ops_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("operations")
    group.add_argument(
        "--health-port", type=int, default=None, help="serve /healthz, /readyz and /metrics on this port (default off)"
    )
    group.add_argument(
        "--health-host",
        default="127.0.0.1",
        help="address the health server binds (default 127.0.0.1; 0.0.0.0 for every interface, as in a pod)",
    )
    group.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="watcher, dispatcher, multikueue-edge: work only while holding a coordination.k8s.io Lease (default off)",
    )
    group.add_argument("--leader-elect-lease-name", default=None, help="the Lease (default kueue-es-NAME)")
    group.add_argument(
        "--leader-elect-namespace",
        default=None,
        help="namespace of the Lease (default $POD_NAMESPACE, the pod's namespace, or default)",
    )
    group.add_argument(
        "--leader-elect-lease-duration",
        type=int,
        default=LEASE_DURATION,
        help=f"seconds a standby waits for an unrenewed lease (default {LEASE_DURATION})",
    )
    group.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=RENEW_DEADLINE,
        help=f"seconds the holder tries to renew before giving up (default {RENEW_DEADLINE:g})",
    )
    group.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=RETRY_PERIOD,
        help=f"seconds between attempts (default {RETRY_PERIOD:g})",
    )


#: The deciders' standby lease timings (seconds), as kueue_es.services.standby.StandbySettings has them.
STANDBY_LEASE_DURATION, STANDBY_RENEW_DEADLINE, STANDBY_RETRY_PERIOD = 1.5, 1.0, 0.5


def _visibility_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("visibility (Kueue's visibility.kueue.x-k8s.io API over HTTPS)")
    group.add_argument("--api-port", type=int, default=8082, help="port of the API (default 8082, as Kueue's)")
    group.add_argument(
        "--api-host", default="127.0.0.1", help="address the API binds (default 127.0.0.1; 0.0.0.0 in a pod)"
    )
    group.add_argument("--tls-cert-file", type=Path, default=None, help="the server's certificate (PEM)")
    group.add_argument("--tls-private-key-file", type=Path, default=None, help="its private key (PEM)")
    group.add_argument(
        "--cert-dir",
        type=Path,
        default=None,
        help="without --tls-cert-file: a self-signed certificate for localhost and 127.0.0.1 is kept here"
        " (made when missing; default a new temporary directory)",
    )
    group.add_argument(
        "--delegated-auth",
        action="store_true",
        help="in a pod: authenticate (front-proxy certificate, TokenReview) and authorize (SubjectAccessReview)"
        " every request with the cluster, as an aggregated API server does",
    )


def _webhook_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("webhook (Kueue's job admission webhooks over HTTPS; docs/webhooks.md)")
    group.add_argument("--webhook-port", type=int, default=9443, help="HTTPS port (default 9443, as Kueue's)")
    group.add_argument(
        "--webhook-host", default="127.0.0.1", help="address it binds (default 127.0.0.1; 0.0.0.0 in a pod)"
    )
    group.add_argument(
        "--internal-cert-management",
        action="store_true",
        help="keep a self-signed CA and serving certificate in a Secret, renew them before expiry and put the CA"
        " into the webhook configurations (Kueue's internalCertManagement); else serve the files in --cert-dir",
    )
    group.add_argument("--webhook-namespace", default="kueue-es", help="namespace of the Service and Secret")
    group.add_argument("--webhook-service-name", default="kueue-es-webhook-service", help="the webhook's Service")
    group.add_argument(
        "--webhook-secret-name", default="kueue-es-webhook-server-cert", help="the Secret holding the certificates"
    )
    group.add_argument("--mutating-webhook-configuration", default="kueue-es-mutating-webhook-configuration")
    group.add_argument("--validating-webhook-configuration", default="kueue-es-validating-webhook-configuration")
    group.add_argument(
        "--cert-check-interval", type=float, default=60.0, help="seconds between certificate checks (default 60)"
    )


def _deciders_option(parser: argparse.ArgumentParser, *, default: str = "separate") -> None:
    parser.add_argument(
        "--deciders",
        choices=("separate", "cohosted"),
        default=default,
        help="separate: the admitter, preemptor and TAS placer each in its own process; cohosted: the three in"
        f" one process over one fold (kueue-es service deciders, docs/design.md) (default {default})",
    )


def _partition_list(text: str) -> list[str] | None:
    """``--partitions``: ``all`` (None) or a comma list of partition ids (``c-<root cohort>``,
    ``q-<cluster queue>``, ``x-unrouted``, ``p0``); raises ArgumentTypeError for an empty list."""
    if text.strip() == "all":
        return None
    partitions = [p.strip() for p in text.split(",") if p.strip()]
    if not partitions or any(not p.replace("-", "").replace("_", "").replace("%", "").isalnum() for p in partitions):
        raise argparse.ArgumentTypeError(f"--partitions takes 'all' or a comma list of partition ids, not {text!r}")
    return partitions


def _partition_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("partitions (admitter, preemptor, tas-placer; docs/design.md Partitions)")
    group.add_argument(
        "--partitions",
        type=_partition_list,
        default=None,
        metavar="all|LIST",
        help="the partitions (cohort trees) to decide: all (default; with the standby lease spread over the"
        " replicas through --partition-slots lease slots) or a comma list of partition ids (static: no lease)",
    )
    group.add_argument(
        "--partition-slots",
        type=int,
        default=None,
        metavar="S",
        help="with --partitions all and the standby lease: lease slots the partitions are spread over"
        " (crc32(partition) %% S; keys <user>.s<k> in KQ_LEASES); N replicas take about S/N each (default 16)."
        " Every replica of a decider must use the same S. Refused with a static --partitions LIST or"
        " --no-standby-lease, where there are no slots",
    )


DEFAULT_PARTITION_SLOTS = 16
"""``--partition-slots`` when not given (``kueue_es.services.standby.DEFAULT_SLOTS``)."""


def _partition_slots_problem(args: argparse.Namespace, *, decider: bool = True) -> str | None:
    """Why ``--partition-slots`` (given) has no effect here, or None: it is for the deciders, with
    ``--partitions all`` and the standby lease; a static list takes no lease (docs/design.md Partitions)."""
    slots = args.partition_slots
    if slots is None:
        return None
    if slots < 1:
        return f"--partition-slots must be at least 1, got {slots}"
    if not decider:
        return "--partition-slots is for the deciders (admitter, preemptor, tas-placer)"
    if args.partitions is not None:
        return (
            f"--partition-slots {slots} has no effect with a static --partitions {','.join(args.partitions)}:"
            " a static list takes no lease slots, the replica decides exactly the partitions listed; give"
            " --partitions all (the lease slots spread the partitions over the replicas) or leave"
            " --partition-slots out"
        )
    if getattr(args, "standby_lease", None) is False:
        return (
            f"--partition-slots {slots} has no effect with --no-standby-lease: the slots are standby leases;"
            " without them every replica decides every partition"
        )
    return None


def _standby_options(parser: argparse.ArgumentParser) -> None:
    _partition_options(parser)
    group = parser.add_argument_group("standby replicas (admitter, preemptor, tas-placer, dispatcher)")
    group.add_argument(
        "--standby-lease",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="decide and commit (the dispatcher: write) only while holding the service's lease in the NATS"
        " bucket KQ_LEASES; other replicas fold and stand by (default on for the deciders, off for the"
        " dispatcher; a single replica just holds it)",
    )
    group.add_argument(
        "--standby-lease-duration",
        type=float,
        default=STANDBY_LEASE_DURATION,
        help=f"seconds a standby waits for an unrenewed lease (default {STANDBY_LEASE_DURATION:g})",
    )
    group.add_argument(
        "--standby-renew-deadline",
        type=float,
        default=STANDBY_RENEW_DEADLINE,
        help="seconds after its last renewal the holder stops committing (default"
        f" {STANDBY_RENEW_DEADLINE:g}; below the lease duration)",
    )
    group.add_argument(
        "--standby-retry-period",
        type=float,
        default=STANDBY_RETRY_PERIOD,
        help=f"seconds between renewals (default {STANDBY_RETRY_PERIOD:g})",
    )


def _run_bench_tas(args: argparse.Namespace) -> int:
    import platform

    from rich.console import Console
    from rich.table import Table

    from kueue_es.bench import run_tas_bench

    result = run_tas_bench(workloads=round(15_000 * args.scale))
    table = Table(title="kueue-es bench core --tas (admitter decide + fold with TAS placement, in-process)")
    for column in ("nodes", "ClusterQueues", "workloads", "cycles", "placements", "decide s", "fold s", "placements/s"):
        table.add_column(column, justify="right")
    table.add_row(
        str(result.nodes),
        str(result.cluster_queues),
        str(result.workloads),
        str(result.cycles),
        str(result.placements),
        f"{result.decide_seconds:.2f}",
        f"{result.fold_seconds:.2f}",
        f"{result.placements_per_second:,.0f}",
    )
    console = Console(soft_wrap=True, width=max(Console().width, 110))
    console.print(table)
    console.print(f"peak RSS {result.peak_rss_mib:.0f} MiB; Python {platform.python_version()} on {platform.machine()}")
    return 0


def _run_bench_core(args: argparse.Namespace) -> int:
    import platform

    from rich.console import Console
    from rich.table import Table

    from kueue_es.bench import run_core_bench

    if args.tas:
        return _run_bench_tas(args)
    if args.write_log is not None:
        return _run_bench_write_log(args)
    result = run_core_bench(cohorts=args.cohorts, queues_per_cohort=args.queues, scale=args.scale)
    table = Table(title="kueue-es bench core (admitter decide + fold, in-process)")
    for column in (
        "ClusterQueues",
        "workloads",
        "cycles",
        "decisions",
        "decide s",
        "fold s",
        "decisions/s",
        "peak RSS MiB",
    ):
        table.add_column(column, justify="right")
    table.add_row(
        str(result.cluster_queues),
        str(result.workloads),
        str(result.cycles),
        str(result.decisions),
        f"{result.decide_seconds:.2f}",
        f"{result.fold_seconds:.2f}",
        f"{result.decisions_per_second:,.0f}",
        f"{result.peak_rss_mib:.0f}",
    )
    console = Console(soft_wrap=True, width=max(Console().width, 110))
    console.print(table)
    console.print(
        f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs"
    )
    return 0


def _run_bench_rules(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from kueue_es.perfbench import generator, ideal, rules

    try:
        hops = [rules.parse_hops(text) for text in (args.hop_ms or ["0", "1", "5", "10", "20"])]
        if args.pace and not args.api_qps:
            raise ValueError("--pace needs --api-qps: without a write budget no start waits for its write")
        paces = [pace or None for pace in (args.pace or [0])]
        budgets = [rules.WriteBudget(qps=args.api_qps, pace=pace) if args.api_qps else None for pace in paces]
        for budget in budgets:
            if budget is not None:
                rules.check_budget(budget)
        generated = generator.generate(generator.load_config(args.config))
    except (generator.ConfigError, ValueError) as err:
        print(f"kueue-es bench rules: {err}", file=sys.stderr)
        return 2
    planned = generated.planned()
    bound = ideal.ideal_bound(generated, planned)
    classes = sorted({wl.class_name for wl in planned})
    table = Table(title=f"kueue-es bench rules {args.config}: Kueue's rules (our cores) in virtual time")
    table.add_column("hops ms: admitter / preemptor / dispatch / report")
    table.add_column("wall s", justify="right")
    table.add_column("/ ideal", justify="right")
    table.add_column("evictions " + " / ".join(classes), justify="right")
    table.add_column("avg time to admission s " + " / ".join(classes), justify="right")
    table.add_column("nominations (answers evicting nothing new)", justify="right")
    capped = args.api_qps is not None
    if capped:
        table.add_column(f"writes at {args.api_qps:g}/s (starts skipped)", justify="right")
    for hop in hops:
        for budget in budgets:
            try:
                result = rules.simulate(generated, hop, planned, writes=budget)
            except rules.LivelockError as err:
                print(f"kueue-es bench rules: {err}", file=sys.stderr)
                return 1
            setting = f"{hop.admitter_ms} / {hop.preemptor_ms} / {hop.dispatch_ms} / {hop.report_ms}"
            if budget is not None and budget.pace is not None:
                setting += f", paced at {budget.pace}"
            row = [
                setting,
                f"{result.wall_ms / 1000:.1f}",
                f"{result.wall_ms / max(bound.makespan_ms, 1):.2f}x",
                " / ".join(f"{result.evictions[name]:,}" for name in classes),
                " / ".join(f"{result.average_time_to_admission_ms.get(name, 0) / 1000:.1f}" for name in classes),
                f"{result.nominations:,} ({result.answers_evicting_nothing_new:,})",
            ]
            if capped:
                row.append(f"{result.writes:,} ({result.unwritten_starts:,})")
            table.add_row(*row)
    bound_row = [
        "ideal bound (greedy, no preemption, no write budget)",
        f"{bound.makespan_ms / 1000:.1f}",
        "1.00x",
        " / ".join("0" for _ in classes),
        " / ".join(f"{bound.classes[name].average_time_to_admission_ms / 1000:.1f}" for name in classes),
        "0",
    ]
    if capped:
        bound_row.append("-")
    table.add_row(*bound_row)
    Console(soft_wrap=True, width=max(Console().width, 175 if capped else 130)).print(table)
    return 0


def _run_bench_fold(args: argparse.Namespace) -> int:
    from kueue_es.bench import run_fold_bench

    try:
        result = run_fold_bench(args.file, runs=args.runs)
    except (FileNotFoundError, ValueError) as err:
        print(f"kueue-es bench fold: {err}", file=sys.stderr)
        return 2
    runs = ", ".join(f"{cpu:.2f}" for cpu in result.cpu_seconds)
    print(
        f"folded {result.messages:,} messages from {args.file}, {len(result.cpu_seconds)} runs (CPU s: {runs})\n"
        f"median: {result.messages_per_second:,.0f} messages/s, {result.cpu_seconds_per_1000:.4f} CPU s per 1,000"
        f" messages ({result.cpu_seconds_per_1000 * 1000:.1f} us a message), wall {result.wall_median:.2f} s;"
        f" peak RSS {result.peak_rss_mib:.0f} MiB"
    )
    print(f"state digest: {result.digests[-1]}" + ("" if len(set(result.digests)) == 1 else " (runs differ!)"))
    return 0 if len(set(result.digests)) == 1 else 1


def _run_bench_write_log(args: argparse.Namespace) -> int:
    import time

    from kueue_es.bench import load_store, write_core_log

    result = write_core_log(
        args.write_log, events=args.events, cohorts=args.cohorts, queues_per_cohort=args.queues, scale=args.scale
    )
    print(
        f"wrote {result.messages} messages ({result.records} decision records, {result.workloads} workloads) "
        f"to {args.write_log} in {result.seconds:.1f} s; peak RSS {result.peak_rss_mib:.0f} MiB"
    )
    if args.store is not None:
        started = time.perf_counter()
        last = asyncio.run(load_store(args.write_log, args.store))
        print(f"loaded #1..#{last} into the nats store {args.store} in {time.perf_counter() - started:.1f} s")
    return 0


def _run_schema(args: argparse.Namespace) -> int:
    from kueue_es.events import codec

    text = json.dumps(codec.json_schema(), indent=2, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n")
    else:
        print(text)
    return 0


def _run_asyncapi(args: argparse.Namespace) -> int:
    from kueue_es import asyncapi

    text = json.dumps(asyncapi.document(server=args.server), indent=2, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n")
    else:
        print(text)
    return 0


def _run_deploy_roles(args: argparse.Namespace) -> int:
    from kueue_es import user_roles

    return _write_generated(args, user_roles.render(), "roles")


def _run_deploy_webhooks(args: argparse.Namespace) -> int:
    from kueue_es.services.webhook import manifests

    return _write_generated(args, manifests.render(), "webhooks")


def _write_generated(args: argparse.Namespace, text: str, what: str) -> int:
    """Print ``text``, or write it to ``args.output`` (``--check``: exit 1 when the file differs)."""
    if args.output is None:
        print(text, end="")
        return 0
    if args.check:
        if not args.output.is_file() or args.output.read_text() != text:
            print(f"{args.output} is not up to date: run kueue-es deploy {what} -o {args.output}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


def _run_deploy_crds(args: argparse.Namespace) -> int:
    from kueue_es import crds

    if args.output_dir is None:
        print(crds.render_stream(), end="")
        return 0
    if args.check:
        stale = crds.stale(args.output_dir)
        for name in stale:
            print(
                f"{args.output_dir / name} is not up to date: run kueue-es deploy crds -o {args.output_dir}",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in crds.write(args.output_dir):
        print(f"wrote {path}")
    return 0


MANAGE_ENV = "KUEUE_ES_MANAGE_JOBS_WITHOUT_QUEUE_NAME"


def _manage_option(parser: argparse.ArgumentParser) -> None:
    """``--manage-jobs-without-queue-name``: Kueue's manageJobsWithoutQueueName for the watcher (default from
    $KUEUE_ES_MANAGE_JOBS_WITHOUT_QUEUE_NAME=true; ``kueue-es up`` hands it to the watcher it starts that way)."""
    parser.add_argument(
        "--manage-jobs-without-queue-name",
        action="store_true",
        default=os.environ.get(MANAGE_ENV, "").strip().lower() == "true",
        help="watcher: manage Jobs, JobSets and Pods without the queue-name label too (they go to the namespace's"
        " 'default' LocalQueue; kube-system and kueue-system are left out, as Kueue's managedJobsNamespaceSelector)",
    )


def _config_options(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` and ``--feature-gates``: Kueue's manager configuration, for the watcher (which
    publishes it as ConfigurationObserved at start and whenever the file changes)."""
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="watcher: Kueue's manager configuration (controller_manager_config.yaml, config.kueue.x-k8s.io"
        " v1beta2 or v1beta1 Configuration); re-read when it changes (default: Kueue's defaults); webhook (and"
        " the emulated API server's): its feature gates, integrations.frameworks (the others get no-op"
        " webhooks), manageJobsWithoutQueueName and managedJobsNamespaceSelector",
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        metavar="GATE=BOOL,...",
        help="watcher (and webhook: ElasticJobsViaWorkloadSlices): Kueue's feature gates, as Kueue's flag (not"
        " together with featureGates in --config)",
    )


def _crd_options(parser: argparse.ArgumentParser, *, note: str = "") -> None:
    parser.add_argument(
        "--crds",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help=f"install the CRDs of this file or folder on the emulated API server at start{note}, e.g. "
        "tests/fixtures/crds (repeatable; or later: kubectl apply --server-side -f PATH)",
    )


def _load_crds(args: argparse.Namespace) -> list[dict[str, Any]] | str:
    """The CRDs ``--crds`` names, checked as the API server checks them; an error text when one is not."""
    import yaml

    from kueue_es.sim import custom_resources

    try:
        documents = custom_resources.load(args.crds)
        for document in documents:
            custom_resources.kinds_of(document)
    except (OSError, ValueError, yaml.YAMLError) as err:
        return f"--crds: {err}"
    return documents


def _check_config(args: argparse.Namespace) -> Any:
    """Read ``--config`` (and ``--feature-gates``) now, so a bad file stops the command before anything
    starts; returns the settings, or an error string."""
    from kueue_es.events import manager_config
    from kueue_es.events.manifests import ManifestError

    path: Path | None = args.config
    text = f"apiVersion: {manager_config.API_VERSIONS[0]}\nkind: Configuration\n"
    source = "<defaults>"
    if path is not None:
        try:
            text, source = path.read_text(), str(path)
        except OSError as err:
            return f"cannot read --config {path}: {err.strerror or err}"
    try:
        return manager_config.parse(text, source=source, feature_gates=args.feature_gates)
    except ManifestError as err:
        return f"invalid configuration: {err}"


def _nats_credential_options(parser: argparse.ArgumentParser) -> None:
    """``--nats-user`` and ``--nats-password-file``: who to connect as (never the password itself in argv)."""
    parser.add_argument(
        "--nats-user",
        default=None,
        help="NATS user to connect as (default $KUEUE_ES_NATS_USER, else the URL's, else none)",
    )
    parser.add_argument(
        "--nats-password-file",
        type=Path,
        default=None,
        help="file holding that user's password (default $KUEUE_ES_NATS_PASSWORD_FILE)",
    )


def _credentials_to_env(args: argparse.Namespace) -> str | None:
    """Hand ``--nats-user``/``--nats-password-file`` to kueue_es.events.bus.nats.connect through its
    environment variables; returns an error when only one of them is given."""
    if (args.nats_user is None) != (args.nats_password_file is None):
        return "give --nats-user and --nats-password-file together"
    if args.nats_user is not None:
        os.environ["KUEUE_ES_NATS_USER"] = args.nats_user
        os.environ["KUEUE_ES_NATS_PASSWORD_FILE"] = str(args.nats_password_file.resolve())
    return None


def _cohosted_credentials(args: argparse.Namespace) -> str | None:
    """``service deciders``: each role connects as its own NATS user, with its password in ``--nats-password-dir``
    (or ``$KUEUE_ES_NATS_PASSWORD_DIR``); the fold's role, the admitter, also through the environment (snapshots
    are read as it). Returns why the arguments do not fit, or None."""
    given = args.nats_password_dir
    if args.name != COHOSTED:
        return None if given is None else "--nats-password-dir is for the deciders (service deciders)"
    directory = given or (Path(os.environ[PASSWORD_DIR_ENV]) if os.environ.get(PASSWORD_DIR_ENV, "").strip() else None)
    if directory is None:
        if os.environ.get("KUEUE_ES_NATS_USER", "").strip():
            return (
                "the co-hosted deciders connect as three NATS users (admitter, preemptor, tas-placer), not one:"
                " give --nats-password-dir DIR with their USER.password files instead of --nats-user"
            )
        args.nats_password_dir = None
        return None
    if given is not None and args.nats_user is not None:
        return "give --nats-password-dir or --nats-user, not both: the co-hosted deciders connect as their own users"
    from kueue_es.services.deciding import COHOSTED_ROLES

    missing = [user for user in COHOSTED_ROLES if not (directory / f"{user}.password").is_file()]
    if missing:
        return f"--nats-password-dir {directory} has no {', '.join(f'{u}.password' for u in missing)}"
    args.nats_password_dir = directory.resolve()
    os.environ["KUEUE_ES_NATS_USER"] = COHOSTED_ROLES[0]
    os.environ["KUEUE_ES_NATS_PASSWORD_FILE"] = str(args.nats_password_dir / f"{COHOSTED_ROLES[0]}.password")
    return None


def _run_service(args: argparse.Namespace) -> int:
    from kueue_es.services import runtime

    runtime.configure_logging(service=args.name)
    if args.name == "webhook":
        return _run_webhook(args)
    if args.name == "provisioning":
        return _run_provisioning(args)
    if args.nats is None:
        print(f"error: the {args.name} needs --nats", file=sys.stderr)
        return 2
    if problem := _credentials_to_env(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if problem := _cohosted_credentials(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if (args.config is not None or args.feature_gates) and args.name != "watcher":
        print(f"error: {args.name} reads the configuration from the log; --config is for the watcher", file=sys.stderr)
        return 2
    if args.name == "watcher":
        args.manager_config = _check_config(args)
        if isinstance(args.manager_config, str):
            print(f"error: {args.manager_config}", file=sys.stderr)
            return 2
    if args.leader_elect and args.name not in ("watcher", "dispatcher", "multikueue-edge"):
        print(
            f"error: {args.name} takes no Kubernetes Lease: its replicas take turns through the NATS lease"
            " (--standby-lease, on by default); --leader-elect is for the watcher, the dispatcher and the"
            " multikueue-edge",
            file=sys.stderr,
        )
        return 2
    if args.standby_lease and args.name == "watcher":
        print(
            "error: --standby-lease is for the deciders and the dispatcher; the watcher has --leader-elect",
            file=sys.stderr,
        )
        return 2
    if args.partitions is not None and args.name not in (*DECIDER_SERVICES, COHOSTED):
        print(
            "error: --partitions is for the deciders (admitter, preemptor, tas-placer, deciders, multikueue)",
            file=sys.stderr,
        )
        return 2
    if problem := _partition_slots_problem(args, decider=args.name in (*DECIDER_SERVICES, COHOSTED)):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        print("error: give --tls-cert-file and --tls-private-key-file together", file=sys.stderr)
        return 2
    if args.standby_lease and args.leader_elect:
        print(
            "error: the dispatcher takes one lease: --standby-lease (NATS) or --leader-elect (Kubernetes)",
            file=sys.stderr,
        )
        return 2
    # on by default for the deciders; the dispatcher's warm standby only with --standby-lease
    if (args.name not in ("watcher", "visibility", "publisher", "multikueue-edge") and args.standby_lease) or (
        args.name not in ("watcher", "dispatcher", "visibility", "publisher", "multikueue-edge")
        and args.standby_lease is not False
    ):
        from kueue_es.services.standby import StandbySettings

        try:
            args.standby = StandbySettings(
                lease_duration=args.standby_lease_duration,
                renew_deadline=args.standby_renew_deadline,
                retry_period=args.standby_retry_period,
            )
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    try:
        asyncio.run(runtime.run_until_signalled(lambda stop: _serve(args, stop)))
    except Exception as err:
        if isinstance(err, runtime.LogPurgedError):
            runtime.log.error("log_purged", error=str(err))
            print(f"error: {err}", file=sys.stderr)
            return 1
        # kueue_es.services.leader (kubernetes_asyncio, about 1 s to import) only when a lease is used
        if args.leader_elect:
            from kueue_es.services.leader import LeadershipLost

            if isinstance(err, LeadershipLost):
                print(f"error: {err}", file=sys.stderr)
                return 1
        raise
    return 0


async def _serve(args: argparse.Namespace, stop: asyncio.Event) -> None:
    import contextlib

    from kueue_es import deciders
    from kueue_es.services import collector, health
    from kueue_es.services.deciding import serve_decider

    collector.install()  # full collections walk only what changed since the last one (services/collector.py)

    settings = None
    if args.leader_elect:
        from kueue_es.services import leader

        settings = leader.LeaseSettings(
            name=args.leader_elect_lease_name or f"kueue-es-{args.name}",
            namespace=args.leader_elect_namespace or leader.default_namespace(),
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
    probe = health.Health(service=args.name, lease_duration=settings.lease_duration if settings else 15.0)
    async with contextlib.AsyncExitStack() as stack:
        if args.health_port is not None:
            await stack.enter_async_context(health.serve_health(probe, port=args.health_port, host=args.health_host))
        if args.name == COHOSTED:
            await _serve_cohosted(args, stop, probe)
            return
        if args.name in DECIDER_SERVICES:
            decider = {
                "admitter": deciders.ADMITTER,
                "preemptor": deciders.PREEMPTOR,
                "tas-placer": deciders.PLACER,
                "multikueue": deciders.MULTIKUEUE,
            }
            start = None
            if args.checkpoints is not None:
                from kueue_es import checkpoints

                start = checkpoints.start_point(args.checkpoints, warn=_log_checkpoint_refused)
            elif args.snapshots:
                start = await _snapshot_start(args.nats, args.name)
            await serve_decider(
                decider[args.name],
                nats_url=args.nats,
                stop=stop,
                stepped=args.stepped,
                connect=probe.connect,
                start=start,
                standby=getattr(args, "standby", None),
                partitions=args.partitions,
                slots=args.partition_slots or DEFAULT_PARTITION_SLOTS,
            )
            return
        if args.checkpoints is not None:
            _log_checkpoint_refused(f"the {args.name} folds from the start (only deciders start from checkpoints)")
        if args.name == "visibility":
            await _serve_visibility(args, stop, probe.connect)
            return
        if args.name == "publisher":
            from kueue_es.services.publisher.service import serve_publisher

            start = await _snapshot_start(args.nats, "publisher") if args.snapshots else None  # the whole fold
            await serve_publisher(nats_url=args.nats, stop=stop, connect=probe.connect, start=start)
            return
        if args.name == "dispatcher" and args.simulate_api:
            from kueue_es.services.dispatcher.simulated import serve_simulated_dispatcher

            await serve_simulated_dispatcher(
                nats_url=args.nats,
                stop=stop,
                qps=args.api_qps,
                burst=args.api_burst,
                connect=probe.connect,
                standby_settings=getattr(args, "standby", None),
            )
            return
        api = await _api_client(args)
        stack.push_async_callback(api.close)

        async def work(service_stop: asyncio.Event) -> None:
            if args.name == "multikueue-edge":
                from kueue_es.services import leader
                from kueue_es.services.multikueue_edge.service import serve_multikueue_edge

                await serve_multikueue_edge(
                    nats_url=args.nats,
                    api=api,
                    namespace=args.multikueue_namespace or leader.default_namespace(),
                    stop=service_stop,
                    connect=probe.connect,
                    start=await _snapshot_start(args.nats, "multikueue-edge") if args.snapshots else None,
                )
                return
            if args.name == "watcher":
                from kueue_es.services.watcher.service import serve_watcher

                await serve_watcher(
                    nats_url=args.nats,
                    api=api,
                    stop=service_stop,
                    connect=probe.connect,
                    manage_jobs_without_queue_name=args.manage_jobs_without_queue_name,
                    # absolute(), not resolve(): a ConfigMap volume swaps a symlink
                    config_path=args.config.absolute() if args.config is not None else None,
                    config=args.manager_config,
                    feature_gates=args.feature_gates,
                    start=await _snapshot_start(args.nats, "watcher") if args.snapshots else None,
                )
            else:
                from kueue_es.services.dispatcher.service import serve_dispatcher

                start = await _snapshot_start(args.nats, "dispatcher") if args.snapshots else None
                await serve_dispatcher(
                    nats_url=args.nats,
                    api=api,
                    stop=service_stop,
                    connect=probe.connect,
                    start=start,
                    standby_settings=getattr(args, "standby", None),
                )

        if settings is None:
            await work(stop)
        else:
            from kueue_es.services import leader

            await leader.run_with_lease(work, api=api, settings=settings, stop=stop, health=probe)


async def _serve_cohosted(args: argparse.Namespace, stop: asyncio.Event, probe: Any) -> None:
    """``service deciders``: the admitter, preemptor and TAS placer over one fold, each as its own NATS user."""
    from kueue_es import deciders
    from kueue_es.events.bus.server import Credentials
    from kueue_es.services.deciding import serve_deciders

    directory: Path | None = args.nats_password_dir

    async def connect(url: str, user: str) -> Any:
        credentials = (
            None if directory is None else Credentials(user=user, password_file=directory / f"{user}.password")
        )
        return await probe.connect(url, credentials)

    start = None
    if args.checkpoints is not None:
        from kueue_es import checkpoints

        start = checkpoints.start_point(args.checkpoints, warn=_log_checkpoint_refused)
    elif args.snapshots:
        start = await _snapshot_start(args.nats, "admitter")  # the decider fold
    await serve_deciders(
        (deciders.ADMITTER, deciders.PREEMPTOR, deciders.PLACER),
        nats_url=args.nats,
        stop=stop,
        connect=connect,
        stepped=args.stepped,
        start=start,
        standby=getattr(args, "standby", None),
        partitions=args.partitions,
        slots=args.partition_slots or DEFAULT_PARTITION_SLOTS,
    )


async def _serve_visibility(args: argparse.Namespace, stop: asyncio.Event, connect: Any) -> None:
    import tempfile

    from kueue_es.services.visibility import server

    delegated = None
    if args.delegated_auth:
        from kueue_es.services.visibility import auth

        delegated = await auth.in_cluster()
    cert_dir = args.cert_dir or Path(tempfile.mkdtemp(prefix="kueue-es-visibility-"))
    context = server.tls_context(
        cert_file=args.tls_cert_file,
        key_file=args.tls_private_key_file,
        cert_dir=cert_dir,
        client_ca=delegated.client_ca() if delegated is not None else None,
    )
    start = await _snapshot_start(args.nats, "admitter") if args.snapshots else None  # the whole fold
    await server.serve_visibility(
        nats_url=args.nats,
        stop=stop,
        host=args.api_host,
        port=args.api_port,
        context=context,
        connect=connect,
        start=start,
        delegated=delegated,
    )


def _run_provisioning(args: argparse.Namespace) -> int:
    """``kueue-es service provisioning``: the ProvisioningRequest check controller; the Kubernetes API only, no NATS."""
    from kueue_es.services import runtime

    async def serve(stop: asyncio.Event) -> None:
        from kueue_es.services.provisioning import service

        api = await _api_client(args)
        try:
            await service.serve(api, stop, health_port=args.health_port, health_host=args.health_host)
        finally:
            await api.close()

    asyncio.run(runtime.run_until_signalled(serve))
    return 0


def _run_webhook(args: argparse.Namespace) -> int:
    """``kueue-es service webhook``: no NATS; the Kubernetes API when one is named or in a pod.
    ``--config``/``--feature-gates``: Kueue's feature gates the job webhooks follow
    (ElasticJobsViaWorkloadSlices, docs/elastic.md), ``integrations.frameworks``: the kinds of the
    frameworks it leaves out are answered as Kueue's no-op webhook answers (allowed, unchanged),
    ``manageJobsWithoutQueueName`` (adds to the flag) and ``managedJobsNamespaceSelector`` (the
    Namespace's labels read from the API when it needs them)."""
    from kueue_es.events import slices
    from kueue_es.services import runtime

    config = _check_config(args)
    if isinstance(config, str):
        print(f"error: {config}", file=sys.stderr)
        return 2
    elastic_jobs = slices.gate_enabled(config.configuration.feature_gates)
    managed_kinds = _managed_job_kinds(args, config)

    async def serve(stop: asyncio.Event) -> None:
        import tempfile

        from kueue_es.services.webhook import rotation, server

        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        api = None
        if args.kube_server or args.kubeconfig or os.environ.get("KUBECONFIG") or in_cluster:
            api = await _api_client(args)
        settings = None
        if args.internal_cert_management:
            settings = rotation.Settings(
                namespace=args.webhook_namespace,
                service_name=args.webhook_service_name,
                secret_name=args.webhook_secret_name,
                mutating_name=args.mutating_webhook_configuration,
                validating_name=args.validating_webhook_configuration,
                check_every=args.cert_check_interval,
            )
        try:
            await server.serve_webhook(
                stop=stop,
                cert_dir=args.cert_dir or Path(tempfile.mkdtemp(prefix="kueue-es-webhook-")),
                host=args.webhook_host,
                port=args.webhook_port,
                api=api,
                rotation_settings=settings,
                # the flag or the file, as the watcher has it, so both manage the same jobs
                manage_jobs_without_queue_name=args.manage_jobs_without_queue_name
                or config.manage_jobs_without_queue_name,
                elastic_jobs=elastic_jobs,
                feature_gates=config.configuration.feature_gates,
                managed_kinds=managed_kinds,
                namespace_selector=config.managed_jobs_namespace_selector,
            )
        finally:
            if api is not None:
                await api.close()

    if args.internal_cert_management and not (
        args.kube_server or args.kubeconfig or os.environ.get("KUBECONFIG") or os.environ.get("KUBERNETES_SERVICE_HOST")
    ):
        print(
            "error: --internal-cert-management needs the Kubernetes API (--kubeconfig, or run in a pod)",
            file=sys.stderr,
        )
        return 2
    asyncio.run(runtime.run_until_signalled(serve))
    return 0


async def _snapshot_start(url: str, role: str) -> Any:
    """The newest snapshot's start point for ``role``, None when there is none or it cannot be read."""
    from kueue_es import snapshots
    from kueue_es.events.bus.base import BusError

    try:
        return await snapshots.service_start(url, role, warn=_log_checkpoint_refused)
    except BusError as err:
        _log_checkpoint_refused(f"the snapshots cannot be read: {err}")
        return None


def _run_compact(args: argparse.Namespace) -> int:
    from kueue_es import snapshots

    if problem := _credentials_to_env(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return snapshots.run_command(args)


def _log_checkpoint_refused(text: str) -> None:
    import structlog

    structlog.get_logger("kueue_es.checkpoints").warning("checkpoint_not_used", detail=text)


async def _api_client(args: argparse.Namespace) -> Any:
    """The API client: ``--kube-server``, ``--kubeconfig``/``--context``, ``$KUBECONFIG``, else, in a pod
    without a kubeconfig, the in-cluster service account."""
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    from kueue_es.services.kube import client as kube

    context = getattr(args, "context", None)
    in_pod = os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG")
    default_config = Path(os.path.expanduser("~/.kube/config"))
    if args.kube_server is None and args.kubeconfig is None and in_pod and not default_config.exists():
        configuration = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        return k8s_client.ApiClient(configuration)
    return await kube.make_api_client(server=args.kube_server, kubeconfig=args.kubeconfig, context=context)


def _run_apply(args: argparse.Namespace) -> int:
    from kueue_es import apply

    try:
        docs = list(apply.documents(apply.expand(args.filename, recursive=args.recursive)))
    except apply.InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1  # as kubectl: nothing is applied
    return asyncio.run(_apply(args, docs))


async def _apply(args: argparse.Namespace, docs: list[Any]) -> int:
    """Validate every document, report the refused ones (file, document, object, field), send the rest."""

    from kubernetes_asyncio.config.config_exception import ConfigException
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from kueue_es import apply
    from kueue_es.services.kube import errors as kube_errors

    printer = apply.Printer(out=sys.stdout, err=sys.stderr, verbose=args.verbose or len(docs) <= apply.QUIET_ABOVE)
    tally = apply.Tally()
    docs = [dataclasses.replace(doc, problems=tuple(apply.problems(doc))) for doc in docs]
    valid = [doc for doc in docs if not doc.problems]
    no_kubeconfig = (
        args.kube_server is None
        and args.kubeconfig is None
        and not os.environ.get("KUBECONFIG")
        and not os.environ.get("KUBERNETES_SERVICE_HOST")
        and not Path("~/.kube/config").expanduser().exists()
    )
    if not valid or no_kubeconfig:  # nothing to send, or no server to send it to: the refusals, in document order
        await apply.apply_all(None, [doc for doc in docs if doc.problems], printer=printer, tally=tally)
    if valid and no_kubeconfig:
        print("error: no kubeconfig: pass --kubeconfig FILE or --kube-server URL, or set KUBECONFIG", file=sys.stderr)
        return 2
    if valid:
        try:
            api = await _api_client(args)
        except (ConfigException, OSError, ValueError) as err:
            print(
                f"error: no usable kubeconfig ({err}); pass --kubeconfig FILE or --kube-server URL, or set KUBECONFIG",
                file=sys.stderr,
            )
            return 2
        console = Console(stderr=True)
        progress = Progress(
            TextColumn("applying"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=printer.verbose or not console.is_terminal,
        )
        task = progress.add_task("apply", total=len(docs))
        try:
            with progress:
                await apply.apply_all(api, docs, printer=printer, tally=tally, advance=lambda: progress.advance(task))
        except kube_errors.ConnectionFailedError as err:
            host = getattr(api.configuration, "host", "?")
            print(f"error: cannot reach the API server at {host}: {err.__cause__ or err}", file=sys.stderr)
            return 2
        finally:
            await api.close()
    print(tally.summary())
    return 1 if tally.failed else 0


def _run_scenario_check(args: argparse.Namespace) -> int:
    from kueue_es.scenarios import engines, loading

    try:
        engine = engines.open_engine(args.engine)
        files = loading.find_scenario_files(args.paths)
    except (engines.EngineUnavailable, loading.ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    try:
        for path in files:
            status = _check_scenario_file(path, engine=engine)
            counts[status] = counts.get(status, 0) + 1
    finally:
        engine.close()
    summary = f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed"
    summary += "".join(f", {counts[k]} {k}" for k in ("errors", "skipped", "xfailed", "xpassed") if counts.get(k))
    print(summary, flush=True)
    if counts.get("errors"):
        return 2
    return 1 if counts.get("failed") or counts.get("xpassed") else 0


def _check_scenario_file(path: Path, *, engine: Any) -> str:
    """Check one file and print its lines; returns passed, failed, errors, skipped, xfailed or xpassed."""
    from kueue_es.scenarios import checking, engines, loading

    try:
        scenario = loading.load_scenario(path)
    except loading.ScenarioError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return "errors"
    title = f"{scenario.name} ({path})"
    if not scenario.runs_on(engine.name):
        print(f"SKIP {title}: runs only on {', '.join(scenario.engines)}", flush=True)
        return "skipped"
    try:
        mismatches = checking.check(expect=scenario.expect, outcome=engine.run(scenario))
    except engines.RunError as err:
        mismatches = [f"error: {err.problem}"]
    if scenario.xfail:
        label, status = ("XFAIL", "xfailed") if mismatches else ("XPASS", "xpassed")
        title += f": expected to fail: {scenario.xfail}"
    else:
        label, status = ("FAIL", "failed") if mismatches else ("PASS", "passed")
    print(f"{label} {title}", flush=True)
    for line in mismatches:
        print(f"  {line}", flush=True)
    return status


def _run_scenario_run(args: argparse.Namespace) -> int:
    import yaml

    from kueue_es.scenarios import engines, loading

    try:
        engine = engines.open_engine(args.engine)
        scenario = loading.load_scenario(args.path)
    except (engines.EngineUnavailable, loading.ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        outcome = engine.run(scenario).to_dict()
    except engines.RunError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    if args.output == "json":
        print(json.dumps(outcome, indent=2))
    else:
        print(yaml.safe_dump(outcome, sort_keys=False), end="")
    return 0


def _run_replay(args: argparse.Namespace) -> int:
    from kueue_es.replay import OldLayoutError

    try:
        return _replay(args)
    except OldLayoutError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _replay(args: argparse.Namespace) -> int:
    given = sum(x is not None for x in (args.nats, args.store, args.file))
    if given > 1:
        print(
            "error: give one of --nats URL (a running system), --store DIR (a stopped one) or --file FILE (a log file)",
            file=sys.stderr,
        )
        return 2
    if given == 0:
        found = _the_running_system(args)
        if isinstance(found, str):
            print(f"error: {found}", file=sys.stderr)
            return 2
        with _reading_as(found):
            return _replay_source(args)
    if args.nats is not None:
        from kueue_es import current
        from kueue_es.events.bus import base

        try:
            named = current.find(args.nats)
        except base.BusError as err:  # only one of the two user variables set
            print(f"error: {err}", file=sys.stderr)
            return 2
        # a running demo or up named by its URL is read as the reader it recorded, as when found bare
        with _reading_as(named):
            return _replay_source(args)
    return _replay_source(args)


def _replay_source(args: argparse.Namespace) -> int:
    """``kueue-es replay`` of the one source ``args`` names."""
    from kueue_es.demo import replay_and_print

    progress = args.progress or sys.stderr.isatty()
    from kueue_es.replay_ranges import forked

    ranged = args.start or args.stop or args.jobs > 1 or args.write_checkpoints or args.verify_checkpoints
    if ranged and args.nats and args.checkpoints is None and not forked(args):
        print("error: with --nats, give --checkpoints DIR", file=sys.stderr)
        return 2
    if ranged:
        from kueue_es.replay_ranges import run_ranged

        return run_ranged(args, progress=progress)
    if args.file is not None:
        from kueue_es.replay import replay_file_and_print

        return replay_file_and_print(args.file, max_diffs=args.max_diffs, progress=progress)
    return asyncio.run(
        replay_and_print(nats_url=args.nats, store=args.store, max_diffs=args.max_diffs, progress=progress)
    )


def _the_running_system(args: argparse.Namespace) -> Any:
    """No source named: the running system as ``explain`` and ``status`` find it
    (:func:`kueue_es.current.find`: ``$KUEUE_ES_NATS_URL``, else what ``demo --keep`` or ``up`` recorded).
    Sets ``args.nats`` and returns the :class:`kueue_es.current.System`, or a string saying why not
    (nothing running, or a half-set user)."""
    from kueue_es import current
    from kueue_es.events.bus import base

    try:
        system = current.find(None)
    except current.NoSystemError as err:
        return f"give --nats URL (a running system), --store DIR (a stopped one) or --file FILE (a log file): {err}"
    except base.BusError as err:
        return str(err)
    print(f"replaying the log at {system.nats_url} ({system.origin})", file=sys.stderr)
    args.nats = system.nats_url
    return system


@contextlib.contextmanager
def _reading_as(system: Any) -> Iterator[None]:
    """While inside: connections read as ``system``'s recorded user (the readers take the user from
    ``$KUEUE_ES_NATS_USER`` and ``$KUEUE_ES_NATS_PASSWORD_FILE``) unless the environment names one;
    the environment as it was afterwards."""
    from kueue_es.events.bus import nats as nats_bus

    names = (nats_bus.USER_ENV, nats_bus.PASSWORD_FILE_ENV)
    before = {name: os.environ.get(name) for name in names}
    if system.credentials is not None and not any(before.values()):
        os.environ[nats_bus.USER_ENV] = system.credentials.user
        os.environ[nats_bus.PASSWORD_FILE_ENV] = str(system.credentials.password_file)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_checkpoint(args: argparse.Namespace) -> int:
    from kueue_es import checkpoints

    return checkpoints.run_command(args)


def _run_nats_setup(args: argparse.Namespace) -> int:
    from kueue_es.events.bus import base
    from kueue_es.events.bus import nats as nats_bus

    if problem := _credentials_to_env(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        asyncio.run(nats_bus.ensure_log_stream(args.nats, timeout=10.0, public=args.public))
    except base.BusError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"stream {base.STREAM_NAME} ready" + (f" and {nats_bus.PUBLIC_STREAM_NAME}" if args.public else ""))
    return 0


def _run_up(args: argparse.Namespace) -> int:
    import shlex

    from kueue_es.events import slices
    from kueue_es.supervisor import run_up

    if args.compact is not None:
        args.compact = shlex.split(args.compact) or ["--every", "50000"]

    if args.manage_jobs_without_queue_name:
        os.environ[MANAGE_ENV] = "true"  # the services it starts inherit it; only the watcher reads it
    if isinstance(problem := _check_config(args), str):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.crds and not args.emulator:
        print("error: --crds installs CRDs on the emulator: give --emulator, or kubectl apply them", file=sys.stderr)
        return 2
    if args.duration is not None and not args.emulator:
        print(
            "error: --duration is how long the emulator's simulated kubelet runs a Job: give --emulator"
            " (on a cluster its kubelets run the pods)",
            file=sys.stderr,
        )
        return 2
    if args.duration is not None and not args.duration >= 0:
        print(f"error: --duration must be 0 or more seconds, not {args.duration:g}", file=sys.stderr)
        return 2
    if args.duration is None:
        args.duration = DEFAULT_SIM_DURATION
    if isinstance(crd_documents := _load_crds(args), str):
        print(f"error: {crd_documents}", file=sys.stderr)
        return 2
    args.crd_documents = crd_documents
    args.elastic_jobs = slices.gate_enabled(problem.configuration.feature_gates)  # the emulator's Job webhook
    args.emulator_feature_gates = dict(problem.configuration.feature_gates)  # and its Workload webhooks
    args.managed_kinds = _managed_job_kinds(args, problem)  # the emulator's webhooks: --config's integrations
    # and its manageJobsWithoutQueueName (or the flag) and managedJobsNamespaceSelector, as the watcher's
    args.emulator_manage_jobs_without_queue_name = (
        args.manage_jobs_without_queue_name or problem.manage_jobs_without_queue_name
    )
    args.managed_jobs_namespace_selector = problem.managed_jobs_namespace_selector
    if args.partitions is not None:
        print(
            f"error: up runs one replica of each decider: --partitions {','.join(args.partitions)} would leave every"
            " partition not listed with no decider, its workloads waiting for ever; up decides every partition"
            " (--partitions all, the default). A static list is for `kueue-es service` replicas whose lists"
            " together cover every partition",
            file=sys.stderr,
        )
        return 2
    if problem := _partition_slots_problem(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return asyncio.run(run_up(args))


def _run_dashboard(args: argparse.Namespace) -> int:
    """``kueue-es dashboard``: serve until Ctrl-C or SIGTERM; 2 when no system is found or the port is taken."""
    from kueue_es import current
    from kueue_es.dashboard.server import run_dashboard
    from kueue_es.services.runtime import run_until_signalled

    if problem := _credentials_to_env(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        system = current.find(args.nats)
    except current.NoSystemError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    async def run(stop: asyncio.Event) -> None:
        await run_dashboard(
            nats_url=system.nats_url,
            credentials=system.credentials,
            host=args.host,
            port=args.port,
            on_url=lambda url: print(f"dashboard {url} (log {system.nats_url}, {system.origin})", flush=True),
            stop=stop,
        )

    try:
        asyncio.run(run_until_signalled(run))
    except OSError as err:
        print(f"error: dashboard on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 2
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from kueue_es.demo import run_demo
    from kueue_es.events import slices

    if args.multikueue:
        from importlib import resources as package_files

        from kueue_es.multikueue_demo import run_multikueue_demo

        setup = Path(str(package_files.files("kueue_es") / "demo_manifests" / "multikueue-setup.yaml"))
        return asyncio.run(
            run_multikueue_demo(
                keep=args.keep,
                jobs=args.jobs,
                duration=args.duration,
                run_dir=args.dir,
                setup_path=setup,
                worker_lost_timeout=args.worker_lost_timeout,
            )
        )
    from kueue_es.supervisor import watcher_config_args

    if isinstance(problem := _check_config(args), str):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if isinstance(crd_documents := _load_crds(args), str):
        print(f"error: {crd_documents}", file=sys.stderr)
        return 2
    return asyncio.run(
        run_demo(
            crds=crd_documents,
            keep=args.keep,
            jobs=args.jobs,
            duration=args.duration,
            run_dir=args.dir,
            preempt=args.preempt,
            watcher_args=watcher_config_args(args),
            elastic_jobs=slices.gate_enabled(problem.configuration.feature_gates),
            feature_gates=dict(problem.configuration.feature_gates),
            managed_kinds=_managed_job_kinds(args, problem),
            manage_jobs_without_queue_name=problem.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=problem.managed_jobs_namespace_selector,
        )
    )


def _managed_job_kinds(args: argparse.Namespace, config: Any) -> frozenset[str] | None:
    """The job kinds whose webhooks are Kueue's own under ``--config`` (its ``integrations.frameworks``; the
    watcher watches the same), for the emulated API server and ``kueue-es service webhook``: the others get
    the no-op webhook (:func:`kueue_es.jobframework.webhooks.enabled_kinds`). None without a file (every
    integration)."""
    if args.config is None:
        return None
    from kueue_es.jobframework import webhooks

    return webhooks.enabled_kinds(config.frameworks)


if __name__ == "__main__":
    sys.exit(main())
