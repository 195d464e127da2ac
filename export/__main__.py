"""``python -m gluon_cf.export ...``: the ``gluon-cf-export`` command line (``cli.py``)."""
import sys

from .cli import main

sys.exit(main())
