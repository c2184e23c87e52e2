"""``hyperframe-launch``: the main container's command.

It reads the resolved job config and the env (the same checks as the gate), maps the job onto
the trainer's :class:`~hyperframe_runtime.config.TrainConfig`, and runs this node's ranks through
torchrun (or, for ``entrypoint.script``, the job's own script with its args, under the same torchrun) (``torch.distributed.run``) with the job's static rendezvous: MASTER_ADDR/MASTER_PORT,
nnodes, node_rank and nproc_per_node. torchrun forwards SIGTERM/SIGINT to the ranks and gives
them ``--shutdown-timeout`` seconds to stop (the pod's terminationGracePeriodSeconds less
:data:`GRACE_MARGIN_S` for torchrun and this launcher to report) before SIGKILL; torchrun never
restarts ranks itself (``--max-restarts 0``) because NCCL groups cannot re-join one rank at a
time: the operator restarts the whole gang. The exit code is a
``hyperframe.constants.TrainExit``: a SIGTERM, or ranks that all exited ``PREEMPTED``, make
``PREEMPTED`` (the ranks stop at a frame boundary after that frame's snapshot); otherwise the
first failed rank's code. The outcome goes to the termination message as compact JSON, with the
trainer's last progress update (``progress``: what global rank 0 last kept in the file named by
``HYPERFRAME_PROGRESS_FILE``, which the launcher sets for its ranks), so the operator can put the
final figures into a finished job's status even when the last post never arrived. The message
always stays valid JSON within the kubelet's 4096-byte limit: the free-text reason is cut first.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.constants import TERMINATION_MESSAGE_MAX_BYTES, TERMINATION_MESSAGE_PATH, TrainExit

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.jobenv import DEFAULT_CONFIG_PATH, JobEnv, JobEnvError, load_job
from hyperframe_runtime.progress import PROGRESS_FILE_ENV, read_latest

__all__ = [
    "GRACE_MARGIN_S",
    "LaunchResult",
    "exit_code_of",
    "job_id",
    "main",
    "program_args",
    "run_torchrun",
    "torchrun_args",
    "train_config",
]

TRAIN_MODULE: Final = "hyperframe_runtime.train"
EXIT_CONFIG: Final = TrainExit.CONFIG
GRACE_MARGIN_S: Final = 5
"""Seconds of the pod's grace period kept for torchrun's SIGKILL of late ranks and this
launcher's termination message; the ranks get the rest."""
_REASON_MAX: Final = 3000


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchResult:
    """The main container's final word, written to its termination message."""

    ok: bool
    exit_code: int
    reason: str = ""
    failed_ranks: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    progress: dict[str, int | float] | None = None
    """The trainer's last progress update (``status.progress`` wire names); None when it kept none."""

    def to_termination_message(self, max_bytes: int = TERMINATION_MESSAGE_MAX_BYTES) -> str:
        """Compact JSON of at most ``max_bytes`` UTF-8 bytes; the reason is shortened to fit, so
        the figures and the verdict always arrive whole."""
        data = asdict(self)
        data["duration_s"] = round(self.duration_s, 2)
        data["failed_ranks"] = self.failed_ranks[:64]
        if self.progress is None:
            del data["progress"]
        reason = self.reason[:_REASON_MAX]

        def encoded(cut: int) -> str:
            return json.dumps({**data, "reason": reason[:cut]}, separators=(",", ":"), ensure_ascii=False)

        if len(encoded(len(reason)).encode()) <= max_bytes:
            return encoded(len(reason))
        fits, over = 0, len(reason)  # the longest prefix of the reason that fits: binary search
        while over - fits > 1:
            mid = (fits + over) // 2
            fits, over = (mid, over) if len(encoded(mid).encode()) <= max_bytes else (fits, mid)
        return encoded(fits)


def job_id(job: ResolvedJobConfig) -> str:
    """The job's snapshot folder under the checkpoint path: ``<name>-<uid>``, so that a
    re-created job (same name, new uid) starts afresh; ``<name>-local`` without a uid (local
    mode, ``hyperframe render``), so that a local run resumes its own snapshots."""
    return f"{job.job.name}-{job.job.uid or 'local'}"


def train_config(job: ResolvedJobConfig) -> TrainConfig:
    """The trainer's config for this job; a job the trainer cannot run is a config error."""
    entry = job.entrypoint
    if entry.builtin is not None:
        model: dict[str, object] = {
            "model": "gpt",
            "vocab_size": entry.builtin.vocab_size,
            "seq_len": entry.builtin.seq_len,
            "d_model": entry.builtin.hidden_size,
            "n_heads": entry.builtin.heads,
            "n_layers": entry.builtin.layers,
        }
    elif entry.module is not None:
        model = {
            "model": entry.module.name,
            "model_args": dict(entry.module.args),
            "seq_len": entry.module.seq_len,
        }
    else:
        raise JobEnvError("config.invalid", "entrypoint: neither builtin nor module is set; set one of them")
    frames, parallelism = job.frames, job.parallelism
    if frames is None or parallelism is None:
        raise JobEnvError(
            "config.invalid",
            "frames, parallelism: the runtime's trainer needs both; a script job runs its script",
        )
    checkpoint = frames.checkpoint
    data: dict[str, object] = {}
    if job.data is not None:
        data = {
            "data_shards": job.data.shards or "",
            "data_factory": job.data.factory or "",
            "data_workers": job.data.num_workers,
            "data_prefetch": job.data.prefetch_factor,
        }
    recipe = job.training
    try:
        return TrainConfig.from_dict(
            {
                **model,
                **data,
                "pipeline": parallelism.pipeline,
                "data": parallelism.data,
                "policy": frames.schedule_policy,
                # hyperframe measures every placement the layers allow (0 = auto); the resolved
                # value (the V) is what the operator sized the layer split for.
                "stages_per_rank": 0 if frames.schedule_policy == "hyperframe" else frames.stages_per_rank,
                "microbatches_per_frame": frames.micro_batches_per_frame,
                "micro_batch_size": frames.micro_batch_size,
                "frames": frames.frames,
                "replan_every": frames.replan_every_frames,
                "layer_split": frames.layer_split,
                "checkpoint_dir": checkpoint.path if checkpoint else "",
                "checkpoint_every": checkpoint.every_frames if checkpoint else 0,
                "trace_dir": frames.metrics_dir,
                "checkpoint_keep": checkpoint.keep if checkpoint else 0,
                "job_id": job_id(job) if checkpoint else "",
                "device": "cuda" if job.gpus_per_node > 0 else "cpu",
                "seed": recipe.seed,
                "optimizer": recipe.optimizer,
                "lr": recipe.lr,
                "betas": list(recipe.betas),
                "momentum": recipe.momentum,
                "weight_decay": recipe.weight_decay,
                "lr_schedule": recipe.schedule,
                "warmup_frames": recipe.warmup_frames,
                "min_lr": recipe.min_lr,
                "grad_clip_norm": recipe.grad_clip_norm,
                "activation_checkpointing": recipe.activation_checkpointing,
                "precision": recipe.precision,
                "backend": job.backend,
            }
        )
    except ValueError as exc:
        raise JobEnvError("config.invalid", f"the trainer cannot run this job: {exc}") from None


def program_args(job: ResolvedJobConfig, train_config_path: str) -> list[str]:
    """What torchrun runs on every rank: the runtime's trainer with its config, or the job's own
    script (a file, or a module as with python -m) with the script's args."""
    script = job.entrypoint.script
    if script is None:
        return ["--module", TRAIN_MODULE, "--config", train_config_path]
    if script.module is not None:
        return ["--module", script.module, *script.args]
    return [script.path or "", *script.args]


def torchrun_args(job: ResolvedJobConfig, env: JobEnv, train_config_path: str = "") -> list[str]:
    """torchrun's arguments for this node: static rendezvous at node rank 0, no local restarts,
    then :func:`program_args`."""
    return [
        f"--nnodes={env.nnodes}",
        f"--node-rank={env.node_rank}",
        f"--nproc-per-node={env.nproc_per_node}",
        f"--master-addr={env.master_addr}",
        f"--master-port={env.master_port}",
        f"--rdzv-conf=timeout={job.rendezvous.timeout_seconds}",
        "--max-restarts=0",
        f"--shutdown-timeout={max(1, job.termination_grace_period_seconds - GRACE_MARGIN_S)}",
        *program_args(job, train_config_path),
    ]


def _write(result: LaunchResult, path: str) -> None:
    try:
        Path(path).write_text(result.to_termination_message(), encoding="utf-8")
    except OSError as exc:
        print(
            f"hyperframe-launch: warning: cannot write the result to {path}: {exc.strerror}", file=sys.stderr
        )


def exit_code_of(codes: list[int]) -> int:
    """The container's exit code from the failed ranks' codes (by global rank): ``PREEMPTED`` when
    every one of them is, else the first rank's own exit code (1 when every other rank was killed
    by a signal)."""
    others = [c for c in codes if c != TrainExit.PREEMPTED]
    if codes and not others:
        return int(TrainExit.PREEMPTED)
    # The cause is a rank that exited on its own (code > 0): torchrun stops the others with
    # SIGTERM (code < 0), so a config error (exit 2) on rank 1 must not read as rank 0's signal.
    return next((c for c in others if c > 0), int(TrainExit.FAILED))


def run_torchrun(args: list[str]) -> LaunchResult:
    """Run torchrun in this process with ``args``; its outcome as this container reports it."""
    # Imported here: torch is slow to import and the config checks above must stay quick.
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(args)
    except ChildFailedError as exc:
        failures = sorted(exc.failures.items())  # keyed by global rank
        lines = [
            f"rank {rank} (local {f.local_rank}) exited with code {f.exitcode}: {f.message}"
            for rank, f in failures[:8]
        ]
        return LaunchResult(
            ok=False,
            exit_code=exit_code_of([f.exitcode for _, f in failures]),
            reason="; ".join(lines),
            failed_ranks=[rank for rank, _ in failures],
        )
    except SignalException as exc:
        if exc.sigval == signal.SIGTERM:
            return LaunchResult(
                ok=False,
                exit_code=int(TrainExit.PREEMPTED),
                reason="preempted: stopped by signal SIGTERM; the ranks had the grace period to stop at a frame boundary "
                "and save that frame's snapshot; the job resumes from its newest complete snapshot",
            )
        return LaunchResult(
            ok=False, exit_code=128 + int(exc.sigval), reason=f"stopped by signal {exc.sigval.name}"
        )
    return LaunchResult(ok=True, exit_code=0, reason="all ranks finished")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperframe-launch", description="Run this node's ranks of a HyperFrame job through torchrun."
    )
    parser.add_argument("--config", default=str(DEFAULT_CONFIG_PATH), help="resolved job config (job.json)")
    parser.add_argument(
        "--termination-log", default=TERMINATION_MESSAGE_PATH, help="where to write the result JSON"
    )
    parser.add_argument(
        "--workdir",
        default=os.environ.get("HYPERFRAME_WORKDIR", ""),
        help="where to write the training config (default: a temp dir)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the training config and torchrun arguments, run nothing"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.monotonic()
    try:
        job = load_job(args.config)
        env = JobEnv.from_env(os.environ)
        env.check_against(job)
        config = train_config(job) if job.entrypoint.script is None else None
    except JobEnvError as exc:
        print(f"hyperframe-launch: error: {exc}", file=sys.stderr)
        _write(LaunchResult(ok=False, exit_code=EXIT_CONFIG, reason=str(exc)), args.termination_log)
        return int(EXIT_CONFIG)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="hyperframe-launch-"))
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"train-{job.job.name}-node{env.node_rank}.json"
    if config is not None:
        config_path.write_text(config.to_json(), encoding="utf-8")
    torchrun = torchrun_args(job, env, str(config_path))
    if args.dry_run:
        if config is not None:
            print(config.to_json(), end="")
        print("torchrun " + " ".join(torchrun))
        return 0
    print(f"hyperframe-launch: node {env.node_rank}/{env.nnodes}: torchrun {' '.join(torchrun)}", flush=True)
    progress_file = workdir / f"progress-{job.job.name}-node{env.node_rank}.json"
    progress_file.unlink(missing_ok=True)  # a file of an earlier run on this workdir is not ours
    os.environ[PROGRESS_FILE_ENV] = str(progress_file)  # torchrun's ranks inherit it
    result = run_torchrun(torchrun)
    result = LaunchResult(
        ok=result.ok,
        exit_code=result.exit_code,
        reason=result.reason,
        failed_ranks=result.failed_ranks,
        duration_s=time.monotonic() - started,
        progress=read_latest(progress_file),
    )
    print(
        f"hyperframe-launch: node {env.node_rank}: {'done' if result.ok else 'FAILED'}: {result.reason}",
        flush=True,
    )
    _write(result, args.termination_log)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
