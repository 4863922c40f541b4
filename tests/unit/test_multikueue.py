"""MultiKueue's manager side (SEMANTICS-ADVANCED E): objects, the fold, the pure decider, replay."""

from pathlib import Path

import msgspec
import pytest

from kueue_es import deciders, validation
from kueue_es.events import codec, manager_config, manifests, models, types
from kueue_es.events.manifests import ManifestError
from kueue_es.projections import cluster, multikueue
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import multikueue as rules
from kueue_es.scheduling import queues, readiness
from tests.kube import examples

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios" / "multikueue"
SETUP = examples.EXAMPLES / "multikueue" / "multikueue-setup.yaml"
MINUTE = 60_000


def run(name: str) -> CoreRun:
    return run_scenario(load_scenario(SCENARIOS / f"{name}.yaml"))


def fold(state: cluster.ClusterState, *events: types.Event) -> None:
    for event in events:
        cluster.apply(state, event, seq=state.last_seq + 1)


def mk_cluster(name: str, *, profile: bool = False, kubeconfig: bool = True) -> dict:
    source: dict = {}
    if kubeconfig:
        source["kubeConfig"] = {"location": f"{name}-secret"}
    if profile:
        source["clusterProfileRef"] = {"name": name}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": source},
    }


# -- objects ----------------------------------------------------------------------------------


def test_kueues_multikueue_setup_is_read_unchanged() -> None:
    """Kueue's sample manifests parse; the AdmissionCheck keeps its parameters reference."""
    objects = list(manifests.parse_objects(manifests.load_documents(SETUP.read_text())))
    kinds = {type(o).__name__: o for o in objects}
    assert set(kinds) >= {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue"}
    check = kinds["AdmissionCheck"]
    assert isinstance(check, models.AdmissionCheck)
    assert check.spec.parameters == models.AdmissionCheckParametersReference(
        api_group="kueue.x-k8s.io", kind="MultiKueueConfig", name="multikueue-test"
    )
    worker = kinds["MultiKueueCluster"]
    assert isinstance(worker, models.MultiKueueCluster)
    assert worker.spec.cluster_source.kube_config == models.KubeConfig(location="worker1-secret")
    assert not worker.active
    assert all(validation.validate(doc) == [] for doc in manifests.load_documents(SETUP.read_text()))


@pytest.mark.parametrize(("kubeconfig", "profile"), [(True, True), (False, False)])
def test_cluster_source_needs_exactly_one(kubeconfig: bool, profile: bool) -> None:
    """Kueue's ExactlyOneOf on clusterSource: both or neither is refused, by the parser and the CRD rule."""
    doc = mk_cluster("w1", kubeconfig=kubeconfig, profile=profile)
    with pytest.raises(ManifestError, match="exactly one of the fields in \\[kubeConfig clusterProfileRef\\]"):
        manifests.parse_object(doc)
    causes = validation.validate(doc)
    assert any("exactly one of the fields" in str(c) for c in causes), causes


def test_cluster_status_keeps_conditions_without_their_times() -> None:
    doc = mk_cluster("w1") | {
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "Connected",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ]
        }
    }
    obj = manifests.parse_object(doc)
    assert isinstance(obj, models.MultiKueueCluster) and obj.active
    assert obj.status.conditions == [
        models.Condition(type="Active", status="True", reason="Active", message="Connected")
    ]


@pytest.mark.parametrize(
    ("clusters", "problem"),
    [
        (["a", "b", "a"], "must be unique"),
        ([], "at least 1 item"),
        ([f"w{i}" for i in range(21)], "at most 20 items"),
    ],
)
def test_config_clusters_one_to_twenty_unique(clusters: list[str], problem: str) -> None:
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": "mk"},
        "spec": {"clusters": clusters},
    }
    with pytest.raises(ManifestError, match=problem):
        manifests.parse_object(doc)
    assert validation.validate(doc), "the CRD schema refuses it too"


def test_manager_config_multikueue_defaults_and_errors() -> None:
    head = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    assert manager_config.parse(head).configuration.multi_kueue is None
    parsed = manager_config.parse(head + "multiKueue: {}\n").configuration.multi_kueue
    assert parsed == models.MultiKueueConfiguration(
        gc_interval="1m",
        origin="multikueue",
        worker_lost_timeout="15m",
        dispatcher_name="kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    )
    incremental = manager_config.parse(
        head + "multiKueue:\n  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n"
    ).configuration.multi_kueue
    assert incremental is not None and incremental.incremental_dispatcher_config == models.IncrementalDispatcherConfig(
        step_size=3
    )
    for body, field in [
        ("multiKueue:\n  workerLostTimeout: -1m\n", "multiKueue.workerLostTimeout"),
        ("multiKueue:\n  gcInterval: soon\n", "multiKueue.gcInterval"),
        ("multiKueue:\n  origin: not a label!\n", "multiKueue.origin"),
        ("multiKueue:\n  incrementalDispatcherConfig: {stepSize: 2}\n", "multiKueue.incrementalDispatcherConfig"),
        (
            "multiKueue:\n  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n"
            "  incrementalDispatcherConfig: {stepSize: 0}\n",
            "multiKueue.incrementalDispatcherConfig.stepSize",
        ),
    ]:
        with pytest.raises(ManifestError) as err:
            manager_config.parse(head + body)
        assert err.value.field == field, body


# -- the AdmissionCheck's Active and the ClusterQueue rules -----------------------------------------


def test_admission_check_active_follows_its_workers() -> None:
    state = run("all-at-once-nominates-connected-workers").state
    check = state.multikueue.checks["mk"]
    assert multikueue.check_condition(state.multikueue, check) == (
        True,
        "SomeActiveClusters",
        "Inactive clusters: [worker-c]",
    )
    fold(state, types.WorkerClusterConnectivity(cluster="worker-c", active=True, at_ms=1))
    assert multikueue.check_condition(state.multikueue, check) == (True, "Active", "The admission check is active")
    fold(
        state,
        types.ObjectDeleted(kind="MultiKueueCluster", name="worker-c"),
        types.WorkerClusterConnectivity(cluster="worker-a", active=False, at_ms=2),
        types.WorkerClusterConnectivity(cluster="worker-b", active=False, at_ms=2),
    )
    assert multikueue.check_condition(state.multikueue, check) == (
        False,
        "NoUsableClusters",
        "Missing clusters: [worker-c], Inactive clusters: [worker-b worker-a]",
    )
    assert not state.admission_checks["mk"].active
    assert readiness.cluster_queue_active(state.cluster_queues["cq"], state=state).reason == "AdmissionCheckInactive"
    fold(state, types.ObjectDeleted(kind="MultiKueueConfig", name="mk-config"))
    assert multikueue.check_condition(state.multikueue, check) == (
        False,
        "BadConfig",
        'Cannot load the AdmissionChecks parameters: MultiKueueConfig.kueue.x-k8s.io "mk-config" not found',
    )


def test_cluster_queue_rules_for_multikueue_checks() -> None:
    state = run("two-multikueue-checks-make-the-cluster-queue-inactive").state
    active = readiness.cluster_queue_active(state.cluster_queues["cq"], state=state)
    assert (active.status, active.reason) == (False, "MultipleMultiKueueAdmissionChecks")
    assert active.message == (
        "Can't admit new workloads: Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
        "found: mk,mk2."
    )
    state = run("multikueue-with-provisioning-makes-the-cluster-queue-inactive").state
    cq = state.cluster_queues["cq"]
    assert queues.multikueue_problems(cq, state.admission_checks) == [
        (
            "MultiKueueWithProvisioningRequest",
            "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: mk, prov",
        )
    ]
    per_flavor = msgspec.structs.replace(
        cq,
        spec=msgspec.structs.replace(
            cq.spec,
            resource_groups=[
                models.ResourceGroup(
                    covered_resources=["cpu"],
                    flavors=[
                        models.FlavorQuotas(name=f, resources=[models.ResourceQuota(name="cpu", nominal_quota=1)])
                        for f in ("default", "other")
                    ],
                )
            ],
            admission_checks_strategy=models.AdmissionChecksStrategy(
                admission_checks=[models.AdmissionCheckStrategyRule(name="mk", on_flavors=["default"])]
            ),
        ),
    )
    assert queues.multikueue_problems(per_flavor, state.admission_checks) == [
        ("MultiKueueAdmissionCheckAppliedPerFlavor", "Cannot specify MultiKueue AdmissionCheck per flavor, found: mk")
    ]


# -- the decider ------------------------------------------------------------------------------


def test_winner_sets_ready_cluster_name_and_clears_nominations() -> None:
    done = run("all-at-once-first-admission-wins")
    chosen = [e for _, e in done.log if isinstance(e, types.RemoteAdmissionChosen)]
    assert [(e.cluster, e.message) for e in chosen] == [("worker-b", 'The workload was admitted on "worker-b"')]
    wl = done.state.workloads["default/w1"]
    assert wl.checks["mk"].state == "Ready" and wl.admitted
    assert done.state.multikueue.cluster_names == {"default/w1": "worker-b"}
    assert "default/w1" not in done.state.multikueue.nominations


def test_worker_lost_retries_at_the_timeout_not_before() -> None:
    """workerLostTimeout (15m) counts from the WorkerClusterConnectivity that reported the loss."""
    state = run("all-at-once-first-admission-wins").state
    lost_at = 1_800_000_000_000
    fold(state, types.WorkerClusterConnectivity(cluster="worker-b", active=False, at_ms=lost_at))
    fold(state, types.WorkerClusterConnectivity(cluster="worker-b", active=False, at_ms=lost_at + MINUTE))
    assert rules.decide(state, now_ms=lost_at + 15 * MINUTE - 1) == []
    (retry,) = rules.decide(state, now_ms=lost_at + 15 * MINUTE)
    assert isinstance(retry, types.MultiKueueCheckRetry)
    assert retry.message == 'Admitting remote lost, Previously: "Ready"'
    config = models.Configuration(multi_kueue=models.MultiKueueConfiguration(worker_lost_timeout="1h"))
    fold(state, types.ConfigurationObserved(configuration=config))
    assert rules.decide(state, now_ms=lost_at + 59 * MINUTE) == []


def test_copy_evicted_or_out_of_sync_on_the_worker_retries() -> None:
    state = run("all-at-once-first-admission-wins").state
    ref = state.workloads["default/w1"].ref
    fold(
        state, types.RemoteWorkloadObserved(workload=ref, cluster="worker-b", finished=True, finish_reason="OutOfSync")
    )
    (retry,) = rules.decide(state, now_ms=1)
    assert isinstance(retry, types.MultiKueueCheckRetry) and "out of sync" in retry.message
    fold(state, types.RemoteWorkloadObserved(workload=ref, cluster="worker-b", evicted=True, eviction_reason="x"))
    (retry,) = rules.decide(state, now_ms=1)
    assert retry.message == (
        'Workload evicted on worker cluster: "worker-b", resetting for re-admission. Previously: "Ready"'
    )


def test_rejected_without_an_adapter() -> None:
    done = run("no-adapter-rejects")
    (rejected,) = [e for _, e in done.log if isinstance(e, types.MultiKueueCheckRejected)]
    assert rejected.message == (
        'No multikueue adapter found for owner kind "apps/v1, Kind=Deployment", Previously: "Pending"'
    )
    deactivated = [e for _, e in done.log if isinstance(e, types.WorkloadDeactivated)]
    assert [e.reason for e in deactivated] == ["AdmissionCheck"]


def test_incremental_steps_and_no_more_workers() -> None:
    done = run("incremental-adds-the-next-step-after-five-minutes")
    steps = [(e.step, e.clusters) for _, e in done.log if isinstance(e, types.WorkersNominated)]
    assert steps == [(0, ["worker-c", "worker-a"]), (1, ["worker-c", "worker-a", "worker-b"])]
    wl = done.state.workloads["default/w1"]
    why = rules.explain(done.state, wl, now_ms=10**15)
    assert why is not None and why.waiting == rules.NO_MORE_WORKERS


def test_duration_ms() -> None:
    assert rules.duration_ms("15m") == 15 * MINUTE
    assert rules.duration_ms("1h30m") == 90 * MINUTE
    assert rules.duration_ms("0") == 0
    with pytest.raises(ValueError, match="not a Go duration"):
        rules.duration_ms("15 minutes")


# -- replay -----------------------------------------------------------------------------------


def test_replay_rechecks_the_multikueue_decisions_and_catches_a_tampered_winner() -> None:
    done = run("earliest-admission-wins")
    report = check_log(done.messages, deciders.BY_ROLE)
    assert report.ok, report.mismatches
    # the choice is carried by its record (event schema 17): the record is tampered with
    victim, record = next(
        (m, e)
        for m, e in zip(done.messages, done.events, strict=True)
        if isinstance(e, types.DecisionRecord) and any(isinstance(d, types.RemoteAdmissionChosen) for d in e.carried)
    )
    assert isinstance(record, types.DecisionRecord)
    (event,) = [d for d in record.carried if isinstance(d, types.RemoteAdmissionChosen)]
    assert event.cluster == "worker-b"
    forged = msgspec.structs.replace(event, cluster="worker-a", message='The workload was admitted on "worker-a"')
    record = msgspec.structs.replace(record, decisions=tuple(forged if d is event else d for d in record.carried))
    tampered = [
        msgspec.structs.replace(m, data=codec.encode(record)) if m.seq == victim.seq else m for m in done.messages
    ]
    report = check_log(tampered, deciders.BY_ROLE)
    assert not report.ok
    first = report.mismatches[0]
    assert '"worker-a"' in first.stored and '"worker-b"' in first.replayed


# -- what the dispatcher writes ---------------------------------------------------------------------


def test_dispatcher_writes_cluster_name_check_and_active_condition() -> None:
    """The Workload's status.clusterName / nominatedClusterNames / the MultiKueue check entry, and the
    MultiKueue AdmissionCheck's Active condition, as the dispatcher renders them from the log."""
    from kueue_es.services.dispatcher import core, object_sync, status

    done = run("all-at-once-first-admission-wins")
    view = core.DispatchState()
    nominated_seen = False
    for message, decoded in zip(done.messages, done.events, strict=True):
        # a record, then what it stands for at its sequence (the decisions it carries, event schema 17)
        for event in types.with_carried(decoded):
            core.fold(view, event, seq=message.seq)
            if isinstance(event, types.WorkersNominated):
                written = status.workload_status(view.records["default/w1"], generation=1)
                assert written["nominatedClusterNames"] == ["worker-a", "worker-b"]
                assert "clusterName" not in written
                nominated_seen = True
    assert nominated_seen
    assert ("AdmissionCheck", "", "mk") in view.dirty_queues
    written = status.workload_status(view.records["default/w1"], generation=1)
    assert written["clusterName"] == "worker-b" and "nominatedClusterNames" not in written
    (entry,) = written["admissionChecks"]
    assert (entry["name"], entry["state"], entry["message"]) == (
        "mk",
        "Ready",
        'The workload was admitted on "worker-b"',
    )
    # kueue-es is the MultiKueue checks' controller: its entry wins over the server's
    server = [{**entry, "state": "Pending", "message": ""}]
    assert object_sync.keep_controller_checks([entry], server, own={"mk"}) == [entry]
    assert object_sync.keep_controller_checks([entry], server) == server
    condition = status.active_condition(view.cluster, "AdmissionCheck", "", "mk", previous=None, generation=1, now_ms=0)
    assert (condition["status"], condition["reason"]) == ("True", "Active")


# -- explain ----------------------------------------------------------------------------------------


def _write_log(done: CoreRun, path: Path) -> Path:
    from kueue_es import logfile

    with path.open("wb") as out:
        writer = logfile.LogWriter(out)
        for message in done.messages:
            writer.write(message)
    return path


def test_explain_names_the_workers_tried_and_the_winner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kueue_es import cli

    path = _write_log(run("earliest-admission-wins"), tmp_path / "log.jsonl")
    capsys.readouterr()  # the run's debug log
    assert cli.main(["explain", "default/w1", "--file", str(path), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    story = [(line["what"], line["text"]) for line in report["story"]]
    assert ("workers nominated", "MultiKueue check mk: copies go to worker-a, worker-b") in story
    whats = [what for what, _ in story]
    assert whats.count("remote copy") == 2
    assert any(
        what == "worker chosen" and text.startswith("worker-b: its copy was admitted first") for what, text in story
    )
    assert report["multikueue"] == {
        "check": "mk",
        "state": "Ready",
        "nominated": [],
        "copies": {"worker-a": "Admitted", "worker-b": "Admitted"},
        "clusterName": "worker-b",
        "waiting": "",
    }


def test_explain_says_why_multikueue_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kueue_es import cli

    path = _write_log(run("nomination-waits-for-the-other-checks"), tmp_path / "log.jsonl")
    capsys.readouterr()
    assert cli.main(["explain", "default/w1", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "nominated: worker-a, worker-b" in out
    assert "MultiKueue waits: waiting for a nominated worker to admit its copy" in out


def test_multikueue_metrics_count_dispatches_and_admissions() -> None:
    """One dispatch per worker a nomination adds, one admission per winner (Kueue's multikueue_* counters)."""
    done = run("copy-gone-on-reachable-worker-retries")  # nominated twice (a, b), admitted on a then on b
    counters = done.state.metrics.counters
    assert counters["multikueue_workloads_dispatched_total"] == {("cq", "worker-a"): 2, ("cq", "worker-b"): 2}
    assert counters["multikueue_workloads_admitted_total"] == {("cq", "worker-a"): 1, ("cq", "worker-b"): 1}


def test_dispatcher_writes_the_workers_connected_condition() -> None:
    """A MultiKueueCluster's Active condition follows the edge's WorkerClusterConnectivity (kubectl's
    Connected column); before any report the object's own condition stands (nothing is written)."""
    from kueue_es.services.dispatcher import core, status

    done = run("all-at-once-first-admission-wins")
    view = core.DispatchState()
    for message, event in zip(done.messages, done.events, strict=True):
        core.fold(view, event, seq=message.seq)
    with pytest.raises(KeyError):
        status.active_condition(
            view.cluster, "MultiKueueCluster", "", "worker-a", previous=None, generation=1, now_ms=0
        )
    lost = types.WorkerClusterConnectivity(
        cluster="worker-a", active=False, reason="ClientConnectionFailed", message="dial tcp: refused", at_ms=5
    )
    core.fold(view, lost, seq=len(done.messages) + 1)
    assert ("MultiKueueCluster", "", "worker-a") in view.dirty_queues
    condition = status.active_condition(
        view.cluster, "MultiKueueCluster", "", "worker-a", previous=None, generation=1, now_ms=7
    )
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "ClientConnectionFailed",
        "dial tcp: refused",
    )


def test_explain_tells_a_remote_write_from_a_local_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The MultiKueue edge's writes on a worker (kq.disp.<cluster>...) are told as what they are, not as
    the local job unsuspended (found by a new user: every edge write read "started ... unsuspended")."""
    from kueue_es import cli
    from kueue_es.events import codec, subjects
    from kueue_es.events.bus.base import LogMessage

    done = run("earliest-admission-wins")
    ref = types.WorkloadRef(namespace="default", name="w1")
    last = done.messages[-1].seq
    edge_writes = [
        types.DispatchApplied(workload=ref, decision_seq=last, action=action, target=f"worker-b/{ref.key}")
        for action in ("create-remote-job", "delete-remote-workload:lost-race")
    ]
    extra = [
        LogMessage(seq=last + i, subject=subjects.dispatch_subject(ref, "worker-b"), data=codec.encode(event))
        for i, event in enumerate(edge_writes, start=1)
    ]
    path = _write_log(done, tmp_path / "log.jsonl")
    from kueue_es import logfile

    with path.open("ab") as out:
        writer = logfile.LogWriter(out)
        for message in extra:
            writer.write(message)
    capsys.readouterr()
    assert cli.main(["explain", "default/w1", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "create-remote-job on worker-b/default/w1" in out
    assert "delete-remote-workload:lost-race on worker-b/default/w1" in out
    assert "unsuspended" not in out


def test_the_managers_pods_stay_gated_when_a_worker_runs_them() -> None:
    """pod_test.go "Should create a pod on worker if admitted": Kueue skips the local start of a Pod (its one
    ComposableJob) whose workload has a MultiKueue check (reconciler.go startJob, ShouldSkipLocalExecution).
    The dispatcher ungated the manager's Pod, so it ran on the manager as well as on the worker."""
    from kueue_es.services.dispatcher import core as dispatcher

    state = run("pod-admitted-on-a-worker").state
    wl = state.workloads["default/pod-p1-abcde"]
    assert wl.admitted and multikueue.has_multikueue_check(wl, state.admission_checks)
    assert dispatcher.start_of(dispatcher.DispatchState(cluster=state), wl) is None
    # a Job of the same queue is started on the manager: its managedBy keeps the Job controller off it
    job = run("evicted-on-worker-retries").state
    started = dispatcher.start_of(dispatcher.DispatchState(cluster=job), job.workloads["default/w1"])
    assert isinstance(started, dispatcher.StartJob)


def test_a_pod_groups_manager_pods_stay_gated_when_their_statuses_come_back() -> None:
    """pod_test.go "Should create a pod group on worker if admitted": the manager's Pods of a group stay gated while
    the worker runs it. The edge's status writes marked the group, and the dispatcher's late start of an admitted
    group's gated Pods (pod_controller.go Run) ungated them all on the manager; Kueue's startJob skips that run too
    (ShouldSkipLocalExecution)."""
    from kueue_es.services.dispatcher import core as dispatcher

    state = run("pod-group-admitted-on-a-worker").state
    wl = state.workloads["default/test-group"]
    assert wl.admitted and multikueue.has_multikueue_check(wl, state.admission_checks)
    view = dispatcher.DispatchState(cluster=state)
    view.started[wl.workload.key] = dispatcher.pod_set_infos(state, wl, None)
    assert dispatcher.start_of(view, wl) is None
    assert dispatcher.late_start(view, wl.workload.key) is None


def test_a_choice_folded_with_its_nomination_is_written_after_it() -> None:
    """A dispatcher that folds WorkersNominated and RemoteAdmissionChosen before it writes wants clusterName at
    once; Kueue's webhook takes a clusterName only from the nominated ones, so the nomination is written first
    (object_sync.nomination_first) and both writes pass the webhook. Kueue's e2e preemption case hung under load
    on the refused write."""
    from kueue_es.jobframework import workload_webhook
    from kueue_es.services.dispatcher import core, object_sync, status

    done = run("all-at-once-first-admission-wins")
    view = core.DispatchState()
    for message, decoded in zip(done.messages, done.events, strict=True):
        for event in types.with_carried(decoded):  # a record, then the decisions it carries (event schema 17)
            core.fold(view, event, seq=message.seq)
    wanted = status.workload_status(view.records["default/w1"], generation=1)
    assert wanted["clusterName"] == "worker-b"

    def obj(workload_status: dict) -> dict:
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w1", "namespace": "default"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}]},
            "status": workload_status,
        }

    def refused(new: dict, old: dict) -> list[str]:
        return [str(e) for e in workload_webhook.validate(obj(new), old=obj(old), gates={})]

    assert [e for e in refused(wanted, {}) if e.startswith("status.clusterName")]  # at once: refused
    first = object_sync.nomination_first({}, wanted)
    assert first is not None and first["nominatedClusterNames"] == ["worker-b"] and "clusterName" not in first
    assert refused(first, {}) == [] and refused(wanted, first) == []
    assert object_sync.nomination_first(first, wanted) is None  # nominated: written as it is
    assert object_sync.nomination_first({"clusterName": "worker-b"}, wanted) is None
