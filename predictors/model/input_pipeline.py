"""TorchRec's training pipeline around a captured step (``training.input_pipeline:
"torchrec"``, on GPUs).

``TrainPipelineSparseDist`` overlaps three batches.  In the step of batch *i* the host
also

- copies batch *i + 2* from host memory to the device (``copy_batch_to_gpu``: the dense
  features, the labels, and the sparse features as one KeyedJaggedTensor of values and
  lengths);
- distributes batch *i + 1*'s sparse features to the ranks that hold their tables
  (``sparse_data_dist``), once per sharding kind that has an input distribution
  (table-wise, row-wise, column-wise, table-row-wise; a data-parallel table's features
  stay): the features are permuted into destination order, the splits (how many lengths
  and values go to each rank) are made on the host, copied and exchanged in an
  all-to-all whose result the host reads before it goes on, then the lengths and the
  values go in two more all-to-alls;
- at the start of the forward, takes batch *i*'s received features: permutes them back
  into table order, sums the lengths, and, for each sharding kind's lookup, turns the
  lengths into offsets.

:func:`pipeline_of` describes this for one rank from the scenario and its sharding, and
the three ``*`` functions record it as aten ops and the collectives of
:mod:`.comm_ops`, so the host pays each op's dispatch like any other op of the step.
FBGEMM's sparse ops (``permute_2D_sparse_data``, ``asynchronous_complete_cumsum``) are
recorded as the aten ops that do the same work (``index_select``, ``cumsum``).  The data
loader's own time is not part of it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["InputPipeline", "pipeline_of", "host_batch", "copy_batch", "start_sparse_dist",
           "take_sparse_dist", "COPY_BLOCK", "DIST_BLOCK", "TAKE_BLOCK", "SIDE_STREAMS"]

_VALUES, _LENGTHS = torch.int64, torch.int32

# The block names of the pipeline's ops.  The batch's copy runs on a memcpy stream and the
# input distribution on a stream of its own (TorchRec's ``memcpy_stream`` and
# ``data_dist_stream``), so neither waits for the forward's kernels; the forward's side
# runs on the compute stream.
COPY_BLOCK = "batch copy"
DIST_BLOCK = "input distribution"
TAKE_BLOCK = "input pipeline"
SIDE_STREAMS = frozenset({COPY_BLOCK, DIST_BLOCK})


@dataclass(frozen=True)
class InputPipeline:
    """What one rank's pipeline moves in a step."""

    ranks: int
    local_batch: int
    features: int                    # sparse features (tables) of the batch
    values: int                      # their indices in this rank's samples
    # per sharding kind with an input distribution: (kind, feature slots, values) this
    # rank sends; a row-wise feature's lengths go to every bucket of its rows (TorchRec's
    # bucketize), a column-wise one's lengths and values to every shard
    dists: tuple[tuple[str, int, int], ...]
    lookups: tuple[tuple[str, int], ...]    # per sharding kind looked up: (kind, slots)


def _kind(shard, key: str) -> str:
    if shard is None:
        return "local"
    if key in shard.replicated:
        return "dp"
    if key in shard.row_groups:
        return "twrw"
    if key in shard.rowwise:
        return "rw"
    return "cw" if key in shard.columns else "tw"


def _slots(shard, how: str, key: str) -> int:
    """How many ranks get a feature's lengths: its row buckets or column shards."""
    if how == "rw":
        return shard.ranks
    if how == "twrw":
        return len(shard.row_groups[key])
    return len(shard.columns[key]) if how == "cw" else 1


def pipeline_of(doc: dict, shard=None) -> InputPipeline:
    """The pipeline of one rank (``shard``; None: one device) of scenario ``doc`` (before
    a rank's row-wise tables are cut to its block)."""
    b = shard.local_batch if shard is not None else int(doc["training"]["batch_size"])
    features, values = 0, 0
    sent: dict[str, list[int]] = {}
    looked: dict[str, int] = {}
    for node in doc["model"]["nodes"]:
        if node["kind"] != "embedding_tables":
            continue
        for j, table in enumerate(node["params"]["tables"]):
            key = f"{node['id']}/{j}"
            how = _kind(shard, key)
            n = int(round(b * float(table["pooling"])))
            slots = _slots(shard, how, key)
            features, values = features + 1, values + n
            looked[how] = looked.get(how, 0) + slots
            if how not in ("dp", "local"):
                got = sent.setdefault(how, [0, 0])
                got[0] += slots
                got[1] += n * (slots if how == "cw" else 1)   # row buckets split the values
    order = ("tw", "rw", "cw", "twrw", "dp", "local")   # TorchRec's sharding kinds' order
    return InputPipeline(
        shard.ranks if shard is not None else 1, b, features, values,
        tuple((k, *sent[k]) for k in order if k in sent),
        tuple((k, looked[k]) for k in order if k in looked))


def host_batch(p: InputPipeline, batch: dict) -> list[torch.Tensor]:
    """The next batch as the data loader leaves it in host memory (made before the step is
    recorded): tensors like ``batch``'s dense inputs, tokens and targets, then the KJT's
    values and lengths."""
    out = [torch.empty(t.shape, dtype=t.dtype) for part in ("dense", "tokens", "target")
           for t in batch[part].values()]
    if p.features:
        out += [torch.empty(p.values, dtype=_VALUES),
                torch.empty(p.features * p.local_batch, dtype=_LENGTHS)]
    return out


def copy_batch(tensors: list[torch.Tensor], device) -> list[torch.Tensor]:
    """``copy_batch_to_gpu``: every tensor of the host batch copied to ``device``."""
    return [t.to(device, non_blocking=True) for t in tensors]


def start_sparse_dist(p: InputPipeline, copied: list[torch.Tensor], device) -> None:
    """``sparse_data_dist`` of the batch ``copied`` (:func:`copy_batch`'s output): per
    sharding kind, its features permuted into destination order, the splits made on the
    host and exchanged (the host waits for them), then the lengths and values
    exchanged."""
    if not p.dists:
        return
    values, lengths = copied[-2], copied[-1]
    per_feature = lengths.view(p.features, p.local_batch)
    for _, features, n in p.dists:
        # the features in destination order (a row-wise one once per bucket)
        order = torch.empty(features, dtype=torch.int64, device=device)
        out_lengths = per_feature.index_select(0, order)
        out_values = values.index_select(0, torch.empty(n, dtype=torch.int64, device=device))
        splits = torch.stack([torch.empty(p.ranks, dtype=torch.int64).to(device)
                              for _ in range(3)])   # lengths, values and samples per rank
        torch.ops.mldse.kjt_splits(splits.flatten())
        torch.empty(p.ranks * features, dtype=torch.int32).to(device)   # the recat order
        torch.ops.mldse.kjt_all_to_all(out_lengths.flatten())
        torch.ops.mldse.kjt_all_to_all(out_values)


def take_sparse_dist(p: InputPipeline, device) -> None:
    """The forward's side of the pipeline: the features received in the step before
    (permuted back into table order, their lengths summed) and each sharding kind's
    lookup offsets."""
    for _, features, n in p.dists:
        # what a rank receives, taken as what it sends (alike on average over the ranks)
        lengths = torch.empty(features * p.local_batch, dtype=_LENGTHS, device=device)
        recat = torch.empty(features, dtype=torch.int64, device=device)
        lengths.view(features, p.local_batch).index_select(0, recat).sum()
        values = torch.empty(n, dtype=_VALUES, device=device)
        values.index_select(0, torch.empty(n, dtype=torch.int64, device=device))
    for _, features in p.lookups:
        lengths = torch.empty(features * p.local_batch, dtype=_LENGTHS, device=device)
        torch.cumsum(lengths.to(torch.int64), 0).to(torch.int32)
