"""References: plain data that rebuilds an object later, in another process or session.

A run records how to rebuild its space (and, for a run started from Python, its evaluator or
data), so that ``nasforge resume DIR`` and ``load_model(export_dir)`` need nothing from the user.
A reference is ``{"object": "module:qualname", "args": [...], "kwargs": {...}}`` (the object is
called with the arguments), or ``{"object": ...}`` alone for a module-level object used as it is,
plus ``"file"`` when the module is a script (its ``__main__``): the script is then imported
again as a module, not run, so its ``if __name__ == "__main__":`` block stays idle.

Arguments are JSON data; dataclass instances (such as ``OFASpec``) are written as
``{"__dataclass__": "module:qualname", "fields": {...}}`` and rebuilt with the class's
``from_dict`` when it has one. Nothing is pickled.

Resolution imports modules named in the record (never a name built from other data) and
refuses anything but a module attribute path. A path that moved since the record was written
is read through the deprecation table (:mod:`nasforge._deprecated`): the object comes from its
new home with a DeprecationWarning, and a path removed already fails in one line naming the
new one.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasforge._deprecated import redirect
from nasforge.errors import ConfigError

__all__ = [
    "find_ref",
    "keep_rebuildable",
    "to_ref",
    "from_ref",
    "object_path",
    "load_script",
    "resolve",
    "materialize",
    "SCRIPT_PREFIX",
]

#: Module-name prefix of scripts and experiment files imported by :func:`load_script`.
SCRIPT_PREFIX = "nasforge_script_"


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__dataclass__": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"dict keys must be strings, got {list(value)[:3]}")
        return {k: _encode(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{type(value).__name__} {value!r:.80} is not plain data")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__dataclass__" in value:
            cls = _import_path(value["__dataclass__"], None)
            fields = {k: _decode(v) for k, v in value["fields"].items()}
            if hasattr(cls, "from_dict"):
                return cls.from_dict(fields)
            return cls(**fields)
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def object_path(obj: object) -> tuple[str, str | None]:
    """Returns ``("module:qualname", script file or None)`` of a class or function.

    Raises:
        ConfigError: the object is not reachable by a module attribute path (a lambda, a
            local function or class).
    """
    module = getattr(obj, "__module__", None)
    qual = getattr(obj, "__qualname__", None)
    if not module or not qual or "<" in qual:
        raise ConfigError(
            f"{obj!r:.80} cannot be found again by name (a lambda or a function defined inside "
            "another); define it at module level"
        )
    script = None
    if module == "__main__" or module.startswith(SCRIPT_PREFIX):
        mod = sys.modules.get(module)
        script = getattr(mod, "__file__", None)
        if script is None:
            raise ConfigError(
                f"{obj!r:.80} comes from an interactive session, which cannot be imported "
                "again; define it in a file"
            )
        script = str(Path(script).resolve())
        module = "__main__"  # a re-imported script is named by its file, as when it was run
    return f"{module}:{qual}", script


def to_ref(obj: object) -> dict[str, Any]:
    """Returns a reference that rebuilds ``obj``: a model space (its class and the arguments
    it was constructed with), a class or function at module level, or an object whose
    ``init_args()`` returns ``(args, kwargs)`` of its constructor.

    Raises:
        ConfigError: the object cannot be rebuilt from plain data (the message says why).
    """
    init = obj.__dict__.get("_nf_init_args") if hasattr(obj, "__dict__") else None
    if init is None and hasattr(obj, "init_args") and not isinstance(obj, type):
        init = obj.init_args()
    if init is None:
        path, script = object_path(obj)
        ref: dict[str, Any] = {"object": path}
    else:
        path, script = object_path(type(obj))
        args, kwargs = init
        try:
            ref = {"object": path, "args": _encode(list(args)), "kwargs": _encode(dict(kwargs))}
        except TypeError as exc:
            raise ConfigError(
                f"{type(obj).__name__} was built with arguments that are not plain data "
                f"({exc}); build it from numbers, strings, lists, dicts or dataclasses"
            ) from exc
    if script is not None:
        ref["file"] = script
    json.dumps(ref)
    return ref


def _import_path(path: str, script: str | None) -> Any:
    if not path.partition(":")[2]:
        raise ConfigError(f"{path!r}: write references as 'module:attribute'")
    try:
        # a moved path warns at the code that asked for the reference
        module_name, _, qual = (path if script else redirect(path, stacklevel=3)).partition(":")
        if script is not None:
            obj: Any = load_script(script)
        else:
            obj = importlib.import_module(module_name)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        where = f" (file {script})" if script else ""
        raise ConfigError(f"cannot find {path!r}{where} again: {exc}") from exc
    return obj


def from_ref(ref: dict[str, Any]) -> Any:
    """Returns the object a reference describes (calling it when the reference has arguments).

    Raises:
        ConfigError: the module, file or attribute is gone, or the call fails.
    """
    obj = _import_path(ref["object"], ref.get("file"))
    if "args" not in ref and "kwargs" not in ref:
        return obj
    args, kwargs = _decode(ref.get("args", [])), _decode(ref.get("kwargs", {}))
    try:
        return obj(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported with the reference
        raise ConfigError(
            f"rebuilding {ref['object']} with {args}, {kwargs} failed: {exc!r}"
        ) from exc


def load_script(path: str | Path) -> Any:
    """Returns the module object of a Python file, imported (not run as ``__main__``); a file
    is imported again only when it changed (its size or modification time).

    Raises:
        ConfigError: the file does not exist or fails to import.
    """
    path = Path(path).resolve()
    if not path.exists():
        raise ConfigError(f"Python file {path} not found")
    st = path.stat()
    name = f"{SCRIPT_PREFIX}{abs(hash((str(path), st.st_mtime_ns, st.st_size)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"importing {path} failed: {exc!r}") from exc
    finally:
        sys.path.remove(str(path.parent))
    return module


def resolve(ref: str, base: Path | None = None) -> Any:
    """Returns the object named by ``"module:attr"`` in a run file (a class is instantiated).

    Raises:
        ConfigError: the module or attribute does not exist.
    """
    if base is not None and str(base) not in sys.path:
        sys.path.insert(0, str(base))
    obj = _import_path(ref, None)
    return obj() if isinstance(obj, type) else obj


def materialize(value: Any, base: Path | None = None) -> Any:
    """Returns a run-file or record value as an object: a ``"module:attr"`` string is resolved
    (a class instantiated), a stored reference rebuilt; anything else passes through.

    Raises:
        ConfigError: a reference that does not resolve.
    """
    if isinstance(value, str) and ":" in value and "/" not in value and " " not in value:
        return resolve(value, base)
    if isinstance(value, dict) and "object" in value:
        return from_ref(value)
    return value


def find_ref(obj: object) -> dict[str, Any] | None:
    """Returns a reference that finds ``obj`` again in a later process, or None.

    In order: an object that records its constructor arguments (a model space) is rebuilt
    from them; an object bound to a module-level name of the script being run (``__main__``)
    is found by that name in the script; a module-level class or function by its path.
    """
    try:
        return to_ref(obj)
    except ConfigError:
        pass
    # the script being run, then the scripts a resume imported again (as SCRIPT_PREFIX
    # modules: the record names them by their file, as the script's __main__)
    scripts = [sys.modules.get("__main__")]
    scripts += [m for n, m in list(sys.modules.items()) if n.startswith(SCRIPT_PREFIX)]
    for module in scripts:
        script = getattr(module, "__file__", None)
        if module is None or script is None:
            continue
        for name, value in vars(module).items():
            if value is obj and not name.startswith("_"):
                return {"object": f"__main__:{name}", "file": str(Path(script).resolve())}
    try:
        path, script = object_path(obj)
    except ConfigError:
        return None
    ref: dict[str, Any] = {"object": path}
    if script:
        ref["file"] = script
    return ref


def _rebuilds(value: Any) -> bool:
    """Returns whether a recorded value is a reference that rebuilds an object."""
    return isinstance(value, Mapping) and "object" in value


def keep_rebuildable(stored: Mapping[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Returns ``config`` (a resumed run's new config) with each reference of ``stored``
    (the space, the kind section's evaluator or data) kept where the new value cannot
    rebuild its object (None, or ``{"unrebuildable": ...}``): a resume never rewrites what it
    could not rebuild better."""
    out = dict(config)
    if _rebuilds(stored.get("space")) and not _rebuilds(out.get("space")):
        out["space"] = stored["space"]
    kind = str(out.get("kind"))
    old, new = stored.get(kind), out.get(kind)
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        section = dict(new)
        for key, value in old.items():
            if _rebuilds(value) and key in section and not _rebuilds(section[key]):
                if section[key] is None or (
                    isinstance(section[key], Mapping) and "unrebuildable" in section[key]
                ):
                    section[key] = value
        out[kind] = section
    return out
