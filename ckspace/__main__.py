"""``python -m ckspace``: the same as the ``ckspace`` command."""

import sys

from ckspace.cli import main

sys.exit(main())
