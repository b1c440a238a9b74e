"""The neural-collapse view of a run (Papyan, Han & Donoho 2020): the collapse measures against epoch on the
training sample, held-out and unseen images, and the class means' simplex at a chosen layer and epoch."""
from .card import CollapseView

__all__ = ["CollapseView"]
