"""A kind's settings as one dataclass: :func:`kind_settings` builds it from a run file's
mapping, a stored section, or the keywords a constructor took before it took the dataclass.

A runner takes what it runs on (a space, a data folder) and ``settings``, one dataclass whose
fields are every other setting with its default, written once; its record's section is that
dataclass as data, so a resume builds the same one back. Keywords that name fields still work
until nasforge :data:`~nasforge._deprecated.KEYWORDS_REMOVED_IN` and warn
(:class:`DeprecationWarning`) that they go then.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from nasforge._deprecated import KEYWORDS_REMOVED_IN
from nasforge.errors import ConfigError
from nasforge.run.runner import did_you_mean

__all__ = ["kind_settings", "settings_data"]

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
        ConfigError: a key that is no field of ``cls`` (the message suggests the closest), or
            ``settings`` of another type.
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
    return dataclasses.replace(base, **keywords) if keywords else base  # type: ignore[type-var]


def settings_data(settings: Any) -> dict[str, Any]:
    """Returns a settings dataclass as plain data (its fields, in order), what a record keeps."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
