"""The `locost` command that `pip install` puts on PATH: the tool built with the module, shipped
inside the package (locost/bin/locost), run in place of this process."""
import os
import sys


def main():
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "locost")
    if not os.access(tool, os.X_OK):
        sys.exit(f"locost: this installation of the Python package has no tool at {tool} (built with LOCOST_PIP_TOOL=OFF?)")
    os.execv(tool, ["locost"] + sys.argv[1:])
