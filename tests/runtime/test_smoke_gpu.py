"""GPU paths of the gate: CUDA device checks and NCCL, on whatever GPUs this machine has.

Skipped with the reason when CUDA is not available (CI has no GPU). When it runs, the figures
(matmul TFLOP/s, memory GB/s, NCCL init, total gate time) are printed for docs/smoke-gate.md:
``pytest -s tests/runtime/test_smoke_gpu.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from gatejobs import example_plan, run_gates
from hyperframe.constants import SmokeExit
from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.cuda_checks import CudaProbe

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]


def _one_node(gpus: int) -> Any:
    def edit(job: dict[str, Any], runtime: dict[str, Any]) -> None:
        runtime["spec"]["pod"]["env"] = []  # the example's NCCL_SOCKET_IFNAME=eth0 is for its cluster
        runtime["spec"]["smoke"].update({"ncclMessageSizes": ["1Mi", "64Mi"], "minBusBandwidthGBps": 0})
        job["spec"].update({"nodes": 1, "gpusPerNode": gpus})
        job["spec"]["parallelism"] = {"pipeline": 1, "data": gpus}

    return edit


def _all_local_gpus(**fields: Any) -> GateConfig:
    return GateConfig(
        master_addr="127.0.0.1",
        master_port=29500,
        nnodes=1,
        node_rank=0,
        nproc_per_node=torch.cuda.device_count(),
        device="cuda",
        device_checks=frozenset({"visible", "memory", "matmul", "p2p"}),
        **fields,
    )


def test_cuda_probe_measures_device_0() -> None:
    config = _all_local_gpus()
    outcome = CudaProbe().check(0, config)
    assert outcome.failure is None, outcome.failure
    figures = outcome.figures
    assert figures.ok and figures.name
    assert figures.tflops is not None and figures.tflops > 1
    assert figures.mem_bw_gbps is not None and figures.mem_bw_gbps > 10
    print(
        f"\nGPU 0 {figures.name}: bf16 matmul {figures.tflops:.1f} TFLOP/s, copy {figures.mem_bw_gbps:.0f} GB/s; {outcome.notes}"
    )


def test_cuda_probe_names_an_invisible_device() -> None:
    count = torch.cuda.device_count()
    config = GateConfig(
        master_addr="127.0.0.1",
        master_port=29500,
        nnodes=1,
        node_rank=0,
        nproc_per_node=count + 1,
        device="cuda",
    )
    outcome = CudaProbe().check(count, config)
    assert outcome.failure is not None and outcome.failure.reason_id == "device.count"
    assert (
        f"GPU {count}: not visible, {count} of {count + 1} requested GPUs visible" in outcome.failure.message
    )


@pytest.mark.parametrize(
    ("minimum", "reason_id", "fragment"),
    [
        ({"min_tflops": 1e5}, "device.matmul", "TFLOP/s < minimum 1e+05 (minMatmulTFLOPS)"),
        ({"min_mem_bw_gbps": 1e6}, "device.bandwidth", "GB/s < minimum 1e+06 (minMemoryBandwidthGBps)"),
    ],
)
def test_cuda_probe_fails_below_the_runtimes_minimums(
    minimum: dict[str, float], reason_id: str, fragment: str
) -> None:
    outcome = CudaProbe().check(0, _all_local_gpus(**minimum))
    assert outcome.failure is not None and outcome.failure.reason_id == reason_id
    assert fragment in outcome.failure.message


def test_gate_passes_on_all_local_gpus_with_nccl(tmp_path: Path) -> None:
    gpus = torch.cuda.device_count()
    started = time.monotonic()
    runs = run_gates(tmp_path, example_plan("gpu-pipeline", _one_node(gpus)), timeout_s=300)
    wall = time.monotonic() - started
    run = runs[0]
    assert run.exit_code == SmokeExit.PASS, run.stdout
    assert len(run.report.devices) == gpus and all(d.tflops and d.mem_bw_gbps for d in run.report.devices)
    print(
        f"\n{run.stdout}\ngate wall time {wall:.1f}s ({gpus} GPU(s)), gate duration {run.report.duration_s:.1f}s"
    )
