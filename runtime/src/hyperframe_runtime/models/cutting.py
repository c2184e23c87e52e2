"""Cut an ordinary ``nn.Module`` (a :class:`TorchModel`) into pipeline stages: the splitter.

As torchtitan's pipeline split does, a stage is a copy of the whole model that keeps only its
own modules: the blocks of its layer range stay in their container under their original
indices, the modules before the blocks (an embedding) stay on the first stage, those after them
(a norm, a head) on the last, ``shared`` ones everywhere, and every other module becomes
``nn.Identity``. Parameter names are the full model's, so they do not depend on the split and
checkpoints and stage moves key by them.

Nothing here ever holds the whole model. The factory runs under :func:`meta_parameters`, so the
model it returns has its parameters on the meta device (its buffers, such as a rotary table, are
real and small). A stage is copied from it with only its own modules (``copy.deepcopy`` with the
other modules mapped away in the memo), its meta parameters are then allocated on the CPU
(:func:`materialize`) and either initialised (:func:`init_weights`: every submodule, children
first, under a seed of the job seed and its name, so a weight is the same however the model is
split) or read from safetensors files (:func:`load_weights`: only the stage's tensors). With
``activation_checkpointing`` every block is recomputed in the backward (:func:`recompute_blocks`).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import torch
from torch import nn
from torch.nn.modules.module import register_module_parameter_registration_hook
from torch.utils.checkpoint import checkpoint

from hyperframe_runtime.models.spec import ModelLoadError, ModelSpec, TiedWeight
from hyperframe_runtime.models.torch_model import TorchModel

if TYPE_CHECKING:
    from hyperframe_runtime.config import TrainConfig

__all__ = [
    "CutPlan",
    "init_weights",
    "load_weights",
    "materialize",
    "meta_parameters",
    "plan_cuts",
    "recompute_blocks",
    "stage_module",
    "torch_model_spec",
]

_CONTAINERS: Final = (nn.ModuleList, nn.Sequential, nn.ModuleDict)


@contextmanager
def meta_parameters() -> Iterator[None]:
    """Within it, every parameter a module registers is moved to the meta device (buffers stay
    where they are made). Each parameter is allocated for a moment before it moves, so the peak is
    one parameter, never the model."""

    def to_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> nn.Parameter | None:
        if param is None or param.is_meta:
            return None  # already meta (a tied weight assigned again): keep the same object
        return nn.Parameter(param.detach().to("meta"), requires_grad=param.requires_grad)

    # torch types the hook as returning None, but uses a returned parameter in place of the given one.
    handle = register_module_parameter_registration_hook(cast("Callable[..., None]", to_meta))
    try:
        yield
    finally:
        handle.remove()


@dataclass(frozen=True)
class CutPlan:
    """Where a model is cut: the container of its blocks and which modules go where."""

    container: str
    """FQN of the container of the repeated blocks."""
    pieces: tuple[tuple[str, ...], ...]
    """The entries (child names) of the container in each piece, in order: the units a stage
    holds a contiguous run of (one entry each when ``cuts`` names the container)."""
    before: tuple[str, ...]
    """FQNs of the modules before the container (kept on the first stage)."""
    after: tuple[str, ...]
    """FQNs of the modules after the container (kept on the last stage)."""
    shared: tuple[str, ...]
    """FQNs of the modules every stage keeps."""
    tied: tuple[TiedWeight, ...]

    @property
    def num_pieces(self) -> int:
        return len(self.pieces)


def _fix(where: str, problem: str, fix: str) -> ModelLoadError:
    return ModelLoadError(f"{where}: {problem}; {fix}")


def _named(model: nn.Module) -> dict[str, nn.Module]:
    return dict(model.named_modules(remove_duplicate=False))


def plan_cuts(model: nn.Module, cuts: Sequence[str], shared: Sequence[str], where: str) -> CutPlan:
    """Resolve ``cuts`` (a container FQN, or cut points inside one container) on ``model``;
    ``where`` names the field in errors (:class:`ModelLoadError`: a configuration error)."""
    modules = _named(model)
    top = ", ".join(name for name, _ in model.named_children()) or "none"
    example = next(
        (n for n, m in modules.items() if isinstance(m, _CONTAINERS) and len(m) > 1 and n), "layers"
    )
    hint = (
        f"name the container of the repeated blocks (e.g. cuts={example!r}) or cut points inside it "
        f"(e.g. cuts=[{example + '.1'!r}])"
    )
    if not cuts:
        raise _fix(where, "no cut given", hint)
    for name in cuts:
        if name not in modules or not name:
            raise _fix(where, f"{name!r} is not a module of the model (its top-level modules: {top})", hint)
    if len(cuts) == 1 and isinstance(modules[cuts[0]], _CONTAINERS):
        container = cuts[0]
        keys = [k for k, _ in modules[container].named_children()]
        if not keys:
            raise _fix(where, f"container {container!r} is empty", hint)
        pieces: tuple[tuple[str, ...], ...] = tuple((k,) for k in keys)
    else:
        parents = {name.rpartition(".")[0] for name in cuts}
        container = next(iter(parents))
        if len(parents) > 1 or not isinstance(modules.get(container), _CONTAINERS):
            raise _fix(
                where,
                f"cut points {list(cuts)} are not all entries of one nn.ModuleList, nn.Sequential "
                "or nn.ModuleDict",
                hint,
            )
        keys = [k for k, _ in modules[container].named_children()]
        starts = [keys.index(name.rpartition(".")[2]) for name in cuts]
        if starts != sorted(set(starts)) or starts[0] == 0:
            raise _fix(
                where,
                f"cut points {list(cuts)} must be distinct entries of {container!r} in model order, "
                f"after its first entry ({container}.{keys[0]}: a cut before it leaves nothing in "
                "front)",
                "list each cut point once, in order, leaving out the container's first entry",
            )
        bounds = [0, *starts, len(keys)]
        pieces = tuple(tuple(keys[a:b]) for a, b in itertools.pairwise(bounds))
    before, after = _outside(model, container, where)
    for name in shared:
        if name not in modules:
            raise _fix(where, f"shared module {name!r} is not a module of the model", "name a module")
        if any(True for _ in modules[name].parameters()):
            raise _fix(
                where,
                f"shared module {name!r} holds parameters, and a parameter lives on one stage",
                "share only parameter-free modules (a rotary table); put the rest in a block",
            )
    return CutPlan(container, pieces, before, after, tuple(shared), tied_weights(model))


def _outside(model: nn.Module, container: str, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The modules before and after ``container`` along the path from the root (by their order
    of registration). Parameters held directly by the path's modules are refused: a stage can
    replace a module by an identity, not a bare parameter."""
    before: list[str] = []
    after: list[str] = []
    path = container.split(".")
    node, prefix = model, ""
    for step in path:
        own = [n for n, _ in node.named_parameters(recurse=False)]
        if own:
            raise _fix(
                where,
                f"parameter(s) {[prefix + n for n in own]} sit directly on {prefix.rstrip('.') or 'the model'!r}, "
                "outside any submodule, so no stage can hold them alone",
                "wrap them in a module of their own (e.g. nn.Embedding for positions)",
            )
        seen = False
        for name, _ in node.named_children():
            if name == step:
                seen = True
            elif seen:
                after.append(prefix + name)
            else:
                before.append(prefix + name)
        node = getattr(node, step)
        prefix = f"{prefix}{step}."
    return tuple(before), tuple(after)


def tied_weights(model: nn.Module) -> tuple[TiedWeight, ...]:
    """The parameters ``model`` holds under more than one name (owner first)."""
    names: dict[int, list[str]] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
        shapes[id(param)] = tuple(param.shape)
    return tuple(TiedWeight(tuple(n), shapes[k]) for k, n in names.items() if len(n) > 1)


class _Dropped(nn.Identity):
    """Marks a block this stage does not hold, in the copy; removed right after."""


def stage_module(model: nn.Module, plan: CutPlan, pieces: range, *, first: bool, last: bool) -> nn.Module:
    """A copy of ``model`` holding only the stage's modules: the blocks of ``pieces`` (a range of
    plan pieces), the modules before the blocks on the first stage, after them on the last, the
    shared ones always. Parameters stay on the meta device (:func:`materialize` allocates them)."""
    modules = _named(model)
    kept = {key for i in pieces for key in plan.pieces[i]}
    memo: dict[int, Any] = {}
    for key, block in modules[plan.container].named_children():
        if key not in kept:
            memo[id(block)] = _Dropped()
    for name in (*plan.before, *plan.after):
        holds = (first and name in plan.before) or (last and name in plan.after)
        if not holds and name not in plan.shared:
            memo[id(modules[name])] = nn.Identity()
    stage = copy.deepcopy(model, memo)
    container = stage.get_submodule(plan.container)
    for key in [k for k, m in container.named_children() if isinstance(m, _Dropped)]:
        del container._modules[key]  # the rest keep their keys (global indices)
    return stage


class _Recomputed:
    """A block's forward run under ``torch.utils.checkpoint`` (non-reentrant) when grads are on."""

    def __init__(self, forward: Callable[..., Any]) -> None:
        self.forward = forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return self.forward(*args, **kwargs)
        return checkpoint(self.forward, *args, use_reentrant=False, **kwargs)


def recompute_blocks(stage: nn.Module, plan: CutPlan) -> None:
    """Activation checkpointing per block: each entry of the stage's container keeps only its
    inputs in the forward and recomputes the rest in the backward. The block's own ``forward`` is
    wrapped on the instance, so its parameter names do not change."""
    for block in stage.get_submodule(plan.container).children():
        block.forward = _Recomputed(block.forward)


def materialize(module: nn.Module) -> None:
    """Allocate ``module``'s meta parameters on the CPU, uninitialised, in place; a parameter
    that two submodules share stays shared."""
    made: dict[int, nn.Parameter] = {}
    for sub in module.modules():
        for name, param in list(sub.named_parameters(recurse=False)):
            if not param.is_meta:
                continue
            if id(param) not in made:
                made[id(param)] = nn.Parameter(torch.empty_like(param, device="cpu"), param.requires_grad)
            setattr(sub, name, made[id(param)])


def derive_seed(seed: int, *tags: object) -> int:
    """A 63-bit seed from ``seed`` and tags, stable across processes and Python versions."""
    text = ":".join(str(t) for t in (seed, *tags))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def _default_init(module: nn.Module) -> None:
    reset = getattr(module, "reset_parameters", None)
    if callable(reset):
        reset()


def init_weights(
    module: nn.Module, *, seed: int, init: Callable[[nn.Module], None] | None = None, prefix: str = ""
) -> None:
    """Initialise ``module`` in place: ``init`` (default: ``reset_parameters()``) on every
    submodule, children before parents, each under the global RNG seeded from ``seed`` and the
    submodule's full name (``prefix`` + its name), the global RNG restored afterwards. A weight
    two submodules share is initialised by the first that holds it; a later holder outside that
    one's subtree does not overwrite it. On one device this gives the weights the runtime gives
    the stages, however they are split: ``init_weights(model, seed=config.seed)``."""
    run = init or _default_init
    names = {id(m): prefix + n for n, m in module.named_modules(remove_duplicate=False)}
    order = list(_post_order(module))
    owner: dict[int, str] = {}  # parameter -> the first module (post-order) holding it directly
    for sub in order:
        for param in sub.parameters(recurse=False):
            owner.setdefault(id(param), names[id(sub)])
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for sub in order:
            name = names[id(sub)]
            inside = name + "." if name else ""
            keep = [
                (p, p.detach().clone())
                for p in sub.parameters()
                if owner[id(p)] != name and not owner[id(p)].startswith(inside)
            ]
            torch.manual_seed(derive_seed(seed, "init", name))
            run(sub)
            for param, value in keep:
                param.copy_(value)


def _post_order(module: nn.Module) -> Iterator[nn.Module]:
    for child in module.children():
        yield from _post_order(child)
    yield module


def _init_copies(stage: nn.Module, model: nn.Module, plan: CutPlan, seed: int, init: Any) -> None:
    """A tied weight's copy on a stage without its owner starts from the owner module's init."""
    present = dict(stage.named_parameters(remove_duplicate=False))
    for tie in plan.tied:
        owner_name = tie.names[0]
        if owner_name in present:
            continue
        copies = [present[n] for n in tie.names if n in present]
        if not copies:
            continue
        module_name, _, param_name = owner_name.rpartition(".")
        owner = copy.deepcopy(model.get_submodule(module_name))
        materialize(owner)
        init_weights(owner, seed=seed, init=init, prefix=module_name)
        with torch.no_grad():
            for param in copies:
                param.copy_(getattr(owner, param_name))


def weight_files(path: str, where: str) -> dict[str, Path]:
    """``{tensor name: file}`` of the safetensors at ``path`` (a file or a directory of them)."""
    from safetensors import safe_open

    root = Path(path)
    files = [root] if root.is_file() else sorted(root.glob("*.safetensors")) if root.is_dir() else []
    if not files:
        raise _fix(
            where,
            f"no .safetensors weights at {path!r}",
            "give a file or a directory written by save_pretrained (or safetensors.torch.save_file)",
        )
    found: dict[str, Path] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                found[key] = file
    return found


def load_weights(stage: nn.Module, files: Mapping[str, Path], tied: Sequence[TiedWeight], where: str) -> None:
    """Copy the stage's parameters and persistent buffers from safetensors ``files`` (only the
    tensors the stage holds are read); a tied copy missing from the files (``save_pretrained``
    stores a tied weight once) reads its owner's tensor."""
    from safetensors import safe_open

    siblings = {name: tie.names for tie in tied for name in tie.names}
    state = stage.state_dict(keep_vars=True)
    handles: dict[Path, Any] = {}
    try:
        with torch.no_grad():
            for name, target in state.items():
                key = next((k for k in (name, *siblings.get(name, ())) if k in files), None)
                if key is None:
                    raise _fix(
                        where,
                        f"the weights have no tensor {name!r} (the model's own name for it)",
                        "save the weights of this very model (save_pretrained, or save_file of its "
                        "state_dict())",
                    )
                file = files[key]
                if file not in handles:
                    handles[file] = safe_open(str(file), framework="pt")
                    handles[file].__enter__()
                value = handles[file].get_tensor(key)
                if tuple(value.shape) != tuple(target.shape):
                    raise _fix(
                        where,
                        f"tensor {key!r} in {file} has shape {list(value.shape)}, the model's "
                        f"{name!r} {list(target.shape)}",
                        "build the model with the configuration the weights were saved with",
                    )
                target.copy_(value)
    finally:
        for handle in handles.values():
            handle.__exit__(None, None, None)


def torch_model_spec(model: TorchModel, config: TrainConfig, where: str) -> ModelSpec:
    """The :class:`ModelSpec` that cuts ``model`` (built under :func:`meta_parameters`) into stages:
    its pieces are the spec's layers, so the even and measured layer splits and every placement
    apply. ``where`` names the factory in configuration errors."""
    cuts_where = f"{where}: TorchModel.cuts"
    plan = plan_cuts(model.module, model.cut_points, model.shared, cuts_where)
    if plan.num_pieces < config.num_stages:
        raise _fix(
            cuts_where,
            f"the model can be cut into {plan.num_pieces} piece(s) but pipeline ({config.pipeline}) x "
            f"stages_per_rank ({config.effective_stages_per_rank}) = {config.num_stages} stages need "
            "one each",
            "give more cut points, or lower pipeline or stages_per_rank",
        )
    if model.init is None:
        _check_default_init(model.module, f"{where}: TorchModel.init")
    files = weight_files(model.weights, f"{where}: TorchModel.weights") if model.weights else None
    if model.make_batch is None and not (config.data_shards or config.data_factory):
        raise _fix(
            f"{where}: TorchModel.make_batch",
            "the model gives no data and the job names none",
            "set spec.data (shards or factory; training config data_shards or data_factory), or "
            "return a make_batch",
        )

    def empty(stage: int, num_stages: int, pieces: range) -> nn.Module:
        built = stage_module(model.module, plan, pieces, first=stage == 0, last=stage == num_stages - 1)
        materialize(built)
        if config.activation_checkpointing:
            recompute_blocks(built, plan)
        return built

    def build(stage: int, num_stages: int, pieces: range) -> nn.Module:
        built = empty(stage, num_stages, pieces)
        if files is not None:
            load_weights(built, files, plan.tied, f"{where}: TorchModel.weights ({model.weights})")
        else:
            init_weights(built, seed=config.seed, init=model.init)
            _init_copies(built, model.module, plan, config.seed, model.init)
        return built

    def even(stage: int, num_stages: int) -> nn.Module:
        from hyperframe_runtime.pipeline.partitioning import even_split

        cuts = even_split(plan.num_pieces, num_stages)
        return build(stage, num_stages, range(cuts[stage], cuts[stage + 1]))

    def no_data(frame: int, replica: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        raise RuntimeError("the model has no make_batch: the job's data source gives the batches")

    return ModelSpec(
        build_stage=even,
        loss_fn=model.loss_fn,
        make_batch=model.make_batch or no_data,
        tokens_per_sample=model.tokens_per_sample,
        vocab_size=model.vocab_size,
        num_layers=plan.num_pieces,
        build_layers=build,
        build_empty_layers=empty,
        tied_parameters=plan.tied,
        frame_metrics=model.frame_metrics,
    )


def _check_default_init(model: nn.Module, where: str) -> None:
    for name, sub in model.named_modules():
        if any(True for _ in sub.parameters(recurse=False)) and not callable(
            getattr(sub, "reset_parameters", None)
        ):
            raise _fix(
                where,
                f"module {name!r} ({type(sub).__name__}) holds parameters but has no reset_parameters(), "
                "so a stage could not initialise them",
                "give it a reset_parameters(), or return TorchModel(init=...) (a function of one module)",
            )
