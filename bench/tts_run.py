"""One `cake tts` run in a speech bench, timed by the lines it prints.

`cake tts` prints "loaded … in X s" once the model is ready, "frame 1: …
after X s" when the first frame's audio is handed on (0.5 s or more after
it started speaking), "playing from X s …" under `--play`, and "wrote … (A s
of audio, N frames, End) in X s" at the end. `run_tts` notes when each line
arrived, so that a bench times from the model being ready to the file being
written, whatever the loading cost.
"""

import re
import subprocess
import time

LOADED = re.compile(r"^loaded .* in ([0-9.]+) s$")
FIRST_FRAME = re.compile(r"^frame 1: .* after ([0-9.]+) s")
PLAYING = re.compile(r"^playing from ([0-9.]+) s")
WROTE = re.compile(r"^wrote .* \(([0-9.]+) s of audio, (\d+) frames, (\w+)\) in ([0-9.]+) s$")


def run_tts(cmd, env):
    """Runs `cmd` (a `cake tts` command line) with `env` and returns, by
    perf_counter: `start`, `loaded`, `first_frame` (None when not printed),
    `wrote`, `ended` (the process gone); as printed: `load_s`, `first_frame_s`, `playing_s` (None when
    absent), `audio_s`, `frames`, `end`, `generation_s`. A failed run raises
    with its last lines."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, bufsize=1)
    run = {"start": start, "loaded": None, "first_frame": None, "wrote": None, "first_frame_s": None,
           "playing_s": None}
    lines = []
    for line in proc.stderr:
        now = time.perf_counter()
        line = line.rstrip("\n")
        lines.append(line)
        if (m := LOADED.match(line)) and run["loaded"] is None:
            run.update(loaded=now, load_s=float(m.group(1)))
        elif m := FIRST_FRAME.match(line):
            run.update(first_frame=now, first_frame_s=float(m.group(1)))
        elif m := PLAYING.match(line):
            run["playing_s"] = float(m.group(1))
        elif m := WROTE.match(line):
            run.update(wrote=now, audio_s=float(m.group(1)), frames=int(m.group(2)), end=m.group(3),
                       generation_s=float(m.group(4)))
    code = proc.wait()
    run["ended"] = time.perf_counter()
    if code != 0 or run["loaded"] is None or run["wrote"] is None:
        raise RuntimeError(f"cake tts failed (exit {code}):\n" + "\n".join(lines[-20:]))
    return run
