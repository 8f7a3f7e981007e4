"""`python -m gradflow ...` is the `gradflow` command."""

import sys

from gradflow.cli import main

sys.exit(main())
