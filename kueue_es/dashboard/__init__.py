"""``kueue-es dashboard``: a read-only web UI over the log, folded live (docs/dashboard.md).

:mod:`.server` reads and folds the log and serves the page and its JSON endpoints (aiohttp); :mod:`.views`
builds the JSON from a folded state; ``static/`` holds the page (HTML, CSS, plain JavaScript, no build step).
"""
