"""``python -m ldpql`` is the ``ldpql`` command."""

import sys

from ldpql.cli import main

sys.exit(main())
