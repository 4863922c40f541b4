"""``kubectl-kueue``: the command line of ``kubectl kueue`` (kubectl runs it as a plugin, with the words
after ``kubectl kueue`` as its arguments).

Commands and flags are kueuectl's (cmd/kueuectl/app/cmd.go and its subcommands); errors print as
kueuectl's (cobra's) do, ``Error: MESSAGE`` on stderr, exit code 1 (usage errors too). Three kinds of
command are not answered here:

- ``get``, ``describe``, ``edit``, ``patch`` and ``delete`` of the Kueue kinds (but ``delete workload``)
  are passed through to kubectl with the same arguments, as kueuectl's passthrough package does;
- ``explain``, ``what-if``, ``diff``, ``status`` and ``list ... --at SEQ|TIME`` need kueue-es's log: they
  run ``kueue-es`` (:func:`kueue_es.cli.main`) with the same arguments but kubectl's global flags, read
  wherever they stand (:func:`forwarded_argv`), on the log of the running system of the kubeconfig in use
  (:func:`log_of_kubeconfig`), so its own errors and exit codes apply (a command this kueue-es does not
  have says so, exit 2), its usage errors naming ``kubectl kueue``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn

from kueue_es.kueuectl import commands
from kueue_es.kueuectl.connect import Cluster, Failure, Settings, kubeconfig_files, open_cluster, system_for

#: Subcommands answered by kueue-es's own command line (they read the log).
FORWARDED = ("explain", "what-if", "diff", "status")
#: kueuectl's pass-through commands and the kinds they take (passthrough.go), run by kubectl itself.
PASSTHROUGH = ("get", "describe", "edit", "patch", "delete")
PASSTHROUGH_KINDS = {
    "workload": "workload",
    "kwl": "workload",
    "kueueworkload": "workload",
    "kueueworkloads": "workload",
    "clusterqueue": "clusterqueue",
    "cq": "clusterqueue",
    "localqueue": "localqueue",
    "lq": "localqueue",
    "resourceflavor": "resourceflavor",
    "rf": "resourceflavor",
}
WORKLOAD_ALIASES = ["kwl", "kueueworkload", "kueueworkloads"]


class _Parser(argparse.ArgumentParser):
    """argparse with cobra's error style: ``Error: ...`` and exit code 1."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"Error: {message}\n")
        raise SystemExit(1)


def _connection_flags(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    parser.add_argument("--kubeconfig", default=default, help="path to the kubeconfig file to use")
    parser.add_argument("--context", default=default, help="the name of the kubeconfig context to use")
    parser.add_argument("-n", "--namespace", default=default, help="the namespace scope for this request")


def _output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", help="output format: json, yaml or name")
    parser.add_argument(
        "--show-managed-fields",
        action="store_true",
        help="If true, keep the managedFields when printing objects in JSON or YAML format.",
    )


def _dry_run_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        default=argparse.SUPPRESS,  # given before or after the kind (kueuectl's flag is on the parent command)
        metavar="STRATEGY",
        help='"none", "server" or "client": client prints the object without sending it, server sends it '
        "without storing it",
    )


def _leaf(sub: Any, name: str, aliases: list[str], help_text: str, **defaults: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, aliases=aliases, help=help_text)
    _connection_flags(parser, top=False)
    parser.set_defaults(kind=name, **defaults)
    return parser


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``kubectl-kueue``."""
    root = _Parser(prog="kubectl kueue", description="Controls Kueue queueing manager (kueue-es).")
    _connection_flags(root, top=True)
    sub = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    create = sub.add_parser("create", help="Create a resource")
    _dry_run_flag(create)
    create_sub = create.add_subparsers(dest="kind_word", metavar="KIND", parser_class=_Parser)
    create_sub.required = True
    cq = _leaf(create_sub, "clusterqueue", ["cq"], "Creates a clusterqueue", run="create")
    cq.add_argument("name", metavar="NAME")
    cq.add_argument("--cohort", help="The cohort that this ClusterQueue belongs to.")
    cq.add_argument("--queuing-strategy", help="StrictFIFO or BestEffortFIFO (the default).")
    cq.add_argument("--namespace-selector", action="append", metavar="KEY=VALUE", help="namespaces that may submit")
    cq.add_argument("--reclaim-within-cohort", help="Never (default), LowerPriority or Any.")
    cq.add_argument(
        "--preemption-within-cluster-queue", help="Never (default), LowerPriority or LowerOrNewerEqualPriority."
    )
    for flag in ("nominal-quota", "borrowing-limit", "lending-limit"):
        cq.add_argument(f"--{flag}", action="append", metavar="FLAVOR:RESOURCE=VALUE;...")
    lq = _leaf(create_sub, "localqueue", ["lq"], "Creates a localqueue", run="create")
    lq.add_argument("name", metavar="NAME")
    lq.add_argument("-c", "--clusterqueue", required=True, help="The ClusterQueue of the LocalQueue (required).")
    lq.add_argument("-i", "--ignore-unknown-cq", action="store_true", help="Ignore unknown cluster queue.")
    rf = _leaf(create_sub, "resourceflavor", ["rf"], "Creates a resource flavor", run="create")
    rf.add_argument("name", metavar="NAME")
    rf.add_argument("--node-labels", action="append", metavar="KEY=VALUE,...")
    rf.add_argument("--node-taints", action="append", metavar="KEY[=VALUE]:EFFECT,...")
    rf.add_argument("--tolerations", action="append", metavar="KEY[=VALUE][:EFFECT],...")
    rf.add_argument("--topology-name", help="The Topology of this flavor (spec.topologyName; a kueue-es addition).")
    for leaf in (cq, lq, rf):
        _output_flag(leaf)
        _dry_run_flag(leaf)

    listing = sub.add_parser("list", help="Display resources")
    list_sub = listing.add_subparsers(dest="kind_word", metavar="KIND", parser_class=_Parser)
    list_sub.required = True
    lcq = _leaf(list_sub, "clusterqueue", ["cq"], "List ClusterQueues", run="list")
    lcq.add_argument("--active", action="append", metavar="true|false", help="Filter by active status.")
    llq = _leaf(list_sub, "localqueue", ["lq"], "List LocalQueue", run="list")
    lwl = _leaf(list_sub, "workload", WORKLOAD_ALIASES, "List Workload", run="list")
    lwl.add_argument("-q", "--localqueue", help="Filter by local queue name which is associated with the resource.")
    lwl.add_argument("--status", action="append", help='"all", "pending", "quotareserved", "admitted" or "finished"')
    lrf = _leaf(list_sub, "resourceflavor", ["rf"], "List ResourceFlavor", run="list")
    lpo = _leaf(list_sub, "pods", ["po"], "List Pods belong to a Job Kind", run="list")
    for leaf in (llq, lwl):
        leaf.add_argument(
            "-c", "--clusterqueue", help="Filter by cluster queue name which is associated with the resource."
        )
    for leaf in (lwl, lpo):
        leaf.add_argument("--for", dest="for_object", metavar="TYPE[.API-GROUP]/NAME", help="Filter by this object.")
    for leaf in (llq, lwl, lpo):
        leaf.add_argument("-A", "--all-namespaces", action="store_true", help="List across all namespaces.")
    for leaf in (lcq, llq, lwl, lrf, lpo):
        leaf.add_argument("-l", "--selector", default="", help="Selector (label query) to filter on.")
        leaf.add_argument("--field-selector", default="", help="Selector (field query) to filter on.")
        _output_flag(leaf)
    for leaf in (lcq, llq, lwl, lrf):
        leaf.add_argument(  # never parsed here: a list with --at runs kueue-es list (see _forwarded)
            "--at",
            metavar="SEQ|RFC3339",
            help="kueue-es: as of this point of its log (runs kueue-es list; not with -l, --field-selector, --for)",
        )

    for verb, help_text in (("stop", "Stop the resource"), ("resume", "Resume the resource")):
        parent = sub.add_parser(verb, help=help_text)
        _dry_run_flag(parent)
        verb_sub = parent.add_subparsers(dest="kind_word", metavar="KIND", parser_class=_Parser)
        verb_sub.required = True
        for kind, aliases in (("workload", WORKLOAD_ALIASES), ("localqueue", ["lq"]), ("clusterqueue", ["cq"])):
            leaf = _leaf(verb_sub, kind, aliases, f"{verb.capitalize()} the {kind}", run="set")
            leaf.add_argument("name", metavar="NAME")
            if verb == "stop" and kind != "workload":
                leaf.add_argument(
                    "--keep-already-running",
                    action="store_true",
                    help="Keep admitted workloads running (stopPolicy Hold instead of HoldAndDrain).",
                )
            _output_flag(leaf)
            _dry_run_flag(leaf)

    delete = sub.add_parser("delete", help="Delete a resource")
    _dry_run_flag(delete)
    delete_sub = delete.add_subparsers(dest="kind_word", metavar="KIND", parser_class=_Parser)
    delete_sub.required = True
    dwl = _leaf(delete_sub, "workload", WORKLOAD_ALIASES, "Delete Workloads and their Jobs", run="delete")
    dwl.add_argument("names", nargs="*", metavar="NAME")
    dwl.add_argument("-y", "--yes", action="store_true", help="Automatic yes to the prompt.")
    dwl.add_argument("--all", action="store_true", help="Delete all Workloads, in the specified namespace.")
    dwl.add_argument("-A", "--all-namespaces", action="store_true", help="With --all: in every namespace.")
    _dry_run_flag(dwl)  # no -o: kueuectl's delete workload prints names only (delete_workload.go adds no PrintFlags)

    version = sub.add_parser("version", help="Prints the client version and the Kueue image, if installed")
    _connection_flags(version, top=False)
    version.set_defaults(run="version", kind="")
    for name in ("get", "describe", "edit", "patch"):
        sub.add_parser(name, help=f"Pass-through to kubectl {name}")
    for name in FORWARDED:
        sub.add_parser(name, help=f"kueue-es {name} (reads the log)")
    return root


#: Flags taking a separate value before the command word (``kubectl kueue -n team list workload``).
VALUE_FLAGS = ("--kubeconfig", "--context", "-n", "--namespace")


def _words(argv: Sequence[str]) -> list[str]:
    """The words of ``argv`` that are not flags, nor the value of a connection flag given before them."""
    words: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in VALUE_FLAGS and not words:
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    return words


def _forwarded(argv: Sequence[str]) -> bool:
    words = _words(argv)
    if words and words[0] in FORWARDED:
        return True
    return bool(words) and words[0] == "list" and any(a == "--at" or a.startswith("--at=") for a in argv)


def _passthrough_kind(argv: Sequence[str]) -> str | None:
    words = _words(argv)
    if len(words) < 2 or words[0] not in PASSTHROUGH:
        return None
    kind = PASSTHROUGH_KINDS.get(words[1])
    if kind is None or (words[0] == "delete" and kind == "workload"):
        return None
    return kind


def pass_through(argv: Sequence[str], *, execvpe: Callable[..., Any] = os.execvpe) -> int:
    """Run ``kubectl ARGV`` in place of this process (kueuectl's passthrough). When kubectl's own rules
    find no kubeconfig, the one ``kubectl kueue`` falls back to (the running demo's) is given to it."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        sys.stderr.write(
            f'Error: pass-through command are not available: kubectl not found, PATH="{os.environ.get("PATH", "")}"\n'
        )
        return 1
    env = dict(os.environ)
    if not any(a == "--kubeconfig" or a.startswith("--kubeconfig=") for a in argv):
        try:
            files, origin = kubeconfig_files(Settings())
        except Failure:
            files, origin = [], ""
        if origin.startswith("the running kueue-es"):
            env["KUBECONFIG"] = os.pathsep.join(files)
    execvpe(kubectl, ["kubectl", *argv], env)
    return 0  # only reached when execvpe is replaced (tests)


class ForwardError(ValueError):
    """kubectl's global flags given to a forwarded command in a way it cannot take (the message names them)."""


#: kubectl's global flags that take a value: the connection flags kueuectl reads.
_GLOBAL_VALUE_FLAGS = {
    "--kubeconfig": "kubeconfig",
    "--context": "context",
    "-n": "namespace",
    "--namespace": "namespace",
}
_ALL_NAMESPACES = ("-A", "--all-namespaces")


def _split_global_flags(argv: Sequence[str]) -> tuple[list[str], dict[str, str], bool]:
    """``(rest, found, all_namespaces)``: ``argv`` without kubectl's global flags (wherever they stand, before
    ``--``), the values of those that take one by name (``kubeconfig``, ``context``, ``namespace``), and
    whether ``-A/--all-namespaces`` was given. Raises ForwardError for a flag without its value."""
    rest: list[str] = []
    found: dict[str, str] = {}
    all_namespaces = False
    words = iter(argv)
    for arg in words:
        if arg == "--":
            rest.append(arg)
            rest.extend(words)
            break
        flag, eq, value = arg.partition("=")
        if flag in _GLOBAL_VALUE_FLAGS:
            if not eq:
                value = next(words, "")
                if not value:
                    raise ForwardError(f"flag needs an argument: {flag}")
            found[_GLOBAL_VALUE_FLAGS[flag]] = value
        elif arg.startswith("-n") and not arg.startswith("--") and len(arg) > 2:
            found["namespace"] = arg[2:]
        elif arg in _ALL_NAMESPACES:
            all_namespaces = True
        else:
            rest.append(arg)
    return rest, found, all_namespaces


def forwarded_argv(argv: Sequence[str]) -> list[str]:
    """The arguments ``kueue-es`` gets for ``kubectl kueue ARGV`` (a forwarded command, see :func:`_forwarded`).

    kubectl's global flags may stand anywhere, before or after the command word, as ``--flag VALUE`` or
    ``--flag=VALUE`` (``-nVALUE`` too): ``--kubeconfig`` and ``--context`` are consumed (the kubeconfig
    names the running system whose log is read: :func:`log_of_kubeconfig`); ``-n/--namespace`` and
    ``-A/--all-namespaces`` go after the command word for ``explain`` (``-n NS NAME`` is ``NS/NAME``) and
    ``list``, and are consumed by ``status``, ``what-if`` and ``diff`` (cluster-wide, as kubectl ignores
    ``-n`` for cluster-scoped kinds). Words after ``--`` are left alone. Raises ForwardError for a flag
    without its value and for ``explain -A`` (one workload is in one namespace)."""
    rest, found, all_namespaces = _split_global_flags(argv)
    command = next((i for i, a in enumerate(rest) if not a.startswith("-")), 0)
    word = rest[command] if rest else ""
    extra: list[str] = []
    if word in ("explain", "list") and "namespace" in found:
        extra += ["--namespace", found["namespace"]]
    if all_namespaces and word == "explain":
        raise ForwardError("explain takes one workload, in one namespace: -A/--all-namespaces does not apply")
    if all_namespaces and word == "list":
        extra.append("--all-namespaces")
    return [*rest[: command + 1], *extra, *rest[command + 1 :]]


class NoSystemForKubeconfig(Exception):
    """Systems run, but none is the cluster of the kubeconfig in use (the message names them)."""


#: Options of the forwarded commands that name the log themselves: then no running system is picked.
_SOURCE_FLAGS = ("--nats", "--store", "--file")


def log_of_kubeconfig(words: list[str], *, kubeconfig: str | None) -> list[str]:
    """``words`` (:func:`forwarded_argv`'s) reading the log of the running system of the kubeconfig in use,
    as ``list workload``'s POSITION IN QUEUE reads it: ``--nats URL`` of :func:`connect.system_for` the files
    kubectl's rules give (``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``) added after the
    command word. ``words`` unchanged when the command names its log (``--nats``, ``--store``, ``--file``;
    ``diff`` takes two logs), when ``$KUEUE_ES_NATS_URL`` or ``$KUEUE_ES_CURRENT`` names one, for help,
    when nothing runs (kueue-es then says so) or when the kubeconfig is the running demo's that kubectl
    kueue falls back to (the one ``kueue-es`` finds by itself). With several running, a ``note:`` on stderr
    says which it read. Raises Failure for a ``--kubeconfig`` that does not exist, NoSystemForKubeconfig
    when systems run but none is this cluster's (reading another one's log answered for the wrong
    cluster)."""
    from kueue_es import current

    command = next((i for i, a in enumerate(words) if not a.startswith("-")), None)
    if command is None or words[command] == "diff":
        return words
    if any(w in ("-h", "--help") or w.partition("=")[0] in _SOURCE_FLAGS for w in words):
        return words
    if os.environ.get(current.URL_ENV, "").strip() or os.environ.get(current.FILE_ENV, "").strip():
        return words
    running = current.running()
    if not running:
        return words
    try:
        files, origin = kubeconfig_files(Settings(kubeconfig=kubeconfig))
    except Failure:
        if kubeconfig:
            raise
        return words
    if origin.startswith("the running kueue-es"):
        return words
    system = system_for(files)
    if system is None:
        others = "; ".join(f"{s.origin}, kubeconfig {s.kubeconfig or '(none recorded)'}" for s in running)
        raise NoSystemForKubeconfig(
            f"no running kueue-es is the cluster of the kubeconfig in use ({', '.join(files)}, from {origin}):"
            f" running: {others}; give its kubeconfig with --kubeconfig, or name its log with --nats URL"
        )
    if len(running) > 1:
        sys.stderr.write(
            f"note: reading the log at {system.nats_url} ({system.origin}), the kueue-es of the kubeconfig"
            f" {system.kubeconfig or ', '.join(files)} ({origin})\n"
        )
    return [*words[: command + 1], "--nats", system.nats_url, *words[command + 1 :]]


def forward(argv: Sequence[str]) -> int:
    """Run ``kueue-es ARGV`` (:func:`kueue_es.cli.main`, its usage errors naming ``kubectl kueue``) after
    :func:`forwarded_argv`, on the log of the kubeconfig's system (:func:`log_of_kubeconfig`); returns its
    exit code (1 for kubectl's flags given where they cannot apply or a missing ``--kubeconfig``, 2 when
    no running system is this cluster's)."""
    from kueue_es import cli as kueue_es_cli

    try:
        words = forwarded_argv(argv)
        words = log_of_kubeconfig(words, kubeconfig=_split_global_flags(argv)[1].get("kubeconfig"))
    except (ForwardError, Failure) as err:
        sys.stderr.write(f"Error: {err}\n")
        return 1
    except NoSystemForKubeconfig as err:
        sys.stderr.write(f"error: {err}\n")  # as kueue-es says it finds no running system (exit 2)
        return 2
    try:
        return kueue_es_cli.main(words, prog="kubectl kueue")
    except SystemExit as done:  # argparse: an unknown command or a usage error, already printed
        return done.code if isinstance(done.code, int) else 1


async def run(args: argparse.Namespace, *, stdin: IO[str], out: IO[str], err: IO[str]) -> int:
    """Open the cluster the flags name and run the parsed command; returns its exit code."""
    settings = Settings(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)
    if args.run == "version":
        try:
            cluster: Cluster | None = await open_cluster(settings)
        except Failure:
            cluster = None  # kueuectl prints the client version even without a cluster
        try:
            return await commands.version(cluster, out)
        finally:
            if cluster is not None:
                await cluster.close()
    cluster = await open_cluster(settings)
    try:
        if args.run == "create":
            return await commands.create(cluster, args, out)
        if args.run == "set":
            return await commands.set_spec_field(cluster, args, out)
        if args.run == "delete":
            return await commands.delete_workloads(cluster, args, stdin, out, err)
        listing = {
            "clusterqueue": commands.list_cluster_queues,
            "localqueue": commands.list_local_queues,
            "workload": commands.list_workloads,
            "resourceflavor": commands.list_resource_flavors,
            "pods": commands.list_pods,
        }[args.kind]
        return await listing(cluster, args, out, err)
    finally:
        await cluster.close()


#: What Go's strconv.ParseBool reads, which cobra's bool flags take after ``=``.
_PARSE_BOOL = {v: True for v in ("1", "t", "T", "TRUE", "true", "True")} | {
    v: False for v in ("0", "f", "F", "FALSE", "false", "False")
}


def cobra_bool_values(words: list[str], top: argparse.ArgumentParser) -> list[str]:
    """``words`` with each ``--flag=VALUE`` of a boolean flag of ``top``'s commands written as cobra reads it
    (``--keep-already-running=false``): ``--flag`` for a true value, nothing for a false one. Raises
    ValueError, in cobra's words, for a value ParseBool does not read."""
    flags: set[str] = set()
    pending = [top]
    while pending:
        current = pending.pop()
        for action in current._actions:
            if isinstance(action, argparse._StoreTrueAction):
                flags.update(o for o in action.option_strings if o.startswith("--"))
            elif isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
    out = []
    for word in words:
        flag, equals, value = word.partition("=")
        if not equals or flag not in flags:
            out.append(word)
            continue
        if value not in _PARSE_BOOL:
            raise ValueError(
                f'invalid argument "{value}" for "{flag}" flag: strconv.ParseBool: parsing "{value}": invalid syntax'
            )
        if _PARSE_BOOL[value]:
            out.append(flag)
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kubectl-kueue`` console script; returns the exit code (see the module)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if _forwarded(words):
        return forward(words)
    if _passthrough_kind(words) is not None:
        return pass_through(words)
    built = parser()
    try:
        words = cobra_bool_values(words, built)
    except ValueError as err:
        built.error(str(err))
    args = built.parse_args(words)
    if args.command in ("get", "describe", "edit", "patch"):
        sys.stderr.write(
            f"Error: {args.command} takes a Kueue kind: workload, clusterqueue, localqueue or resourceflavor\n"
        )
        return 1
    from kueue_es.services.runtime import configure_logging

    configure_logging(service="kubectl-kueue", level=logging.CRITICAL, cache=False)  # errors are ours to print
    try:
        return asyncio.run(run(args, stdin=sys.stdin, out=sys.stdout, err=sys.stderr))
    except Failure as failure:
        sys.stdout.flush()
        sys.stderr.write(f"Error: {failure}\n")
        return failure.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
