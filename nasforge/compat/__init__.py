"""Adapters for code written against other NAS libraries: :mod:`nasforge.compat.nni` runs NNI
3.0 model spaces as nasforge spaces (docs/from-nni.md)."""

__all__: list[str] = []
