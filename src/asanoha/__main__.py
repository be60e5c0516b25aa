"""``python -m asanoha``: the same as the ``asanoha`` script."""

from asanoha.cli import main

main()
