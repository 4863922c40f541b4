"""The bench's outputs: a YAML document (Kueue's summary keys where they exist) and a table.

The table puts beside each of our figures Kueue's published mean for the same
configuration (shared/PERFORMANCE.md, the comments of perf/*/rangespec.yaml:
their CI, envtest, 6-7 CPUs, client capped at 50 writes/s) and the ideal bound
computed in the same run, with the ratios.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from kueue_es.perfbench.chaos import ChaosResult
from kueue_es.perfbench.driver import RunResult, machine

# Kueue's published means (rangespec comments): wall ms, ClusterQueue usage %, time to admission ms per class.
KUEUE_MEANS: dict[str, dict[str, Any]] = {
    "baseline": {
        "wallMs": 351_116,
        "usage": {"cq": 55.9},
        "admission": {"small": 215_468, "medium": 76_768, "large": 16_501},
    },
    "large-scale": {
        "wallMs": 1_179_411,
        "usage": {"cq": 38.64},
        "admission": {"small": 700_379, "medium": 256_413, "large": 105_604},
    },
    "tas": {
        "wallMs": 401_472,
        "usage": {"cq": 62.41},
        "admission": {
            "large-balanced-rack": 37_862,
            "large-preferred-rack": 39_573,
            "large-required-rack": 39_625,
            "medium-balanced-rack": 106_303,
            "medium-preferred-rack": 106_324,
            "medium-required-rack": 107_071,
            "small-balanced-rack": 237_846,
            "small-preferred-rack": 246_090,
            "small-required-rack": 246_755,
        },
    },
}


def kueue_means_for(config_path: str) -> tuple[str, dict[str, Any] | None]:
    """Kueue's published means for a config, recognised by its folder name (baseline, large-scale, tas)."""
    name = Path(config_path).resolve().parent.name
    return name, KUEUE_MEANS.get(name)


def document(result: RunResult) -> dict[str, Any]:
    """The YAML document of one run.

    ``summary`` is exactly Kueue's summary.yaml (recorder.Summary) and ``cmdStats``
    Kueue's minimalkueue.stats.yaml keys (wallMs; maxrss in KiB of the largest
    process); the rest is ours.
    """
    rec = result.recorder
    summary = rec.summary()
    usage = rec.usage_percent()
    mean_rate, peak_rate = rec.admission_rates()
    bound = result.ideal
    name, kueue = kueue_means_for(result.config_path)
    biggest = max((p.peak_rss_mib for p in result.processes.values()), default=0.0)
    doc: dict[str, Any] = {
        "config": result.config_path,
        "mode": {"apiQps": result.api_qps, "apiBurst": result.api_burst},
        "complete": result.complete,
        **({"unfinished": result.stalled} if result.stalled else {}),
        "machine": machine(),
        "cmdStats": {
            "wallMs": result.wall_ms,
            "userMs": round(sum(p.cpu_seconds for p in result.processes.values()) * 1000),
            "sysMs": 0,
            "maxrss": round(biggest * 1024),
        },
        "summary": summary,
        "usagePercent": {k: round(v, 2) for k, v in usage.items()},
        "timing": {
            "startupMs": result.startup_ms,
            "workloadWallMs": result.workload_wall_ms,
            "workloads": result.workloads,
            "admitted": rec.admitted,
            "finished": rec.finished,
            "evictionReasons": dict(sorted(rec.eviction_reasons.items())),
            "quotaHeldOverRuntimeMs": rec.held_over_runtime(),
        },
        "throughput": {
            "admissionsPerSecond": round(mean_rate, 1),
            "peakAdmissionsPerSecond5s": round(peak_rate, 1),
            "eventsPerSecond": round(rec.events_per_second(), 1),
            "peakEventsPerSecond5s": round(rec.peak_events_per_second, 1),
            "logMessages": result.log_messages,
        },
        "memory": {
            "peakTotalRssMiB": round(result.peak_total_rss_mib, 1),
            "sumOfPeaksMiB": round(sum(p.peak_rss_mib for p in result.processes.values()), 1),
            "processes": {
                n: {"peakRssMiB": round(p.peak_rss_mib, 1), "cpuSeconds": round(p.cpu_seconds, 1)}
                for n, p in result.processes.items()
            },
        },
        "ideal": {
            "makespanMs": bound.makespan_ms,
            "workBoundMs": bound.work_bound_ms,
            "usagePercent": {k: round(v, 2) for k, v in bound.usage_percent.items()},
            "workloadClasses": {
                k: {
                    "count": c.count,
                    "averageTimeToAdmissionMs": c.average_time_to_admission_ms,
                    "averageTimeToFinishMs": c.average_time_to_finish_ms,
                }
                for k, c in bound.classes.items()
            },
        },
        "ratios": {
            "workloadWallToIdeal": _ratio(result.workload_wall_ms, bound.makespan_ms),
            "wallToIdeal": _ratio(result.wall_ms, bound.makespan_ms),
        },
        "runDir": result.run_dir,
        "compactor": " ".join(result.compact_args) if result.compact_args else None,
        "deciders": {
            "replicas": result.replicas,
            "partitions": result.partitions,
            "cohosted": result.cohosted,
            "standbyLease": result.standby_lease,
            "commits": sum(d.commits for d in result.deciders.values()),
            "conflicts": sum(d.conflicts for d in result.deciders.values()),
            "processes": {n: {"commits": d.commits, "conflicts": d.conflicts} for n, d in result.deciders.items()},
        },
    }
    if rec.topology is not None:
        doc["topology"] = rec.topology.report()
    if kueue is not None:
        doc["kueue"] = {"config": name, **kueue}
        doc["ratios"]["wallToKueue"] = _ratio(result.wall_ms, kueue["wallMs"])
    if result.chaos is not None:
        doc["chaos"] = chaos_document(result.chaos)
    return doc


def chaos_document(chaos: ChaosResult) -> dict[str, Any]:
    """The ``chaos`` section of the run document: seed, kills with their recovery (s), p50 and max,
    the checks and every violation."""
    replay = chaos.replay
    return {
        "seed": chaos.seed,
        "killEverySeconds": chaos.kill_every_s,
        "kills": [
            {
                "atSeconds": k.at_s,
                "victim": k.victim,
                **({"crash": True} if k.crash else {}),
                "upSeconds": k.up_s,
                "recoverySeconds": k.recovery_s,
                "restartSeconds": k.restart_s,
                "detail": k.detail,
            }
            for k in chaos.kills
        ],
        "recoveryP50Seconds": chaos.p50_s,
        "recoveryMaxSeconds": chaos.max_s,
        "restartP50Seconds": statistics.median(chaos.restarts) if chaos.restarts else None,
        "republishedFacts": chaos.republished,
        "checkedMessages": chaos.checked_messages,
        "checkedBatches": chaos.checked_batches,
        "checkSeconds": chaos.check_seconds,
        "replay": None
        if replay is None
        else {"exitCode": replay.exit_code, "decisions": replay.decisions, "matched": replay.matched},
        "invariantsHold": chaos.ok,
        "violations": [str(v) for v in chaos.violations],
    }


def chaos_table(chaos: ChaosResult) -> Table:
    """The kills: when (s since the creation streams started), the victim, and since the kill, s: until its
    new process answered, until that process was ready (restart), until it recovered (the role served
    again, see kueue_es.perfbench.chaos; after nats-server, every service reading again)."""
    out = Table(title=f"chaos --chaos {chaos.seed} --kill-every {chaos.kill_every_s:g}")
    for column in ("at s", "victim", "process up s", "restart s", "recovery s", ""):
        out.add_column(column, justify="left" if column in ("victim", "") else "right")
    for kill in chaos.kills:
        out.add_row(
            f"{kill.at_s:.1f}",
            kill.victim + (" (crashed)" if kill.crash else ""),
            "-" if kill.up_s is None else f"{kill.up_s:.2f}",
            "-" if kill.restart_s is None else f"{kill.restart_s:.2f}",
            "not recovered" if kill.recovery_s is None else f"{kill.recovery_s:.2f}",
            kill.detail,
        )
    return out


def chaos_lines(chaos: ChaosResult) -> list[str]:
    """The verdict: recovery p50/max, what was checked, every violation (or that every invariant held)."""
    killed = [k for k in chaos.kills if not k.crash]
    p50, worst = chaos.p50_s, chaos.max_s
    lines = [
        f"{len(killed)} kills ({sum(k.victim == 'nats-server' for k in killed)} of nats-server), "
        f"{len(chaos.kills) - len(killed)} crashes; recovery p50 "
        + (f"{p50:.2f} s, max {worst:.2f} s" if p50 is not None and worst is not None else "-")
    ]
    services = [k.recovery_s for k in killed if k.victim != "nats-server" and k.recovery_s is not None]
    nats = [k.recovery_s for k in killed if k.victim == "nats-server" and k.recovery_s is not None]
    restarts = [k.restart_s for k in killed if k.victim != "nats-server" and k.restart_s is not None]
    if services:
        lines.append(
            f"  service kills: p50 {statistics.median(services):.2f} s, max {max(services):.2f} s;"
            f" nats-server: {', '.join(f'{r:.2f} s' for r in nats) or '-'}"
        )
    if restarts:
        lines.append(
            f"  the killed processes' own restart to ready: p50 {statistics.median(restarts):.2f} s,"
            f" max {max(restarts):.2f} s"
        )
    replay = chaos.replay
    if replay is not None:
        lines.append(
            f"checked {chaos.checked_messages:,} messages, {chaos.checked_batches:,} decision batches in"
            f" {chaos.check_seconds:.1f} s; replay: {replay.matched:,} of {replay.decisions:,} decisions matched,"
            f" exit {replay.exit_code}"
        )
    for kill in chaos.unrecovered:
        lines.append(f"[bold red]not recovered[/bold red]: {kill.victim} killed at {kill.at_s:.1f} s")
    if chaos.violations:
        lines.append(f"[bold red]{len(chaos.violations)} violations[/bold red]:")
        from kueue_es.perfbench import invariants  # only a chaos run's report: see chaos._check_url

        lines += [f"  {line}" for line in invariants.summary(chaos.violations)]
    elif chaos.ok:
        lines.append(
            "[bold green]every invariant held[/bold green]: every workload finished, none reserved twice,"
            " quota never over-used at a batch end, no orphan decision, replay clean"
        )
    return lines


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def write_yaml(doc: dict[str, Any], path: Path) -> None:
    """Write the run document, and Kueue's summary.yaml and cmdStats.yaml beside it (for Kueue's checker)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    (path.parent / "summary.yaml").write_text(yaml.safe_dump(doc["summary"], sort_keys=False))
    (path.parent / "cmdStats.yaml").write_text(yaml.safe_dump(doc["cmdStats"], sort_keys=False))


def table(doc: dict[str, Any]) -> Table:
    """Our figures beside Kueue's published means and the ideal bound, with ratios."""
    qps = doc["mode"]["apiQps"]
    title = f"kueue-es bench {doc['config']} ({f'--api-qps {qps:g}' if qps else 'uncapped'})"
    if not doc["complete"]:
        title += " [INCOMPLETE]"
    caption = None
    if not doc.get("kueue"):
        caption = "no Kueue means: the config is not in a baseline, large-scale or tas folder of shared/perf"
    out = Table(title=title, caption=caption)
    for column in ("figure", "kueue-es", "Kueue (mean)", "ideal", "ours / Kueue", "ours / ideal"):
        out.add_column(column, justify="left" if column == "figure" else "right")
    kueue = doc.get("kueue") or {}
    ideal = doc["ideal"]

    def row(label: str, ours: float | None, theirs: float | None, best: float | None, fmt: str) -> None:
        out.add_row(
            label,
            _fmt(ours, fmt),
            _fmt(theirs, fmt),
            _fmt(best, fmt),
            _fmt(_ratio(ours, theirs) if ours is not None and theirs else None, "x"),
            _fmt(_ratio(ours, best) if ours is not None and best else None, "x"),
        )

    timing = doc["timing"]
    row(
        "wall s (system start to last release)",
        doc["cmdStats"]["wallMs"] / 1000,
        _s(kueue.get("wallMs")),
        ideal["makespanMs"] / 1000,
        "s",
    )
    row("  of which start-up s", timing["startupMs"] / 1000, None, None, "s")
    row("  streams start to last release s", timing["workloadWallMs"] / 1000, None, ideal["makespanMs"] / 1000, "s")
    for name, value in doc["usagePercent"].items():
        row(f"usage % ({name})", value, (kueue.get("usage") or {}).get(name), ideal["usagePercent"].get(name), "%")
    for name, group in doc["summary"]["workloadClasses"].items():
        best = ideal["workloadClasses"].get(name, {})
        row(
            f"{name}: avg time to admission s",
            group["averageTimeToAdmissionMs"] / 1000,
            _s((kueue.get("admission") or {}).get(name)),
            _s(best.get("averageTimeToAdmissionMs")),
            "s",
        )
        row(
            f"{name}: avg time to finish s",
            group["averageTimeToFinishMs"] / 1000,
            None,
            _s(best.get("averageTimeToFinishMs")),
            "s",
        )
        row(f"{name}: evictions", group["totalEvictions"], None, 0, "n")
        held = (timing.get("quotaHeldOverRuntimeMs") or {}).get(name)
        if held:
            out.add_row(
                f"{name}: quota held - runtime ms (median / p99)",
                f"{held['medianMs']:,} / {held['p99Ms']:,}",
                "",
                "0 / 0",
                "",
                "",
            )
    if topo := doc.get("topology"):
        out.add_row(
            "TAS: placements / admitted without one",
            f"{topo['placements']:,} / {topo['admittedWithoutTopologyAssigned']}",
            "",
            "",
            "",
            "",
        )
        out.add_row(
            "TAS: required in one domain, slices whole, preferred in one domain",
            f"{topo['requiredInOneDomain']}, {topo['slicesWhole']}, {topo['preferredInOneDomain']}",
            "",
            "",
            "",
            "",
        )
    thr = doc["throughput"]
    kueue_rate = doc["timing"]["workloads"] * 1000 / kueue["wallMs"] if kueue.get("wallMs") else None
    row("admissions/s (mean, first to last)", thr["admissionsPerSecond"], kueue_rate, None, "n")
    row("admissions/s (peak 5 s)", thr["peakAdmissionsPerSecond5s"], None, None, "n")
    row("events/s through the bus (mean)", thr["eventsPerSecond"], None, None, "n")
    row("events/s through the bus (peak 5 s)", thr["peakEventsPerSecond5s"], None, None, "n")
    mem = doc["memory"]
    row("peak RSS, all processes together MiB", mem["peakTotalRssMiB"], None, None, "n")
    for name, proc in mem["processes"].items():
        out.add_row(
            f"  {name}: peak RSS MiB / CPU s", f"{proc['peakRssMiB']:.0f} / {proc['cpuSeconds']:.1f}", "", "", "", ""
        )
    return out


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def _fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "x":
        return f"{value:.2f}x"
    if kind == "%":
        return f"{value:.1f}"
    if kind == "s":
        return f"{value:,.1f}"
    return f"{value:,.0f}"
