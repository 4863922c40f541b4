"""A command that is done exits on a late stop signal with its own exit code, even if shutdown hangs.

``kueue_es.cli.main`` (run as a process of its own) used to ignore SIGTERM and SIGINT once the command
returned, so that ``up`` stopping a service Ctrl-C had already reached did not turn a clean exit into
-15. But a shutdown that then hung (a worker thread blocked in a read) left the process alive through
every SIGTERM: a ``demo --keep`` that had stopped its services could only be SIGKILLed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

# A process that runs a kueue-es command (`events schema --output FILE`) through cli.main as the console script does (argv None),
# then blocks its exit on a non-daemon thread that never ends, as a stuck executor thread does.
_SCRIPT = """
import sys, threading
from kueue_es import cli
sys.argv = ["kueue-es", *{command!r}]
code = cli.main()
threading.Thread(target=threading.Event().wait).start()
print("done", code, flush=True)
sys.exit(code)
"""


def _run_and_signal(command: list[str], sig: int) -> tuple[int | None, str]:
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT.format(command=command)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the command has returned; the process now hangs in its exit
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=20), line
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, line


def test_a_late_sigterm_ends_a_hung_exit_with_the_commands_code(tmp_path: Path) -> None:
    code, line = _run_and_signal(["events", "schema", "--output", str(tmp_path / "s.json")], signal.SIGTERM)
    assert line.strip() == "done 0"
    assert code == 0, "the process ignored SIGTERM after its command had returned"


def test_a_late_sigint_ends_a_hung_exit_with_the_commands_code(tmp_path: Path) -> None:
    code, line = _run_and_signal(["events", "schema", "--output", str(tmp_path / "s.json")], signal.SIGINT)
    assert line.strip() == "done 0"
    assert code == 0


def test_the_exit_code_is_the_failed_commands(tmp_path: Path) -> None:
    # a stopped store that is not there: the command prints its error and returns 2
    code, line = _run_and_signal(["replay", "--store", str(tmp_path / "nowhere")], signal.SIGTERM)
    assert line.strip() == "done 2"
    assert code == 2
