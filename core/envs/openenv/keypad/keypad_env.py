"""The keypad env: the project's own OpenEnv environment (Apache-2.0, like the project).

Each task asks for something typed on a keypad (a PIN, a year, an extension);
the reply is scored by the share of its non-blank characters that are digits:
partial credit from 0 to 1, success at SUCCESS_SHARE. One turn per episode.
It is built on the `openenv` package's server API (openenv.core.env_server)
and served by uvicorn; the Task API lists its tasks (split "train").

A reset takes the task as `task_id` (or `split` and `index`, the Task API's
way); a step takes `{"message": "<the reply>"}`.
"""

import json
import os
from pathlib import Path
from typing import Any, Optional

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

TASKS = json.loads((Path(__file__).parent / "tasks.json").read_text())["tasks"]
SUCCESS_SHARE = 0.9
SPLIT = "train"


class KeypadAction(Action):
    message: str


class KeypadObservation(Observation):
    text: str


class KeypadState(State):
    task_id: Optional[str] = None


def digit_share(reply: str) -> float:
    chars = [c for c in reply if not c.isspace()]
    if not chars:
        return 0.0
    return sum(1 for c in chars if c in "0123456789") / len(chars)


class KeypadEnvironment(Environment[KeypadAction, KeypadObservation, KeypadState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = KeypadState()
        self._task: Optional[dict] = None

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, task_id: Optional[str] = None,
              split: Optional[str] = None, index: Optional[int] = None, **kwargs: Any) -> KeypadObservation:
        if task_id is None and index is not None:
            if split not in (None, SPLIT):
                raise ValueError(f"unknown split {split!r}; the keypad env has {SPLIT!r}")
            task_id = TASKS[index]["id"]
        task = next((t for t in TASKS if t["id"] == task_id), None)
        if task is None:
            raise ValueError(f"unknown task_id {task_id!r}")
        self._task = task
        self._state = KeypadState(episode_id=episode_id, step_count=0, task_id=task_id)
        return KeypadObservation(text=task["prompt"], done=False, reward=None)

    def step(self, action: KeypadAction, timeout_s: Optional[float] = None, **kwargs: Any) -> KeypadObservation:
        if self._task is None:
            raise RuntimeError("reset first: no task")
        if self._state.step_count > 0:
            raise RuntimeError("the episode is over: it has one turn")
        self._state.step_count += 1
        share = digit_share(action.message)
        return KeypadObservation(text=f"{round(share * 100)}% of the reply's characters are digits", done=True, reward=share,
                                 metadata={"success": share >= SUCCESS_SHARE})

    @property
    def state(self) -> KeypadState:
        return self._state

    # The Task API (discovery only).
    def list_splits(self) -> list:
        return [SPLIT]

    def list_tasks(self, split: str) -> list:
        if split != SPLIT:
            raise IndexError(split)
        return TASKS

    def num_tasks(self, split: str) -> int:
        return len(self.list_tasks(split))

    def get_task(self, split: str, index: int) -> Any:
        return self.list_tasks(split)[index]


app = create_app(KeypadEnvironment, KeypadAction, KeypadObservation, env_name="keypad",
                 max_concurrent_envs=int(os.environ.get("OPENENV_MAX_SESSIONS", "4")), state_cls=KeypadState)
