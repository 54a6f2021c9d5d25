"""A Dagster Pipes client that runs a command as a SLURM batch job.

Chosen over ``dagster-slurm`` (alpha, Pipes over SSH to a login node, its own environment
packaging): a fit here is one command on a filesystem that the Dagster process and the
compute nodes share (the run directory), so the client needs only ``sbatch``, ``scontrol``
and ``scancel`` on the machine Dagster runs on (a login node, or any host of the cluster):

- the Pipes context travels in the job's environment (``sbatch --export=ALL``);
- the fit writes its Pipes messages to a file in the run directory
  (:class:`sphr_dagster.pipes_files.DrainingFileMessageReader`), which the client reads
  while the job runs and to its end after;
- the job is polled with ``scontrol show job`` until it ends; a job that does not end
  COMPLETED fails the fit with its state, exit code and log; a Dagster interruption cancels
  the job (``scancel``).

``SLURM_CONF`` (the cluster's config) and the partition come from the environment and the
``fit_engine`` resource; ``scripts/slurm_local.sh`` starts a one-node cluster for the tests.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.pipes.client import PipesClientCompletedInvocation

from sphr_dagster.pipes_files import DrainingFileMessageReader

#: SLURM job states after which a job never runs again
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"}


def job_fields(job_id: str) -> dict[str, str] | None:
    """``scontrol show job``'s fields of a job (None once the controller has forgotten it)."""
    done = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                          text=True)
    if done.returncode != 0:
        return None
    return dict(part.split("=", 1) for part in done.stdout.split() if "=" in part)


class PipesSlurmClient(dg.PipesClient):
    """Runs ``command`` with ``sbatch``, the Pipes context in its environment."""

    def __init__(self, *, partition: str = "", cpus: int = 1, gpus: int = 0,
                 poll_s: float = 1.0, env: dict[str, str] | None = None):
        self.partition, self.cpus, self.gpus = partition, max(1, int(cpus)), int(gpus)
        self.poll_s, self.env = poll_s, dict(env or {})

    def sbatch_command(self, command: list[str], job_name: str, log: Path) -> list[str]:
        args = ["sbatch", "--parsable", f"--job-name={job_name}",
                f"--cpus-per-task={self.cpus}", f"--output={log}", "--export=ALL",
                f"--chdir={os.getcwd()}"]
        if self.partition:
            args.append(f"--partition={self.partition}")
        if self.gpus:
            args.append(f"--gres=gpu:{self.gpus}")
        return [*args, f"--wrap={shlex.join(command)}"]

    def run(self, *, context: dg.AssetExecutionContext, command: list[str],  # type: ignore[override]
            extras: dict[str, Any] | None = None, job_name: str = "sphr-fit",
            log_dir: str | os.PathLike | None = None) -> PipesClientCompletedInvocation:
        logs = Path(log_dir or Path.cwd() / "logs" / "fits")
        logs.mkdir(parents=True, exist_ok=True)
        tag = f"{job_name}-{uuid.uuid4().hex[:8]}"
        messages = logs / f"{tag}.pipes.jsonl"
        with dg.open_pipes_session(context=context, extras=extras,
                                   context_injector=dg.PipesEnvContextInjector(),
                                   message_reader=DrainingFileMessageReader(str(messages))
                                   ) as session:
            env = {**os.environ, **self.env, **session.get_bootstrap_env_vars()}
            log = logs / f"{tag}.out"
            submitted = subprocess.run(self.sbatch_command(command, job_name, log), env=env,
                                       capture_output=True, text=True)
            if submitted.returncode != 0:
                raise RuntimeError(f"sbatch refused {job_name}: {submitted.stderr.strip()}")
            job_id = submitted.stdout.strip().split(";")[0]
            context.log.info(f"[slurm] {job_name}: job {job_id}, log {log}")
            try:
                state, exit_code = self._wait(job_id)
            except DagsterExecutionInterruptedError:
                subprocess.run(["scancel", job_id], check=False)
                context.log.warning(f"[slurm] interrupted: job {job_id} cancelled")
                raise
            if state != "COMPLETED":
                raise RuntimeError(f"SLURM job {job_id} ({job_name}) ended {state}, exit code "
                                   f"{exit_code}; log {log}")
            return PipesClientCompletedInvocation(session, metadata={"SLURM job ID": job_id})

    def _wait(self, job_id: str) -> tuple[str, str]:
        while True:
            fields = job_fields(job_id)
            if fields is None:
                # forgotten (MinJobAge passed) before a poll saw it end: its end is unknown
                return "UNKNOWN", "?"
            state = fields.get("JobState", "UNKNOWN")
            if state in FINISHED:
                return state, fields.get("ExitCode", "?")
            time.sleep(self.poll_s)
