"""Where the pipeline's fits run: one Pipes entry point, the engine a resource.

Every fit the pipeline runs many of (each sex's SPHR model, the cross-fit's fold models) is
``python -m sphr.train.pipes_entry ...`` on the shared run directory, launched through
Dagster Pipes by the engine the ``fit_engine`` resource names:

- ``local``: in the step's own process (the default: no interpreter to start per fit), or
  with ``local_process="subprocess"`` a process per fit (``dg.PipesSubprocessClient``, its
  messages read to the file's end: :mod:`sphr_dagster.pipes_files`);
- ``ray``: a Ray job on a Ray cluster (``dagster_ray.PipesRayJobClient``, the job
  submission API; ``pip install -e '.[ray]'``), CPUs and fractional GPUs per fit;
- ``slurm``: a batch job submitted with ``sbatch`` (:class:`sphr_dagster.slurm.PipesSlurmClient`);
- ``k8s``: a pod on a Kubernetes GPU node (:mod:`sphr_dagster.k8s`, mock-verified only).

A step's fits are launched together; the cluster's scheduler decides how many run at once
(``local``: ``max_parallel``). A fit that is lost (its process killed, its job cancelled or
failed) fails the step only after the others have finished, naming every lost fit; the
fits that finished are on disk, and since a fit already in place with the same config and
data is kept (:func:`sphr.train.run.completed_fit`), Dagster's "re-execute from failure"
trains only the lost ones. docs/SCALE_OUT.md is the guide.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from sphr.settings.stages import FIT_ENGINES
from sphr_dagster import metadata as md
from sphr_dagster.pipes_files import DrainingTempFileMessageReader

#: the engines a fit can run on (the ``fit_engine`` resource's ``engine``)
ENGINES = FIT_ENGINES
#: the engines that schedule fits on a cluster (one CPU per fit unless asked otherwise)
CLUSTERS = ("ray", "slurm", "k8s")
#: where the local engine trains a fit: the step's process, or one of its own
LOCAL_PROCESSES = ("step", "subprocess")


@dataclass(frozen=True)
class Fit:
    """One fit: its name in every message about it (``female/fold2``), the entry point's
    arguments, the Pipes extras it reads (the TrainConfig) and the folder for its job log."""

    name: str
    args: tuple[str, ...]
    extras: Mapping[str, Any] = field(default_factory=dict)
    log_dir: str | None = None

    @property
    def slug(self) -> str:
        """The name as a job name or file name can hold it."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", self.name)


class LostFits(dg.Failure):
    """Fits of a step that did not finish; the others did and are kept for the re-run."""


class FitEngine(dg.ConfigurableResource):
    """Where the fits of a step run (see the module's text): ``local``, ``ray``, ``slurm``
    or ``k8s``, and what each fit asks of it."""

    engine: str = "local"
    #: CPUs a fit asks for, and its torch threads; 0: one on a cluster, locally the step's own
    cpus_per_fit: float = 0.0
    #: GPUs a fit asks for: a fraction on Ray (0.2: five fits share one GPU), whole on SLURM
    gpus_per_fit: float = 0.0
    #: local engine: how many of a step's fits run at once (a cluster decides for itself)
    max_parallel: int = 1
    #: local engine: ``step`` trains in the step's own process (no interpreter and imports to
    #: start per fit: seconds each), ``subprocess`` in a process of its own per fit through
    #: Pipes, as a cluster's fits run (its memory freed when it ends)
    local_process: str = "step"
    #: the Ray cluster's dashboard address (http://host:8265); empty: RAY_ADDRESS, else local
    ray_address: str = ""
    #: the SLURM partition; empty: the cluster's default
    slurm_partition: str = ""
    #: the interpreter the fits run with; empty: this one (a cluster with the same install)
    python: str = ""
    #: seconds between a cluster's status polls
    poll_s: float = 1.0

    def where(self) -> dict[str, str]:
        """Where the fits ran, for a materialization's metadata."""
        if self.engine == "local":
            return {"engine": "local", "process": self.local_process}
        return {"engine": self.engine}

    def command(self, fit: Fit) -> list[str]:
        return [self.python or sys.executable, "-m", "sphr.train.pipes_entry", *fit.args]

    def fit_env(self) -> dict[str, str]:
        """What every fit's process gets: its threads (a cluster's CPUs per fit), no bars."""
        env = {"SPHR_PROGRESS": "0"}
        cpus = self.cpus_per_fit or (1 if self.engine in CLUSTERS else 0)
        if cpus:
            threads = str(max(1, math.ceil(cpus)))
            env.update(SPHR_FIT_THREADS=threads, OMP_NUM_THREADS=threads)
        return env

    def run_fits(self, context: dg.AssetExecutionContext, fits: Sequence[Fit]
                 ) -> dict[str, dict[str, Any]]:
        """Run ``fits`` on the engine; each fit's reported metadata by name. Raises
        :class:`LostFits` naming the fits that did not finish, once the others have."""
        if self.engine not in ENGINES:
            raise dg.Failure(f"fit_engine: engine {self.engine!r}; choose from "
                             f"{', '.join(ENGINES)}")
        if self.local_process not in LOCAL_PROCESSES:
            raise dg.Failure(f"fit_engine: local_process {self.local_process!r}; choose from "
                             f"{', '.join(LOCAL_PROCESSES)}")
        if not fits:
            return {}
        workers = len(fits) if self.engine in CLUSTERS else max(1, self.max_parallel)
        context.log.info(f"{len(fits)} fit(s) on {self.engine}: "
                         + ", ".join(f.name for f in fits))
        def outcome(fit: Fit) -> tuple[str, dict[str, Any] | None, str | None]:
            try:
                return fit.name, self.run_fit(context, fit), None
            except Exception as exc:  # lost; an interruption (BaseException) goes on up
                text = str(exc).strip()
                return fit.name, None, (f"{type(exc).__name__}: {text.splitlines()[0]}"
                                        if text else type(exc).__name__)

        if min(workers, len(fits)) == 1:  # in this thread: an interruption stops the fit
            outcomes = [outcome(f) for f in fits]
        else:
            with ThreadPoolExecutor(min(workers, len(fits))) as pool:
                outcomes = list(pool.map(outcome, fits))
        done = {name: meta for name, meta, why in outcomes if why is None}
        lost = {name: why for name, _, why in outcomes if why is not None}
        if lost:
            raise LostFits(
                description=f"{len(lost)} of {len(fits)} fits lost on {self.engine}: "
                + "; ".join(f"{n} ({why})" for n, why in lost.items())
                + ". The others finished and are kept: re-execute from failure runs only "
                "the lost ones.",
                metadata={"lost_fits": ", ".join(lost), "finished_fits": ", ".join(done)
                          or "none", "engine": self.engine})
        return done

    def run_fit(self, context: dg.AssetExecutionContext, fit: Fit) -> dict[str, Any]:
        """One fit through Dagster Pipes on the engine; the metadata it reported, with when
        it was submitted and when it started (``fit_submitted_at``, ``fit_started_at``)."""
        submitted = time.time()
        if self.engine == "local" and self.local_process == "step":
            return {**md.from_pipes(self._in_step(context, fit)), "fit_submitted_at": submitted,
                    "fit_started_at": submitted}
        invocation = self._launch(context, fit)
        for message in invocation.get_custom_messages():
            if isinstance(message, dict) and message.get("fit") == fit.name:
                return {**md.from_pipes(message.get("metadata") or {}),
                        "fit_submitted_at": submitted}
        raise RuntimeError(f"fit {fit.name} finished without reporting (no Pipes message)")

    def _in_step(self, context: dg.AssetExecutionContext, fit: Fit) -> dict[str, Any]:
        """The fit in this process: the entry point's own body (``pipes_entry.run_fit``) on
        its arguments and TrainConfig, with the threads a fit process would get."""
        import torch

        from sphr.train.config import TrainConfig
        from sphr.train.pipes_entry import CONFIG_EXTRA, parser, run_fit

        args = parser().parse_args(list(fit.args))
        settings = TrainConfig.from_dict(fit.extras[CONFIG_EXTRA])
        context.log.info(f"fit {fit.name}: {args.cohort_dir} -> {args.out_dir} (in the step)")
        threads, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
        try:
            # the trainer takes its threads from OMP_NUM_THREADS, as a fit process does
            os.environ.update({k: v for k, v in self.fit_env().items() if k != "SPHR_PROGRESS"})
            return run_fit(args, settings)
        finally:
            torch.set_num_threads(threads)
            if omp is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = omp

    def _launch(self, context: dg.AssetExecutionContext, fit: Fit):
        command, env = self.command(fit), self.fit_env()
        if self.engine == "local":
            return dg.PipesSubprocessClient(
                env=env, message_reader=DrainingTempFileMessageReader()).run(
                context=context, command=command, extras=dict(fit.extras))
        if self.engine == "ray":
            return self._ray(context, fit, command, env)
        if self.engine == "slurm":
            from sphr_dagster.slurm import PipesSlurmClient

            cpus = self.cpus_per_fit or 1
            return PipesSlurmClient(partition=self.slurm_partition, cpus=math.ceil(cpus),
                                    gpus=math.ceil(self.gpus_per_fit), poll_s=self.poll_s,
                                    env=env).run(context=context, command=command,
                                                 extras=dict(fit.extras), job_name=fit.slug,
                                                 log_dir=fit.log_dir)
        from sphr_dagster.k8s_client import gpu_training_client

        return gpu_training_client().run(context=context, command=command,
                                         extras=dict(fit.extras), env=env)

    def _ray(self, context: dg.AssetExecutionContext, fit: Fit, command: list[str],
             env: dict[str, str]):
        try:
            from dagster_ray import PipesRayJobClient
        except ImportError as exc:
            raise RuntimeError("engine ray needs the ray extra: pip install -e '.[ray]'") from exc
        address = self.ray_address or os.environ.get("RAY_ADDRESS") or "http://127.0.0.1:8265"
        params = {"entrypoint": shlex.join(command),
                  "entrypoint_num_cpus": self.cpus_per_fit or 1,
                  "runtime_env": {"env_vars": env},
                  # unique per launch: a re-run's job is a new job beside the lost one
                  "submission_id": f"sphr-{fit.slug}-{uuid.uuid4().hex[:8]}"}
        if self.gpus_per_fit:
            params["entrypoint_num_gpus"] = self.gpus_per_fit
        return PipesRayJobClient(address=address, poll_interval=self.poll_s).run(
            context=context, submit_job_params=params, extras=dict(fit.extras))


def fit_log_dir(run: str | os.PathLike) -> Path:
    """Where a cluster's job logs go: ``RUN/logs/fits/`` (the shared run directory)."""
    return Path(run) / "logs" / "fits"
