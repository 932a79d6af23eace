"""``python -m assertwatch_replay``: the replay supervisor's command line (never imports torch)."""

import sys

from .supervisor import main

if __name__ == "__main__":
    sys.exit(main())
