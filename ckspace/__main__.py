"""``python -m ckspace``: the same as the ``ckspace`` command.

Ctrl-C or SIGTERM while the modules load ends quietly with 130/143 as it does later in ``main``
(which installs its own handlers); nothing has been written yet then.
"""

import signal
import sys


def _early_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


signal.signal(signal.SIGINT, _early_exit)
signal.signal(signal.SIGTERM, _early_exit)

from ckspace.cli import main  # noqa: E402 - after the handlers, so an early signal is quiet too

sys.exit(main())
