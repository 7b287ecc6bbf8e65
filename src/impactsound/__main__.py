"""``python -m impactsound ...``: the same command line as the ``impactsound`` script."""
import sys

from .cli import main

sys.exit(main())
