"""A kind's settings as one dataclass: :func:`kind_settings` builds it from a run file's
mapping, a stored section, or the keywords a constructor took before it took the dataclass.

A runner takes what it runs on (a space, a data folder) and ``settings``, one dataclass whose
fields are every other setting with its default, written once; its record's section is that
dataclass as data, so a resume builds the same one back. Keywords that name fields still work
until nasforge :data:`~nasforge._deprecated.KEYWORDS_REMOVED_IN` and warn
(:class:`DeprecationWarning`) that they go then.

Whatever the source (a run file, ``--set KEY=VALUE``, a stored section, keywords), the built
settings pass their class's ``check()`` (where it has one) and a field written ``int``,
``float`` or ``bool`` (or one of them ``| None``) takes only that type: a bool is no int and a
string no number, so ``--set n_trials=true`` is one line naming the setting rather than a run
of one trial.
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from nasforge._deprecated import KEYWORDS_REMOVED_IN
from nasforge.errors import ConfigError, did_you_mean

__all__ = ["kind_settings", "settings_data", "check_types"]

S = TypeVar("S")


def kind_settings(
    cls: type[S],
    settings: S | Mapping[str, Any] | None,
    keywords: Mapping[str, Any],
    owner: str,
    *,
    deprecated: bool = True,
) -> S:
    """Returns the ``cls`` dataclass of ``settings`` (an instance, a mapping of its fields, or
    None for the defaults) with ``keywords`` replacing its fields; with ``deprecated`` each
    keyword warns that ``owner`` takes ``settings=cls(...)`` instead and that the keywords go
    in nasforge ``KEYWORDS_REMOVED_IN`` (the deprecation table's).

    Raises:
        ConfigError: a key that is no field of ``cls`` (the message suggests the closest),
            ``settings`` of another type, or settings that fail their class's ``check()``
            (where it has one) or :func:`check_types` (a field of the wrong type).
    """
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    given = {} if settings is None or isinstance(settings, cls) else settings
    if not isinstance(given, Mapping):
        raise ConfigError(
            f"{owner}: settings must be a {cls.__name__} (or a mapping of its fields), got "
            f"{type(settings).__name__}"
        )
    unknown = sorted((set(given) | set(keywords)) - set(names))
    if unknown:
        hint = did_you_mean(unknown[0], names)
        raise ConfigError(
            f"{owner}: unknown setting(s) {unknown}; {hint + ' ' if hint else ''}the settings "
            f"are {names}"
        )
    if keywords and deprecated:
        listed = ", ".join(f"{k}=..." for k in keywords)
        warnings.warn(
            f"{owner}({listed}) is deprecated and will be removed in nasforge "
            f"{KEYWORDS_REMOVED_IN}; pass settings={cls.__name__}({listed})",
            DeprecationWarning,
            stacklevel=3,
        )
    base = settings if isinstance(settings, cls) else cls(**given)
    built = dataclasses.replace(base, **keywords) if keywords else base  # type: ignore[type-var]
    _check(built, owner)
    return built


def _check(settings: Any, owner: str) -> None:
    """Returns None when the settings pass their class's own ``check()``, where it has one
    (it knows what a setting means, so it speaks first: "n_trials must be a positive int"),
    and :func:`check_types`.

    Raises:
        ConfigError: from either; a check that fails on a value of the wrong type with a
            TypeError is answered by :func:`check_types`, which names the setting.
    """
    check = getattr(settings, "check", None)
    if callable(check):
        try:
            check()
        except TypeError:
            check_types(settings, owner)
            raise
    check_types(settings, owner)


#: what a field written as the key takes: (the test, the words for it)
_SCALARS: dict[str, tuple[Any, str]] = {
    "int": (lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool), "an int"),
    "float": (lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
}


def _scalar(annotation: Any) -> tuple[str, bool] | None:
    """Returns ``(type name, None allowed)`` of a field written ``int``, ``float`` or ``bool``,
    alone or ``| None``; None for any other annotation (those are checked by their kind)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    text = text if text is not None else repr(annotation)
    parts = [p.strip() for p in text.split("|")]
    rest = [p for p in parts if p != "None"]
    if len(rest) != 1 or rest[0] not in _SCALARS:
        return None
    return rest[0], len(rest) < len(parts)


def check_types(settings: Any, owner: str) -> None:
    """Returns None when every field of the ``settings`` dataclass written ``int``, ``float``
    or ``bool`` (alone or ``| None``) holds a value of that type: an int is no bool, a number
    no bool and no string (a float field takes an int).

    Raises:
        ConfigError: the first field that does not; the message names the field, the value
            and its type, and what the field takes.
    """
    for f in dataclasses.fields(settings):
        scalar = _scalar(f.type)
        if scalar is None:
            continue
        name, optional = scalar
        value = getattr(settings, f.name)
        ok, words = _SCALARS[name]
        if (value is None and optional) or (value is not None and ok(value)):
            continue
        raise ConfigError(
            f"{owner}: {f.name} must be {words}{' or None (null)' if optional else ''}, got "
            f"{value!r} (a {type(value).__name__})"
        )


def settings_data(settings: Any) -> dict[str, Any]:
    """Returns a settings dataclass as plain data (its fields, in order), what a record keeps."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
