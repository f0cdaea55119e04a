"""``python -m firewall.cli``: the `firewall` command."""

import sys

from .main import main

sys.exit(main())
