"""``kueue-es bench rules``: Kueue's rules (the deciders' cores) in virtual time, checked by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kueue_es import deciders
from kueue_es.perfbench import generator, ideal, rules
from kueue_es.services.preemptor import core as preemptor_core
from tests.bench.configs import BASELINE, TINY

# One ClusterQueue of 2 CPU that preempts lower priorities: smalls (1 CPU, 1 s, priority 1) at 100
# and 200 ms, a big (2 CPU, 0.5 s, priority 9) at 250 ms.
PREEMPTING = TINY.replace("borrowingLimit: 0", "borrowingLimit: 0\n      withinClusterQueue: LowerPriority").replace(
    "count: 3", "count: 2"
)


HOPLESS = rules.Hops.every(0)


def simulate(text: str, hops: rules.Hops) -> rules.RulesResult:
    return rules.simulate(generator.generate(generator.parse_config(yaml.safe_load(text))), hops)


def test_without_hops_and_without_preemption_the_rules_give_the_ideal_and_kueues_slow_down() -> None:
    """TINY preempts nothing (withinClusterQueue Never): as in the greedy ideal, the third small goes
    past the big that does not fit when small 0 ends at 1100, but 1 ms later: the cycle at 1100 finds
    the big head not fitting, and the next one comes after Kueue's slow-down (1 ms, runtime.SLOW_DOWN_FIRST);
    small 2 runs 1101-2101, then the big to 2601."""
    result = simulate(TINY, rules.Hops.every(0))
    bound = ideal.ideal_bound(generator.generate(generator.parse_config(yaml.safe_load(TINY))))
    assert bound.makespan_ms == 2_600
    assert result.wall_ms == 2_601
    assert result.average_time_to_admission_ms == {"big": 2_101 - 250, "small": (1_101 - 300) // 3}
    assert sum(result.evictions.values()) == 0
    assert result.admitted == 4


def test_every_hop_delays_what_follows_it() -> None:
    """In TINY small 0, small 2 and the big run one after another: each start waits for the admitter's
    commit and the dispatch, each end for the report, so hops of 10 ms put the end at least 3 x 30 ms later."""
    zero = simulate(TINY, rules.Hops.every(0))
    hops = simulate(TINY, rules.Hops.every(10))
    assert hops.wall_ms >= zero.wall_ms + 90
    assert hops.admitted == 4 and sum(hops.evictions.values()) == 0


def test_a_preemption_evicts_and_readmits() -> None:
    """Zero hops: the big nominates at 250, the preemptor evicts both smalls, they stop, the big runs
    250-750, the smalls are admitted again at 750 and run their whole second again."""
    result = simulate(PREEMPTING, rules.Hops.every(0))
    assert result.evictions == {"small": 2}
    assert result.average_time_to_admission_ms == {"big": 0, "small": ((750 - 100) + (750 - 200)) // 2}
    assert result.wall_ms == 1_750
    assert (result.nominations, result.answers_evicting_nothing_new) == (1, 0)


@pytest.mark.parametrize("admitter, preemptor, dispatch", [(10, 10, 10), (1, 2, 3), (5, 0, 20)])
def test_a_preemptor_waits_for_three_hops(admitter: int, preemptor: int, dispatch: int) -> None:
    """The big's nomination is on the log an admitter hop after its arrival, the evictions a preemptor hop
    later, the smalls stopped a dispatch hop after that, when the admitter's next cycle admits the big."""
    hops = rules.Hops(admitter_ms=admitter, preemptor_ms=preemptor, dispatch_ms=dispatch, report_ms=7)
    result = simulate(PREEMPTING, hops)
    assert result.average_time_to_admission_ms["big"] == admitter + preemptor + dispatch
    assert result.evictions == {"small": 2}


# One ClusterQueue of 3 CPU that preempts lower priorities: smalls (1 CPU, 1 s, priority 1) at 100, 200 and
# 300 ms, a big (3 CPU, 0.5 s, priority 9) at 350 ms.
THREE_AND_BIG = (
    TINY.replace("nominalQuota: 2", "nominalQuota: 3")
    .replace("borrowingLimit: 0", "borrowingLimit: 0\n      withinClusterQueue: LowerPriority")
    .replace("creationIntervalMs: 250", "creationIntervalMs: 350")
    .replace("priority: 9, request: 2", "priority: 9, request: 3")
)


def test_a_write_budget_queues_every_start_and_stop_behind_the_writes_before_it() -> None:
    """Zero hops, one write a second, burst 1 (a reservation each, as client-go's limiter). Small 0's start
    goes out at 100, small 1's (taken up at 200) at 1100; small 2's (admitted at 300) still waits in the queue
    when the big evicts all three at 350 (small 2, 1, 0 in that order), so at 1100 the dispatcher skips it.
    Its stop goes out at 2100 (a write, though its job never started, as the simulated API counts it); small
    0 and 1 finish at 1100 and 2100, before their stops go out at 3100 and 4100. The big, admitted at 2100,
    starts at 5100 behind those stops and ends at 5600; small 2, admitted again then, starts at 6100."""
    budget = rules.WriteBudget(qps=1, burst=1)
    generated = generator.generate(generator.parse_config(yaml.safe_load(THREE_AND_BIG)))
    result = rules.simulate(generated, HOPLESS, writes=budget)
    assert result.evictions == {"small": 3}
    assert (result.writes, result.unwritten_starts) == (2 + 3 + 1 + 1, 1)
    assert result.average_time_to_admission_ms == {"big": 2_100 - 350, "small": (5_600 - 300) // 3}
    assert result.wall_ms == 6_100 + 1_000


def test_a_start_is_skipped_only_once_the_dispatcher_sees_its_eviction() -> None:
    """A plentiful budget and a dispatch hop of 100 ms: small 2's start (admitted at 300) reaches the
    dispatcher and goes out at 400, before the eviction committed at 350 reaches it at 450, so no start is
    skipped: every small is started, stopped and started again (unlike one write a second, above)."""
    hops = rules.Hops(admitter_ms=0, preemptor_ms=0, dispatch_ms=100, report_ms=0)
    budget = rules.WriteBudget(qps=1_000, burst=100)
    generated = generator.generate(generator.parse_config(yaml.safe_load(THREE_AND_BIG)))
    result = rules.simulate(generated, hops, writes=budget)
    assert result.evictions == {"small": 3}
    assert (result.writes, result.unwritten_starts) == (3 + 3 + 1 + 3, 0)


def test_pacing_holds_the_admitter_while_a_start_waits_for_its_write() -> None:
    """No preemption, a ClusterQueue of 4 CPU, one write a second: small 1's start waits from 200 to 1100.
    Paced at one, the admitter holds small 2 (created at 300) until that start lands; unpaced it admits it at
    300 and its start waits in the queue instead. Either way it starts at 2100."""
    config = TINY.replace("nominalQuota: 2", "nominalQuota: 4").replace(
        "- count: 1\n        creationIntervalMs: 250\n        workloads:\n        - {className: big, runtimeMs: 500, priority: 9, request: 2}\n",
        "",
    )
    generated = generator.generate(generator.parse_config(yaml.safe_load(config)))
    unpaced = rules.simulate(generated, HOPLESS, writes=rules.WriteBudget(qps=1, burst=1))
    paced = rules.simulate(generated, HOPLESS, writes=rules.WriteBudget(qps=1, burst=1, pace=1))
    assert unpaced.average_time_to_admission_ms == {"small": 0}
    assert paced.average_time_to_admission_ms == {"small": (1_100 - 300) // 3}
    assert unpaced.wall_ms == paced.wall_ms == 2_100 + 1_000
    assert unpaced.writes == paced.writes == 3


def test_hops_parse_and_refuse() -> None:
    assert rules.parse_hops("7") == rules.Hops.every(7)
    assert rules.parse_hops("1,2,3,4") == rules.Hops(admitter_ms=1, preemptor_ms=2, dispatch_ms=3, report_ms=4)
    for bad in ("x", "1,2", "-1", "1,2,3,-4"):
        with pytest.raises(ValueError, match="--hop-ms"):
            rules.parse_hops(bad)
    with pytest.raises(ValueError, match="negative"):
        simulate(TINY, rules.Hops(admitter_ms=-1, preemptor_ms=0, dispatch_ms=0, report_ms=0))
    generated = generator.generate(generator.parse_config(yaml.safe_load(TINY)))
    for budget in (rules.WriteBudget(qps=0), rules.WriteBudget(qps=5, burst=0), rules.WriteBudget(qps=5, pace=0)):
        with pytest.raises(ValueError, match="write budget"):
            rules.simulate(generated, HOPLESS, writes=budget)


def test_the_command_prints_a_row_per_hop_setting(tmp_path: Path) -> None:
    config = tmp_path / "generator.yaml"
    config.write_text(PREEMPTING)
    cli = [sys.executable, "-m", "kueue_es.cli", "bench", "rules", "--config", str(config)]
    done = subprocess.run([*cli, "--hop-ms", "0", "--hop-ms", "0,0,0,10"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "0 / 0 / 0 / 0" in done.stdout and "0 / 0 / 0 / 10" in done.stdout
    assert "1.7" in done.stdout  # the zero-hop wall, 1,750 ms
    bad = subprocess.run([*cli, "--hop-ms", "fast"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "--hop-ms 'fast'" in bad.stderr


def test_the_command_runs_each_pace_under_the_write_budget(tmp_path: Path) -> None:
    config = tmp_path / "generator.yaml"
    config.write_text(THREE_AND_BIG)
    cli = [sys.executable, "-m", "kueue_es.cli", "bench", "rules", "--config", str(config), "--hop-ms", "0"]
    done = subprocess.run(
        [*cli, "--api-qps", "1", "--pace", "0", "--pace", "2"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "writes at 1/s" in done.stdout
    assert "0 / 0 / 0 / 0, paced at 2" in done.stdout
    unpaced = [line for line in done.stdout.splitlines() if "0 / 0 / 0 / 0 " in line and "paced" not in line]
    # burst 100: every write goes out at once, so the writes (and starts skipped) of a plentiful budget above
    assert len(unpaced) == 1 and "10 (0)" in unpaced[0]
    alone = subprocess.run([*cli, "--pace", "2"], capture_output=True, text=True, check=False)
    assert alone.returncode == 2 and "--pace needs --api-qps" in alone.stderr
    negative = subprocess.run([*cli, "--api-qps", "1", "--pace", "-1"], capture_output=True, text=True, check=False)
    assert negative.returncode == 2 and "--pace >= 1" in negative.stderr


def test_preemptor_logic_21_looped_with_the_admitter_at_zero_hops_and_22_does_not() -> None:
    """Kueue's baseline, hops 0 / 0 / 5 / 5: preemptor logic 21 answered a nomination with victims already
    being evicted, the admitter nominated it again, and with no hop no time passed (docs/benchmarks.md, "Kueue's
    rules in virtual time"); the installed logic answers with the nominated victims and the run ends."""
    generated = generator.generate(generator.parse_config(yaml.safe_load(BASELINE)))
    hops = rules.Hops(admitter_ms=0, preemptor_ms=0, dispatch_ms=5, report_ms=5)
    # only the workloads of the first 6.3 s of the streams: logic 21 loops on them at 8.2 s (virtual)
    planned = [wl for wl in generated.planned() if wl.offset_ms <= 6_300]
    # 1,000 cycles at one instant, not the default 10,000 (which takes logic 21 two minutes to reach): the installed
    # logic runs the same streams under the same bound, so the bound is not what stops logic 21
    bound = 1_000
    with pytest.raises(rules.LivelockError, match="without time passing"):
        rules.simulate(
            generated,
            hops,
            planned,
            preemptor=deciders.EARLIER[(preemptor_core.ROLE, 21)],
            max_steps_at_one_instant=bound,
        )
    result = rules.simulate(generated, hops, planned, max_steps_at_one_instant=bound)
    assert result.admitted == len(planned)
