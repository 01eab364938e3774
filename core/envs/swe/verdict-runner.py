"""Starts pytest for scoring so that nothing an answer planted runs first.

Run as `python -I verdict-runner.py <dir>[:<dir>...] -- <pytest args>`:
-I keeps PYTHONPATH, the user site and the current folder off sys.path while
pytest is imported and the venv's pytest plugins are listed (they are then
named with -p, not found by entry points). The workspace's folders go at the
end of sys.path, so a module in the workspace cannot stand in for an
installed one (pytest's plugins are imported later, by pytest: imported here
they could not have their asserts rewritten).
"""
import os
import sys

sys.dont_write_bytecode = True
for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
    os.environ.pop(name, None)
# Entry points are read from every folder on sys.path: a *.dist-info in the workspace would add a plugin.
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

import importlib.metadata  # noqa: E402

import pytest  # noqa: E402

plugins = sorted({ep.module for ep in importlib.metadata.entry_points(group="pytest11")})

separator = sys.argv.index("--")
folders = [p for p in sys.argv[1].split(":") if p]
sys.path.extend(folders)
args = [arg for module in plugins for arg in ("-p", module)] + sys.argv[separator + 1:]
sys.exit(int(pytest.main(args)))
