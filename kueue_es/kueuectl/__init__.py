"""``kubectl kueue``: Kueue's kueuectl for kueue-es, as a kubectl plugin (the ``kubectl-kueue`` console script).

Kueue ships kueuectl (cmd/kueuectl in kubernetes-sigs/kueue; site/content/en/docs/reference/kubectl-kueue)
to create, list, stop, resume and delete its objects. This package gives the same commands, flags,
columns and messages, talking to the API server with kubernetes-asyncio under kubectl's kubeconfig rules
(:mod:`.connect`), and forwards what only kueue-es's log can answer (``explain``, ``what-if``, ``diff``,
``status``, ``list ... --at``) to the ``kueue-es`` command line. docs/kubectl-kueue.md is its reference.

Modules: :mod:`.cli` (arguments, dispatch, errors and exit codes), :mod:`.connect` (kubeconfig, requests),
:mod:`.printing` (kubectl's table, name, YAML and JSON output, ages), :mod:`.specs` (the create flags as
kueuectl parses them), :mod:`.commands` (what each command does), :mod:`.positions` (where a pending
workload stands in its queues).
"""
