"""AppWorld's environment server for one episode, inside its sandbox.

Run by servers.ts as `python -c <this file> <root> <socket>`: it imports what
a world needs before any task is known (the apps' API and model modules, the
slow part of a first /initialize), then serves AppWorld's own FastAPI app on
a unix socket: the sandbox has no network, so a socket file in a folder bound
from the host is the only way in.
"""
import sys

import uvicorn
from appworld import update_root

update_root(sys.argv[1])

from appworld.apps import get_all_apps  # noqa: E402
from appworld.common.utils import import_apis_module, import_models_module  # noqa: E402
from appworld.serve.environment import app  # noqa: E402

for name in get_all_apps():
    import_apis_module(name)
    import_models_module(name)

uvicorn.run(app, uds=sys.argv[2], log_level="warning")
