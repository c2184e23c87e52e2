"""Moving parameters and optimizer state between pipeline ranks, tensor by tensor, in buckets.

When the stages move to another placement or layer split (``pipeline.stages``), each parameter
is held by exactly one rank before and one rank after (names are unique across stages). A rank
keeps what it still holds and copies it locally; what changes rank travels point to point from
its old holder to its new one and nowhere else:

1. what a rank keeps, its new stages take over in place (the old storage, no copy);
2. every pipeline rank all-gathers a small table: the names, shapes and dtypes of what it gives
   up (parameters and their optimizer state), and the names its new stages need. Scalars of the
   optimizer state (AdamW's ``step``) ride in the table as numbers;
3. every rank derives the same list of transfers from the tables: for each (sender, receiver)
   pair in rank order, the tensors by name;
4. each pair's tensors go in buckets of at most :data:`BUCKET_BYTES`: tensors of one dtype
   packed into one flat buffer and sent with ``dist.send``/``dist.recv``, a tensor of a bucket's
   size or more sent on its own straight from (and received straight into) its own storage.

No tensor is pickled or copied to the host, and no rank receives what it does not hold next: the
memory a move adds is what the rank receives plus at most one bucket being packed or unpacked.
Every rank walks the same transfer list in the same order, so blocking sends and receives cannot
deadlock. The receiving parameter takes the bytes in place; the optimizer state is allocated
where it lands.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["BUCKET_BYTES", "MoveStats", "move_state"]

BUCKET_BYTES: Final = 32 * 2**20
"""Largest flat buffer a move packs: bounds the transient memory of a move above what it moves."""


@dataclass
class MoveStats:
    """What one rank's side of a move did (for tests and ``bench stage_moves``)."""

    sent_bytes: int = 0
    received_bytes: int = 0
    kept_bytes: int = 0
    """Bytes of parameters and optimizer state this rank holds before and after: the new stages
    take them over in place (the new parameter uses the old one's storage)."""
    buckets: int = 0
    largest_staging_bytes: int = 0
    """The largest flat buffer packed or unpacked (0 when every tensor went on its own)."""


@dataclass(frozen=True)
class _Entry:
    """One tensor of the table: ``key`` is "" for the parameter, else its optimizer-state key."""

    name: str
    key: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * torch.empty((), dtype=self.dtype).element_size()


@dataclass
class _Table:
    """One rank's gathered row: what it gives up and what it needs."""

    leaving: list[_Entry] = field(default_factory=list)
    scalars: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Optimizer-state values that are not tensors, or 0-dim tensors (as ``(value, dtype)``)."""
    needs: list[str] = field(default_factory=list)


def _named_params(modules: Mapping[int, nn.Module]) -> dict[str, torch.Tensor]:
    """Parameters and persistent buffers (a buffer has no optimizer state; non-persistent ones,
    such as a rotary table, are rebuilt with the stage and never move)."""
    out: dict[str, torch.Tensor] = {}
    for module in modules.values():
        persistent = module.state_dict(keep_vars=True)
        out.update((name, b) for name, b in module.named_buffers() if name in persistent)
        out.update(module.named_parameters())
    return out


def _state_items(state: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    yield from sorted(state.items())


def move_state(
    old_modules: Mapping[int, nn.Module],
    old_optimizer: torch.optim.Optimizer,
    new_modules: Mapping[int, nn.Module],
    new_optimizer: torch.optim.Optimizer,
    *,
    pp_group: dist.ProcessGroup,
    bucket_bytes: int = BUCKET_BYTES,
    tied: Mapping[str, tuple[str, ...]] | None = None,
) -> MoveStats:
    """Fill ``new_modules``' parameters, persistent buffers and ``new_optimizer``'s state from
    the pipeline's old stages (collective over ``pp_group``: every rank of the pipeline calls it).

    ``tied``: ``{name: every name of its tied weight}``. A stage holding both ends of a tied
    weight holds one parameter under the first name; stages apart hold a copy each, so a name
    the new stages need may be held under a sibling name before (the copies are equal)."""
    stats = MoveStats()
    siblings = tied or {}
    old, new = _named_params(old_modules), _named_params(new_modules)
    copied: set[str] = set()
    with torch.no_grad():  # a tied copy whose sibling this rank holds: copied here
        for name in [n for n in new if n not in old]:
            local = next((k for k in siblings.get(name, ()) if k in old), None)
            if local is not None:
                _copy_local(old[local], old_optimizer, new[name], new_optimizer, stats)
                copied.add(name)
    mine = _Table(needs=sorted(n for n in new if n not in old and n not in copied))
    # Tied names this rank holds are offered too, even where it keeps them: another rank may need
    # them under a sibling name (only what is asked for is sent).
    for name in sorted(n for n in old if n not in new or n in siblings):
        param = old[name]
        mine.leaving.append(_Entry(name, "", tuple(param.shape), param.dtype))
        for key, value in _state_items(old_optimizer.state.get(param, {})):
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                mine.leaving.append(_Entry(name, key, tuple(value.shape), value.dtype))
            elif isinstance(value, torch.Tensor):
                mine.scalars[(name, key)] = (value.item(), value.dtype, value.device.type)
            else:
                mine.scalars[(name, key)] = value
    tables: list[_Table | None] = [None] * dist.get_world_size(pp_group)
    dist.all_gather_object(tables, mine, group=pp_group)
    rows = [t if t is not None else _Table() for t in tables]
    me = dist.get_rank(pp_group)

    with torch.no_grad():
        for name, param in new.items():  # what this rank keeps: its own storage, no copy
            if name in old:
                param.data = old[name].data
                stats.kept_bytes += param.numel() * param.element_size()
                state = old_optimizer.state.get(old[name])
                if state:
                    new_optimizer.state[param] = {
                        k: v.to(param.device) if isinstance(v, torch.Tensor) and k != "step" else v
                        for k, v in state.items()
                    }
                    stats.kept_bytes += sum(
                        v.numel() * v.element_size() for v in state.values() if isinstance(v, torch.Tensor)
                    )

        holder = {e.name: src for src, row in enumerate(rows) for e in row.leaving if not e.key}
        source: list[dict[str, str]] = []  # per receiver: {the name it needs: the name sent}
        for row in rows:
            names: dict[str, str] = {}
            for name in row.needs:
                found = next((k for k in (name, *siblings.get(name, ())) if k in holder), None)
                if found is None:
                    raise RuntimeError(
                        f"parameter {name!r} of the new placement is held by no rank; stage "
                        "modules must name parameters the same for every stage count"
                    )
                names[name] = found
            source.append(names)
        for src, sender in enumerate(rows):
            for dst in range(len(rows)):
                if src == dst or me not in (src, dst):
                    continue
                pairs = [(n, k) for n, k in sorted(source[dst].items()) if holder[k] == src]
                by_name = {k: [e for e in sender.leaving if e.name == k] for _, k in pairs}
                entries = [(e, n) for n, k in pairs for e in by_name[k]]
                if not entries:
                    continue
                peer = dist.get_global_rank(pp_group, dst if me == src else src)
                if me == src:
                    _send([e for e, _ in entries], old, old_optimizer, peer, pp_group, bucket_bytes, stats)
                else:
                    _receive(entries, sender.scalars, new, new_optimizer, peer, pp_group, bucket_bytes, stats)
    return stats


def _copy_local(
    src: torch.Tensor,
    old_optimizer: torch.optim.Optimizer,
    dst: torch.Tensor,
    new_optimizer: torch.optim.Optimizer,
    stats: MoveStats,
) -> None:
    """A tied copy from its sibling on this rank: the value and its optimizer state, cloned."""
    dst.data.copy_(src.data)
    state = old_optimizer.state.get(src)
    if state:
        new_optimizer.state[dst] = {
            k: v.detach().clone().to(dst.device) if isinstance(v, torch.Tensor) and k != "step" else v
            for k, v in state.items()
        }
    stats.kept_bytes += dst.numel() * dst.element_size()


def _buckets(entries: list[_Entry], bucket_bytes: int) -> Iterator[list[_Entry]]:
    """Consecutive entries of one dtype up to ``bucket_bytes``; a large entry alone."""
    bucket: list[_Entry] = []
    size = 0
    for entry in entries:
        if bucket and (entry.dtype != bucket[0].dtype or size + entry.nbytes > bucket_bytes):
            yield bucket
            bucket, size = [], 0
        bucket.append(entry)
        size += entry.nbytes
    if bucket:
        yield bucket


def _source(
    entry: _Entry, params: Mapping[str, torch.Tensor], optimizer: torch.optim.Optimizer
) -> torch.Tensor:
    param = params[entry.name]
    tensor: torch.Tensor = param.detach() if not entry.key else optimizer.state[param][entry.key]
    return tensor


def _send(
    entries: list[_Entry],
    params: Mapping[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    peer: int,
    group: dist.ProcessGroup,
    bucket_bytes: int,
    stats: MoveStats,
) -> None:
    for bucket in _buckets(entries, bucket_bytes):
        tensors = [_source(e, params, optimizer) for e in bucket]
        if len(tensors) == 1:
            flat = tensors[0].contiguous()
        else:
            flat = torch.cat([t.reshape(-1) for t in tensors])
            stats.largest_staging_bytes = max(stats.largest_staging_bytes, flat.numel() * flat.element_size())
        dist.send(flat, dst=peer, group=group)
        stats.buckets += 1
        stats.sent_bytes += flat.numel() * flat.element_size()


def _receive(
    pairs: list[tuple[_Entry, str]],
    scalars: Mapping[tuple[str, str], Any],
    params: Mapping[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    peer: int,
    group: dist.ProcessGroup,
    bucket_bytes: int,
    stats: MoveStats,
) -> None:
    """``pairs``: each entry sent with the name it lands under here (a tied sibling's)."""
    target_name = {id(e): n for e, n in pairs}
    for bucket in _buckets([e for e, _ in pairs], bucket_bytes):
        targets = [_target(e, target_name[id(e)], params, optimizer) for e in bucket]
        if len(targets) == 1:
            dist.recv(targets[0], src=peer, group=group)
            nbytes = targets[0].numel() * targets[0].element_size()
        else:
            flat = torch.empty(
                sum(t.numel() for t in targets), dtype=bucket[0].dtype, device=targets[0].device
            )
            dist.recv(flat, src=peer, group=group)
            offset = 0
            for t in targets:
                t.copy_(flat[offset : offset + t.numel()].view_as(t))
                offset += t.numel()
            nbytes = flat.numel() * flat.element_size()
            stats.largest_staging_bytes = max(stats.largest_staging_bytes, nbytes)
        stats.buckets += 1
        stats.received_bytes += nbytes
    for sent, name in dict.fromkeys((e.name, n) for e, n in pairs):
        state = optimizer.state.get(params[name])
        for (owner, key), value in scalars.items():
            if owner != sent:
                continue
            if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], torch.dtype):
                number, dtype, device = value
                value = torch.tensor(
                    number, dtype=dtype, device=params[name].device if device != "cpu" else "cpu"
                )
            if state is None:
                state = optimizer.state[params[name]] = {}
            state[key] = value


def _target(
    entry: _Entry, name: str, params: Mapping[str, torch.Tensor], optimizer: torch.optim.Optimizer
) -> torch.Tensor:
    """Where ``entry`` lands (as ``name``): the new tensor's own storage, or fresh optimizer
    state there."""
    param = params[name]
    if not entry.key:
        return param.data
    state = optimizer.state.setdefault(param, {})
    tensor = torch.empty(entry.shape, dtype=entry.dtype, device=param.device)
    state[entry.key] = tensor
    return tensor
