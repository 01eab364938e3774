"""AppWorld's evaluation of one episode, in a process that never runs the agent's code.

Run by servers.ts as `python -c <this file> <root>`: it imports what the
evaluation needs, prints `ready`, then reads one request line
{"task_id", "experiment_name"} and grades the world the episode saved
(experiments/outputs/<experiment_name>/tasks/<task_id>/dbs, a copy the
worker made once the episode's sandbox was gone) with the task's ground
truth. It prints the test tracker as JSON (what the server's /evaluate
returns) and exits.
"""
import json
import os
import sys

from appworld import update_root

update_root(sys.argv[1])

import pytest  # noqa: E402, F401  (the checks' asserts import it)
from appworld.apps import get_all_apps  # noqa: E402
from appworld.collections.api_docs import ApiDocCollection  # noqa: E402
from appworld.common.utils import import_models_module  # noqa: E402
from appworld.evaluator import evaluate_task  # noqa: E402

for name in get_all_apps():
    import_models_module(name)
# Cached: Task.load asks for the same.
ApiDocCollection.load(load_apps=tuple(get_all_apps(skip_admin=True)), include_response_schemas=True)

print("ready", flush=True)
request = json.loads(sys.stdin.readline())
tracker = evaluate_task(
    task_id=request["task_id"],
    experiment_name=request["experiment_name"],
    suppress_errors=True,
    save_report=False,
)
print(json.dumps(tracker.to_dict(stats_only=False)), flush=True)
# Nothing to tear down: the answer is out.
os._exit(0)
