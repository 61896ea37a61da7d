"""``python -m gateway serve ...`` runs the same CLI as the ``ferry`` script."""

import sys

from .cli import main

sys.exit(main())
