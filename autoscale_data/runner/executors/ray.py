"""Ray: one actor per slot, each holding its run's CPUs/GPUs; a run is one call on a free actor.

Each actor reserves ``executor.ray``'s CPUs and GPUs, and trains as a local slot does (see "Executors"
in docs/runner.md). The actors belong to the runner: when it ends or dies, Ray removes them and their
processes, and the next runner resubmits unfinished runs (they resume from their checkpoints).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Any

from ..._runner_names import RAY
from ...solver.vocabulary import AUTO
from .. import layout
from ..config import RunnerConfig
from .base import Executor, Job, launch_command, set_pdeathsig, uses_cuda, worker_env

__all__ = ["RayExecutor", "SlotActor"]


class SlotActor:
    """What one Ray actor does (wrapped by ``ray.remote`` at run time): train runs, one at a time."""

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.worker: subprocess.Popen[str] | None = None

    def train(self, job_file: str) -> int:
        """Train ``job_file``'s run; its exit code (0 done, 3 diverged, other: died)."""
        config = self.config
        if config.backend == "torch" and config.procs == 1:
            if self.worker is None or self.worker.poll() is not None:
                cmd = [sys.executable, "-m", "autoscale_data.runner.executors.worker", "--family",
                       config.model.family]
                self.worker = subprocess.Popen(cmd, env=worker_env(config), stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                               preexec_fn=set_pdeathsig)
            assert self.worker.stdin is not None and self.worker.stdout is not None
            self.worker.stdin.write(job_file + "\n")
            self.worker.stdin.flush()
            line = self.worker.stdout.readline()
            if line.startswith("exit "):
                return int(line.split()[1])
            code = self.worker.wait()
            return code if code != 0 else 1
        gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()] or None
        ds = config.backend == "deepspeed" and config.deepspeed.launcher == "deepspeed" and config.procs > 1
        cmd = launch_command(config, job_file, gpus=gpus if ds else None)
        # the deepspeed launcher gets them as --include
        env = worker_env(config, launcher_gpus=bool(ds and gpus))
        with open(os.path.join(os.path.dirname(job_file), layout.TRAIN_LOG), "ab") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            return subprocess.run(cmd, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                  preexec_fn=set_pdeathsig).returncode

    def stop(self) -> None:
        """End the worker (it leaves at the end of its input)."""
        if self.worker is not None and self.worker.stdin is not None:
            self.worker.stdin.close()
            try:
                self.worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.worker.send_signal(signal.SIGKILL)


class RayExecutor(Executor):
    """Runs on a Ray cluster, ``capacity`` at once, each on an actor with its own resources."""

    kind = RAY

    def __init__(self, config: RunnerConfig) -> None:
        from ..._extras import require

        require(RAY, f"executor.kind {RAY!r}")
        import ray

        r = config.executor.ray
        self.config = config
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            ray.init(address=r.address, ignore_reinit_error=True, include_dashboard=False,
                     log_to_driver=False,
                     logging_level="warning")
        mp = config.executor.max_parallel
        cpus = r.num_cpus if r.num_cpus is not None else float((config.cpu_threads or 1) * config.procs)
        gpus = r.num_gpus if r.num_gpus is not None else (float(config.procs) if uses_cuda(config) else 0.0)
        if mp == AUTO:
            total = ray.cluster_resources()
            fits = [int(total.get("CPU", 1) // cpus) if cpus else 10**6,
                    int(total.get("GPU", 0) // gpus) if gpus else 10**6]
            mp = max(1, min(fits))
        self.capacity = int(mp)
        self._actor_class = ray.remote(SlotActor).options(num_cpus=cpus, num_gpus=gpus, max_restarts=0)
        self._actors: list[Any] = [None] * self.capacity
        self._inflight: dict[int, Any] = {}  # slot -> the ObjectRef of its run

    def submit(self, job: Job) -> None:
        slot = next(i for i in range(self.capacity) if i not in self._inflight)
        if self._actors[slot] is None:
            self._actors[slot] = self._actor_class.remote(self.config)
        ref = self._actors[slot].train.remote(os.fspath(job.job_file))
        self._inflight[slot] = ref
        job.handle, job.job_id = (slot, ref), ref.hex()

    def poll(self, job: Job) -> int | None:
        import ray

        slot, ref = job.handle
        ready, _ = ray.wait([ref], timeout=0)
        if not ready:
            return None
        self._inflight.pop(slot, None)
        try:
            return int(ray.get(ref))
        except Exception as exc:  # noqa: BLE001 - the actor died (node lost, killed): a new one next time
            self._actors[slot] = None
            job.error = f"ray task {job.job_id} failed: {type(exc).__name__}: {str(exc).strip()[-500:]}"
            return 1

    def cancel(self, job: Job) -> None:
        import ray

        if job.handle is None:
            return
        slot, _ = job.handle
        if self._actors[slot] is not None:
            ray.kill(self._actors[slot])  # its worker and launcher die with it (PR_SET_PDEATHSIG)
            self._actors[slot] = None
        self._inflight.pop(slot, None)

    def wait(self, timeout: float) -> None:
        import ray

        if self._inflight:
            ray.wait(list(self._inflight.values()), num_returns=1, timeout=timeout)

    def close(self) -> None:
        import ray

        for actor in self._actors:
            if actor is not None:
                with contextlib.suppress(Exception):  # it may be gone already
                    ray.get(actor.stop.remote(), timeout=60)
                ray.kill(actor)
        self._actors = [None] * self.capacity
        if self._started_ray:
            ray.shutdown()
