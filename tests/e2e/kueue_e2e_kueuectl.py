"""The step of Kueue's test/e2e/singlecluster/baseline/kueuectl_test.go (Describe "Kueuectl", "Should create a local
queue and list it back"), run by tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep``.

Kueue runs its compiled ``kubectl-kueue`` binary; here the real kubectl runs the installed ``kubectl-kueue`` script as
its plugin (``kubectl kueue ...``, the venv's ``bin/`` on ``PATH``, as docs/kubectl-kueue.md says to install it). The
step also runs one of Kueue's pass-through cases (passthrough_test.go: ``get`` with a JSONPath and ``patch`` of a
LocalQueue go to kubectl itself), which tests/kube/test_kueuectl_integration.py can only check the arguments of.
The rest of Kueue's kueuectl cases are there, on the emulated API server.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.e2e.kueue_e2e import E2E, KUEUE, is_true, namespace

STEP_NS = "e2e-kueuectl"


async def kubectl_kueue(e2e: E2E, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``kubectl kueue ARGS --kubeconfig DEMO`` (kubectl refuses its flags before a
    plugin's name, so the kubeconfig goes last, where kueuectl reads it)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "kueue",
        *args,
        f"--kubeconfig={e2e.kubectl.kubeconfig}",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def create_local_queue_and_list_it_back(e2e: E2E) -> None:
    """ "Should create a local queue and list it back": ``create localqueue`` through the plugin, then ``list
    localqueue -o json`` holds it, with its ClusterQueue; then ``get``/``patch`` of it pass through to kubectl."""
    ns, cq, lq = STEP_NS, f"e2e-cq-{STEP_NS}", "e2e-lq-sanity"
    # MakeClusterQueue(...).Obj(): no resource groups; CreateClusterQueuesAndWaitForActive
    await e2e.apply(
        namespace(ns),
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {"namespaceSelector": {}}},
    )
    await e2e.wait("clusterqueue", cq, None, lambda found: is_true(found, "Active"), what=f"ClusterQueue {cq} active")
    code, out, err = await kubectl_kueue(e2e, "create", "localqueue", lq, "--clusterqueue", cq, "--namespace", ns)
    assert (code, out, err) == (0, f"localqueue.kueue.x-k8s.io/{lq} created\n", ""), (code, out, err)

    code, out, err = await kubectl_kueue(e2e, "list", "localqueue", "--namespace", ns, "-o", "json")
    assert code == 0, err
    listed = json.loads(out)
    assert listed["kind"] == "LocalQueueList"
    assert [(i["metadata"]["name"], i["spec"]["clusterQueue"]) for i in listed["items"]] == [(lq, cq)]

    code, out, err = await kubectl_kueue(
        e2e, "patch", "lq", lq, "-n", ns, "--type=merge", "-p", '{"spec":{"stopPolicy":"Hold"}}'
    )
    assert (code, out) == (0, f"localqueue.kueue.x-k8s.io/{lq} patched\n"), (code, out, err)
    code, out, err = await kubectl_kueue(e2e, "get", "localqueue", lq, "-n", ns, "-o=jsonpath='{.spec.stopPolicy}'")
    assert (code, out) == (0, "'Hold'"), (code, out, err)


STEPS = [create_local_queue_and_list_it_back]
