"""`python -m torchdoctor` is the same as the `torchdoctor` command."""

import sys

from torchdoctor.cli.main import main

sys.exit(main())
