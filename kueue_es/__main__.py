"""``python -m kueue_es``: the ``kueue-es`` command line (:mod:`kueue_es.cli`)."""

import sys

from kueue_es.cli import main

sys.exit(main())
