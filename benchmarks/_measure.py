"""Run one command in its own process and report its wall seconds and peak memory.

The peak is ``VmHWM`` from ``/proc/self/status`` at the end of that process, so it is the
measured process's own high-water mark: a child's ``ru_maxrss`` would inherit the parent's
peak when it was forked from a large parent. Shared by ``benchmarks/ingest.py`` and
``benchmarks/ukb_scale.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

# Runs a module (-m NAME) or a script (-p PATH) in this process, then records the process's
# peak resident memory (VmHWM) and how much any child process used (RUSAGE_CHILDREN).
MEASURE = """
import json, resource, runpy, sys
peak_file, kind, target, *args = sys.argv[1:]
sys.argv = [target, *args]
code = 0
try:
    if kind == "-m":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
with open(peak_file, "w") as fh:
    json.dump({"vmhwm_kb": int(status["VmHWM"].split()[0]),
               "children_maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}, fh)
sys.exit(code)
"""


def measure(cmd: list[str], python: str, peak_file: Path, env: dict[str, str],
            log: Path | None = None, children: dict[str, float] | None = None
            ) -> tuple[float, float]:
    """Run ``python MEASURE cmd...`` (``cmd`` starts with ``-m MODULE`` or ``-p SCRIPT``);
    its wall seconds and peak MiB (VmHWM). Output goes to ``log`` when given; the largest
    child process's peak MiB (``ru_maxrss``, e.g. joblib workers) goes to
    ``children["peak_mb"]`` when a dict is given."""
    peak_file.unlink(missing_ok=True)
    t = time.perf_counter()
    if log is None:
        done = subprocess.run([python, "-c", MEASURE, str(peak_file), *cmd], env=env,
                              capture_output=True, text=True)
        output = done.stdout[-4000:] + done.stderr[-4000:]
    else:
        with open(log, "w") as fh:
            done = subprocess.run([python, "-c", MEASURE, str(peak_file), *cmd], env=env,
                                  stdout=fh, stderr=subprocess.STDOUT, text=True)
        output = log.read_text()[-8000:]
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        sys.stderr.write(output)
        raise SystemExit(f"{' '.join(cmd[:4])} failed (exit {done.returncode})")
    peak = json.loads(peak_file.read_text())
    if children is not None:
        children["peak_mb"] = peak["children_maxrss_kb"] / 1024
    if peak["children_maxrss_kb"]:
        # a forked child's ru_maxrss counts the parent's pages it shares: shown, not added
        print(f"  {Path(cmd[1]).name}: a child process peaked at "
              f"{peak['children_maxrss_kb'] / 1024:.0f} MiB (not added)", file=sys.stderr)
    return seconds, peak["vmhwm_kb"] / 1024
