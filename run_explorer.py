"""The frozen app's entry script (``explorer.spec``).

PyInstaller runs its entry script as ``__main__``, outside any package: the explorer is
imported here as a package, so every module inside it imports as it does under
``python -m explorer``.  It also runs the app from a checkout: ``python run_explorer.py``.
"""
import sys

from explorer.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
