"""``python -m lab_scripts.schemas [--check]``: write (or compare) the committed JSON Schemas."""

from __future__ import annotations

import sys

from lab_scripts.schemas.generate import main

sys.exit(main(sys.argv[1:]))
