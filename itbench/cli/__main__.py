"""``python -m itbench.cli``."""

from itbench.cli import main

main()
