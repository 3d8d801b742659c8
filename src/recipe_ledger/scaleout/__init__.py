"""Several boxes: `ledger sweep` hands each experiment to the box it names, on Ray.

- ``sweep``: the driver (plan the sweep from the specs, one experiment per box at a time, a failure
  entry for every experiment that comes back without one); no Ray in it, so it is tested with a fake;
- ``onbox``: what runs on the box (``ledger run`` then ``ledger sync`` in that box's checkout);
- ``raycluster``: the only module that imports ray (label scheduling, node liveness).

Ray stays out here: the engines, the pipeline and the ledger know nothing of it.
"""
