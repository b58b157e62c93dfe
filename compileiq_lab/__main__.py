"""`python -m compileiq_lab`: the same as the `compileiq-lab` command."""

from __future__ import annotations

import sys

from compileiq_lab.cli.main import main

sys.exit(main())
