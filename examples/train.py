#!/usr/bin/env python3
"""A toy training loop that follows capblock's checkpoint contract.

It trains nothing: it counts steps, EPOCHS × STEPS_PER_EPOCH of them, each
taking STEP_SECONDS, and prints a made-up loss. What it shows is how a job
survives the end of a plan segment, a restart or a node failure:

- At start every rank resumes from the newest checkpoint in
  $CAPBLOCK_CHECKPOINT_DIR (./checkpoints when run by hand), or starts
  from step 0 when there is none.
- Rank 0 alone writes checkpoints, every CHECKPOINT_EVERY steps, once more
  when the segment's end ($CAPBLOCK_SEGMENT_END_MS) is SAVE_MARGIN_MINUTES
  away, on SIGTERM and when done. The ranks of data-parallel training hold
  the same state, so one writer is enough, and no two processes ever
  rename onto the same file. Ranks that hold different state (sharded
  optimizers) would each write a directory of their own, rank-$RANK/.
- A checkpoint is written to a temporary name, flushed to disk and renamed,
  so a kill never leaves half a file; the newest KEEP_CHECKPOINTS are kept.
- On SIGTERM it finishes the step in hand, saves, and exits 0.
- When the work is done it saves and exits 0.

Run it by hand with:  EPOCHS=1 python3 examples/train.py
"""

import json
import os
import signal
import sys
import time


def env_int(name, default):
    return int(os.environ.get(name, default))


def env_float(name, default):
    return float(os.environ.get(name, default))


EPOCHS = env_int("EPOCHS", 3)
STEPS_PER_EPOCH = env_int("STEPS_PER_EPOCH", 20)
STEP_SECONDS = env_float("STEP_SECONDS", 0.25)
CHECKPOINT_EVERY = env_int("CHECKPOINT_EVERY", 10)
SAVE_MARGIN_MINUTES = env_float("SAVE_MARGIN_MINUTES", 35)
KEEP_CHECKPOINTS = 3

RANK = env_int("RANK", 0)
WORLD_SIZE = env_int("WORLD_SIZE", 1)
CHECKPOINT_DIR = os.environ.get("CAPBLOCK_CHECKPOINT_DIR", "checkpoints")
SEGMENT_END_MS = env_int("CAPBLOCK_SEGMENT_END_MS", 0)

PREFIX = "step-"
SUFFIX = ".json"


def log(message):
    print(f"rank {RANK}: {message}", flush=True)


def checkpoint_path(step):
    return os.path.join(CHECKPOINT_DIR, f"{PREFIX}{step:08d}{SUFFIX}")


def checkpoint_steps():
    """The steps of the checkpoints on disk, newest first."""
    steps = []
    for name in os.listdir(CHECKPOINT_DIR):
        number = name[len(PREFIX):-len(SUFFIX)]
        if name.startswith(PREFIX) and name.endswith(SUFFIX) and number.isdigit():
            steps.append(int(number))
    return sorted(steps, reverse=True)


def load_newest():
    """The newest checkpoint that reads back whole, or None.

    Rank 0 may be removing an old checkpoint while another rank reads, so a
    file that is gone or unreadable is skipped for the next newest.
    """
    for step in checkpoint_steps():
        try:
            with open(checkpoint_path(step)) as f:
                return json.load(f)
        except (OSError, ValueError):
            continue
    return None


def save(state):
    """Writes state as the newest checkpoint (rank 0 only) and prunes old ones."""
    if RANK != 0:
        return
    path = checkpoint_path(state["step"])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    for step in checkpoint_steps()[KEEP_CHECKPOINTS:]:
        try:
            os.remove(checkpoint_path(step))
        except FileNotFoundError:
            pass
    log(f"saved step {state['step']}")


def near_segment_end():
    if SEGMENT_END_MS == 0:
        return False
    return time.time() * 1000 >= SEGMENT_END_MS - SAVE_MARGIN_MINUTES * 60 * 1000


def main():
    os.makedirs(CHECKPOINT_DIR, exist_ok=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))

    total = EPOCHS * STEPS_PER_EPOCH
    state = load_newest() or {"step": 0, "loss": 1.0}
    if state["step"] > 0:
        log(f"resuming from step {state['step']} of {total}")
    else:
        log(f"starting from scratch: {total} steps")
    log(f"world size {WORLD_SIZE}, segment ends {os.environ.get('CAPBLOCK_SEGMENT_END', 'never')}, "
        f"restart {os.environ.get('CAPBLOCK_RESTART_COUNT', '0')}")

    saved_step = state["step"]
    saved_for_end = False
    while state["step"] < total:
        if stopping:
            if saved_step != state["step"]:
                save(state)
            log(f"SIGTERM: stopped at step {state['step']}")
            return 0
        time.sleep(STEP_SECONDS)  # the work of one step
        step = state["step"] + 1
        state = {"step": step, "loss": round(1.0 / (1.0 + 0.1 * step), 4)}
        epoch = (step - 1) // STEPS_PER_EPOCH + 1
        log(f"epoch {epoch} step {step}/{total} loss {state['loss']}")
        due = step % CHECKPOINT_EVERY == 0
        if not due and not saved_for_end and near_segment_end():
            due = saved_for_end = True  # once: the last save before the segment ends
        if due:
            save(state)
            saved_step = step
    if saved_step != state["step"]:
        save(state)
    log(f"done: {total} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
