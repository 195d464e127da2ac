"""``python -m gluon_cf.launch``: see `gluon_cf.launch.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
