"""kueue-es dashboard without a browser: the JSON it builds (lent and borrowed quota in a cohort tree,
pending positions, why a workload waits), its history answers against independent folds, and its SSE
stream. The page itself is tested in chromium (tests/browser)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kueue_es import deciders, logsource
from kueue_es.dashboard import server, views
from kueue_es.events import subjects
from kueue_es.services.admitter.core import decide
from kueue_es.services.runtime import build_batch
from kueue_es.services.watcher.convert import kueue_fact
from tests import builders as b

NOW = 1_800_000_000_000  # ms since the epoch


def cohort(name: str, parent: str = "", cpu: int | None = None) -> dict[str, Any]:
    """A Cohort; ``cpu``: its own nominal quota of flavor f (its ``resourceGroups``)."""
    spec: dict[str, Any] = {"parentName": parent} if parent else {}
    if cpu is not None:
        spec["resourceGroups"] = [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def queue(name: str, cohort_name: str, cpu: int = 4) -> dict[str, Any]:
    doc = b.cluster_queue(name, flavors={"f": {"cpu": cpu}})
    doc["spec"]["cohortName"] = cohort_name
    return doc


class Recorded:
    """A log as the services write it: facts from manifests, the admitter's cycles as verified batches."""

    def __init__(self) -> None:
        self.log = b.FoldedLog()

    def facts(self, *docs: dict[str, Any]) -> None:
        for doc in docs:
            self.log.append(subjects.fact_message(kueue_fact(doc)))

    def settle(self, now_ms: int = NOW) -> None:
        for i in range(20):
            outputs = decide(self.log.state, now_ms=now_ms + i)
            if not outputs:
                return
            head, rest = build_batch(
                deciders.ADMITTER,
                outputs=outputs,
                basis_seq=len(self.log.messages),
                head_seq=self.log.state.heads.get(subjects.DEFAULT_PARTITION, 0),
                now_ms=now_ms + i,
            )
            self.log.append(head, *rest)
        raise AssertionError("the admitter did not settle")


def borrowing_in(cohorts: list[dict[str, Any]], queues: list[dict[str, Any]]) -> Recorded:
    """ClusterQueues a, b, c of 4 CPU each; a's LocalQueue gets a 6-CPU workload (admitted, borrowing 2) and
    a 20-CPU one (never fits: 12 in the whole tree)."""
    recorded = Recorded()
    recorded.facts(b.flavor("f"), *cohorts, *queues, b.local_queue("lq", "a"))
    recorded.facts(b.workload("big", cpu="6", created=1), b.workload("huge", cpu="20", created=2))
    recorded.settle()
    assert recorded.log.orphans == []
    return recorded


def row(body: dict[str, Any], cq: str) -> dict[str, Any]:
    [found] = [q for q in body["clusterQueues"] if q["name"] == cq]
    [quota] = found["quota"]
    return quota


def test_a_borrower_s_quota_is_lent_by_the_members_with_unused_quota_in_proportion() -> None:
    recorded = borrowing_in([], [queue("a", "team"), queue("b", "team"), queue("c", "team")])
    body = views.overview(recorded.log.state, now_ms=NOW)
    assert {k: row(body, "a")[k] for k in ("nominal", "used", "borrowed", "lent")} == {
        "nominal": 4000,
        "used": 6000,
        "borrowed": 2000,
        "lent": 0,
    }
    assert (row(body, "b")["lent"], row(body, "c")["lent"]) == (1000, 1000)
    assert row(body, "a")["display"] == {
        "nominal": "4",
        "used": "6",
        "borrowed": "2",
        "lent": "0",
        "borrowingLimit": None,
        "lendingLimit": None,
    }
    [team] = body["cohorts"]
    assert (team["name"], team["implicit"], team["clusterQueues"]) == ("team", True, ["a", "b", "c"])
    # a root cohort borrows from no parent and lends to none: its members lend among themselves
    assert [figures(q) for q in team["quota"]] == [(12000, 0, 6000, 0, 0, 0)]
    assert body["standaloneClusterQueues"] == []
    assert_lent_adds_up_to_borrowed(body)


def test_lending_goes_through_a_cohort_tree() -> None:
    """a in cohort left, b and c in cohort right, both under root: what a borrows, right lends up."""
    recorded = borrowing_in(
        [cohort("root"), cohort("left", "root"), cohort("right", "root")],
        [queue("a", "left"), queue("b", "right"), queue("c", "right", cpu=12)],
    )
    body = views.overview(recorded.log.state, now_ms=NOW)
    assert (row(body, "a")["borrowed"], row(body, "a")["lent"]) == (2000, 0)
    # right's unused 16 CPU lends the 2: b has 4 spare, c 12, so 0.5 and 1.5
    assert (row(body, "b")["lent"], row(body, "c")["lent"]) == (500, 1500)
    [root] = body["cohorts"]
    assert [c["name"] for c in root["cohorts"]] == ["left", "right"]
    left, right = root["cohorts"]
    assert [(q["borrowed"], q["lent"]) for q in left["quota"]] == [(2000, 0)]
    assert [(q["borrowed"], q["lent"]) for q in right["quota"]] == [(0, 2000)]
    assert [(q["borrowed"], q["lent"]) for q in root["quota"]] == [(0, 0)]
    assert_lent_adds_up_to_borrowed(body)


def figures(row: dict[str, Any]) -> tuple[int, ...]:
    """A cohort's quota row: nominal (its subtree's, its own included), own nominal, used, borrowed, lent, own lent."""
    return tuple(row[k] for k in ("nominal", "ownNominal", "used", "borrowed", "lent", "ownLent"))


def assert_lent_adds_up_to_borrowed(body: dict[str, Any]) -> None:
    """docs/dashboard.md's promise: what the ClusterQueues borrow is what ClusterQueues lend plus what is used of
    the cohorts' own quota, per flavor and resource."""

    def cohorts(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [c for node in nodes for c in [node, *cohorts(node["cohorts"])]]

    totals: dict[tuple[str, str], int] = {}
    for cq in body["clusterQueues"]:
        for q in cq["quota"]:
            fr = (q["flavor"], q["resource"])
            totals[fr] = totals.get(fr, 0) + q["borrowed"] - q["lent"]
    for c in cohorts(body["cohorts"]):
        for q in c["quota"]:
            fr = (q["flavor"], q["resource"])
            totals[fr] = totals.get(fr, 0) - q["ownLent"]
    assert set(totals.values()) <= {0}, totals


def test_a_cohorts_own_quota_counts_in_its_subtree_and_lends_to_its_members() -> None:
    """Cohort shared-pool with 6 CPU of its own and ClusterQueue team-c (0 CPU) in it: a 4-CPU workload of
    team-c borrows 4 from the pool. The cohort shows its own quota, and, a root, no borrowing nor lending
    (before, it showed 0 nominal and "borrowed 4, lent 0")."""
    recorded = Recorded()
    recorded.facts(b.flavor("f"), cohort("shared-pool", cpu=6), queue("team-c", "shared-pool", cpu=0))
    recorded.facts(b.local_queue("lq", "team-c"), b.workload("w", cpu="4", created=1))
    recorded.settle()
    body = views.overview(recorded.log.state, now_ms=NOW)
    assert {k: row(body, "team-c")[k] for k in ("nominal", "used", "borrowed", "lent")} == {
        "nominal": 0,
        "used": 4000,
        "borrowed": 4000,
        "lent": 0,
    }
    [pool] = body["cohorts"]
    assert (pool["name"], pool["implicit"], pool["clusterQueues"]) == ("shared-pool", False, ["team-c"])
    [cpu] = pool["quota"]
    assert figures(cpu) == (6000, 6000, 4000, 0, 0, 4000)
    assert (cpu["display"]["nominal"], cpu["display"]["ownLent"], cpu["display"]["lendingLimit"]) == ("6", "4", None)
    assert_lent_adds_up_to_borrowed(body)


def test_own_quota_in_a_cohort_tree_lends_first_and_borrowing_is_towards_the_parent() -> None:
    """Cohort org (2 CPU of its own) holds ClusterQueue y (4) and cohort pool (4 CPU of its own), which holds
    x (2). A 7-CPU workload of x: x borrows 5; pool's subtree has 6, so pool borrows 1 from org, whose own
    quota lends it; pool's own 4 lend the rest. y lends nothing: org's own quota came first."""
    recorded = Recorded()
    recorded.facts(b.flavor("f"), cohort("org", cpu=2), cohort("pool", "org", cpu=4))
    recorded.facts(queue("x", "pool", cpu=2), queue("y", "org", cpu=4), b.local_queue("lq", "x"))
    recorded.facts(b.workload("w", cpu="7", created=1))
    recorded.settle()
    body = views.overview(recorded.log.state, now_ms=NOW)
    assert (row(body, "x")["borrowed"], row(body, "x")["lent"], row(body, "y")["lent"]) == (5000, 0, 0)
    [org] = body["cohorts"]
    [pool] = org["cohorts"]
    assert [figures(q) for q in org["quota"]] == [(12000, 2000, 7000, 0, 0, 1000)]
    assert [figures(q) for q in pool["quota"]] == [(6000, 4000, 7000, 1000, 0, 4000)]
    assert_lent_adds_up_to_borrowed(body)


def test_local_queues_list_pending_workloads_with_their_positions_and_reasons() -> None:
    recorded = borrowing_in([], [queue("a", "team"), queue("b", "team"), queue("c", "team")])
    body = views.overview(recorded.log.state, now_ms=NOW)
    [lq] = body["localQueues"]
    assert (lq["namespace"], lq["name"], lq["clusterQueue"], lq["admitted"]) == ("default", "lq", "a", 1)
    assert lq["pending"] == [
        {"name": "huge", "priority": 0, "effectivePriority": 0, "positionInLocalQueue": 0, "positionInClusterQueue": 0}
    ]
    workloads = {w["key"]: w for w in body["workloads"]}
    assert workloads["default/big"]["status"] == "ADMITTED" and workloads["default/big"]["message"] == ""
    huge = workloads["default/huge"]
    assert huge["status"] == "PENDING" and huge["positionInLocalQueue"] == 0
    assert "insufficient quota for cpu in flavor f" in huge["message"]


def fold(messages: list[Any]) -> tuple[Any, int]:
    folder = logsource.Folder()
    for message in messages:
        folder.feed(message)
    return folder.state, folder.last_ms


def live_log(recorded: Recorded) -> server.LiveLog:
    live = server.LiveLog()
    for message in recorded.log.messages:
        live.add(message)
    return live


async def test_history_answers_as_an_independent_fold_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "CHECKPOINT_EVERY", 3)  # kept states to start from, exercised
    recorded = borrowing_in([], [queue("a", "team"), queue("b", "team"), queue("c", "team")])
    messages = recorded.log.messages
    live = live_log(recorded)
    assert sorted(live.checkpoints) == list(range(3, len(messages) + 1, 3))
    history = server.History(live)
    for count in [len(messages), 2, 7, 5, len(messages) - 1, 1, 7]:
        state, last_ms = fold(messages[:count])
        expected = views.overview(state, now_ms=last_ms)
        got = dict(history.overview_at(count))
        assert got.pop("asOf")["seq"] == messages[count - 1].seq
        assert got == expected, count


async def test_the_api_answers_now_as_of_then_and_for_a_workload() -> None:
    recorded = borrowing_in([], [queue("a", "team"), queue("b", "team"), queue("c", "team")])
    live = live_log(recorded)
    last = recorded.log.messages[-1].seq
    async with TestClient(TestServer(server.app(live, clock=lambda: NOW + 5000))) as client:
        now = await (await client.get("/api/overview")).json()
        assert now["asOf"] == {
            "seq": last,
            "time": logsource.rfc3339(NOW + 5000),
            "lastSeq": last,
            "live": True,
            "caughtUp": True,
        }
        assert [w["status"] for w in now["workloads"]] == ["ADMITTED", "PENDING"]

        before = await (await client.get("/api/overview?at=6")).json()  # the objects and one workload
        assert before["asOf"]["seq"] == 6 and before["asOf"]["live"] is False
        assert [(w["name"], w["status"]) for w in before["workloads"]] == [("big", "PENDING")]

        bad = await client.get("/api/overview?at=yesterday")
        assert bad.status == 400
        assert "neither a log sequence nor an RFC 3339 time" in (await bad.json())["error"]

        huge = await (await client.get("/api/workloads/default/huge")).json()
        assert huge["status"] == "pending"
        assert "insufficient quota for cpu" in huge["needs"]["message"]
        assert huge["position"]["positionInLocalQueue"] == 0
        assert [line["what"] for line in huge["story"]][0] == "submitted"
        then = await (await client.get("/api/workloads/default/big?at=6")).json()
        assert then["status"] == "pending" and then["asOf"]["seq"] == 6
        missing = await client.get("/api/workloads/default/nobody")
        assert missing.status == 404 and "no Workload default/nobody" in (await missing.json())["error"]

        points = await (await client.get("/api/history")).json()
        assert (points["firstSeq"], points["lastSeq"], points["messages"]) == (1, last, last)
        page = await client.get("/workloads/default/huge")
        assert page.status == 200 and 'data-testid="workload-page"' in await page.text()
        script = await client.get("/static/app.js")
        assert script.status == 200 and script.content_type == "text/javascript"
        assert (await client.get("/static/../server.py")).status == 404
        assert (await client.get("/readyz")).status == 200

        # an unknown API path, or another method, is JSON as the API's other errors are
        unknown = await client.get("/api/nothing-here")
        assert unknown.status == 404 and unknown.content_type == "application/json"
        assert (await unknown.json())["error"] == "no such API path /api/nothing-here (docs/dashboard.md lists them)"
        posted = await client.post("/api/overview")
        assert posted.status == 405 and posted.content_type == "application/json"
        assert (await posted.json())["error"] == "Method Not Allowed: POST /api/overview"
        assert posted.headers["Allow"] == "GET,HEAD"
        assert (await client.get("/nothing-here")).content_type == "text/plain"  # not the API: aiohttp's page


async def test_events_push_the_overview_when_the_log_grows() -> None:
    recorded = borrowing_in([], [queue("a", "team"), queue("b", "team"), queue("c", "team")])
    live = live_log(recorded)
    async with TestClient(TestServer(server.app(live, clock=lambda: NOW))) as client:
        response = await client.get("/api/events")
        assert response.headers["Content-Type"] == "text/event-stream"

        async def next_event() -> tuple[int, dict[str, Any]]:
            while True:
                chunk = (await response.content.readuntil(b"\n\n")).decode()
                if chunk.startswith(":"):
                    continue  # a keep-alive
                fields = dict(line.split(": ", 1) for line in chunk.strip().split("\n"))
                assert fields["event"] == "overview"
                return int(fields["id"]), json.loads(fields["data"])

        first, body = await next_event()
        assert first == recorded.log.messages[-1].seq and len(body["workloads"]) == 2
        recorded.facts(b.workload("later", cpu="1", created=3))
        live.add(recorded.log.messages[-1])
        second, body = await next_event()
        assert second == first + 1
        assert "default/later" in {w["key"] for w in body["workloads"]}
        response.close()
