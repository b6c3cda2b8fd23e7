"""The home of NNI model-space modules loaded by :func:`nasforge.compat.nni.load`:
``nasforge.compat.nni._from.<module>``. Importing it puts the finder that loads them on
``sys.meta_path``, so a loaded class's module path imports in any process."""

from nasforge.compat.nni._importer import install

__all__: list[str] = []

install()
