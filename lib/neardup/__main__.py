import sys

from neardup.cli import console

sys.exit(console())
