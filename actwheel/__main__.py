"""``python -m actwheel``."""

from __future__ import annotations

import sys

from actwheel.cli import main

sys.exit(main())
