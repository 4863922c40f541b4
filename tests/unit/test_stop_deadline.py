"""A command stopping on SIGTERM or Ctrl-C ends within its deadline even when its teardown hangs.

``demo`` and ``up`` cancel their task on SIGTERM so every ``finally`` stops the services; a task that
swallowed its cancellation in that teardown (``cancel_and_wait`` cancels again and again, for ever) once
left a ``demo --keep`` whose services were gone alive through every further SIGTERM and SIGINT.
``runtime.cancel_on_stop_signals`` arms a deadline at the first stop signal.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# The shape of the demo: its task cancels on stop signals, and its teardown waits for a background task
# that swallows every cancellation.
_SCRIPT = """
import asyncio
from kueue_es.services import runtime

async def stubborn() -> None:
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass

async def command() -> None:
    runtime.cancel_on_stop_signals(deadline={deadline})
    background = asyncio.create_task(stubborn())
    try:
        print("running", flush=True)
        await asyncio.sleep(3600)
    finally:
        print("stopping", flush=True)
        await runtime.cancel_and_wait([background], retry=0.05)

asyncio.run(command())
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("where", ["finally", "asyncio.run"])
def test_a_teardown_that_never_ends_is_cut_at_the_deadline(sig: int, where: str) -> None:
    """The stubborn task waited for in the command's ``finally``, or left to ``asyncio.run``, whose own
    teardown cancels every task left and waits for them all."""
    script = _SCRIPT.format(deadline=1.0)
    if where == "asyncio.run":
        script = script.replace("await runtime.cancel_and_wait([background], retry=0.05)", "pass")
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    proc.send_signal(sig)
    assert proc.stdout.readline().strip() == "stopping"
    proc.send_signal(sig)  # a second signal is absorbed by the teardown, as it was in the hang
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the process outlived its stop deadline")
    assert code == 128 + sig
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    assert "still stopping 1 s after the stop signal" in stderr
    assert "Current thread" in stderr  # the threads' stacks follow the line


def test_a_quick_teardown_exits_as_before() -> None:
    """No hang: the deadline never fires, the command's cancellation ends it as Ctrl-C did."""
    script = _SCRIPT.format(deadline=30.0).replace("stubborn())", "asyncio.sleep(3600))")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=20)
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    assert "still stopping" not in stderr
    assert code != 0 and "CancelledError" in stderr  # asyncio.run raises the cancellation, the CLI turns it into 130
