import sys

from neardup.cli import main

sys.exit(main())
