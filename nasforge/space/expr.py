"""Value choices: ``choice(values, label)`` and the arithmetic that keeps dependent shapes right.

While a space is recorded, ``choice([16, 32, 64])`` returns a *choice value*: an ``int`` (or
``float``, ``str``) that equals the first candidate, so that it can be handed to any ordinary
constructor (``nn.Conv2d(3, c, 3)``) and the space still builds, and that also carries the
symbolic expression it came from (``c * 2`` is ``64`` now and ``Mul(c, 2)`` underneath).
Space-aware modules (``Repeat``, the elastic layers of ``nasforge.ofa``) read that expression to
learn every value a choice can take. When a space is frozen, ``choice`` returns the architecture's
plain value, so the frozen model holds no trace of search.

``uniform(low, high, log=False)`` and ``integer(low, high, step=1, log=False)`` declare a range
instead of a list (a learning rate, a dropout rate): recording, they return the range's middle;
frozen, the architecture's value. A range has no list of candidates, so a space-aware module
that needs every value (``Repeat``'s depth, an elastic layer) refuses one, naming it.

Python's builtin ``max``/``min`` compare and keep one operand, losing the other's label; use
``nasforge.max``/``nasforge.min`` (here :func:`max_`, :func:`min_`) for symbolic extremes.

This module is pure (no torch).
"""

from __future__ import annotations

import builtins
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.context import Declaration, Frozen, require
from nasforge.space.ranges import Range

__all__ = [
    "Expr",
    "Leaf",
    "Const",
    "Op",
    "ChoiceValue",
    "choice",
    "uniform",
    "integer",
    "max_",
    "min_",
    "as_expr",
    "is_choice",
    "symbolic",
]


class Expr:
    """A symbolic value over labelled leaves; ``evaluate(arch)`` returns its concrete value."""

    def evaluate(self, arch: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def leaves(self) -> list[Leaf]:
        """Returns the leaves this expression depends on, each once, in first-seen order."""
        raise NotImplementedError

    def labels(self) -> list[str]:
        """Returns the labels this expression depends on."""
        return [leaf.label for leaf in self.leaves()]

    def candidates(self) -> list[Any]:
        """Returns every value the expression can take, deduplicated, in first-seen order of
        the product of its leaves' candidates."""
        leaves = self.leaves()
        ranged = [leaf for leaf in leaves if leaf.domain is not None]
        if ranged:
            leaf = ranged[0]
            assert leaf.domain is not None
            raise SpaceError(
                f"a value here depends on the range {leaf.domain.describe()} (label "
                f"{leaf.declaration.label if leaf.declaration else None!r}), which has no list "
                "of candidates; this place needs listed values: use nf.choice([...]) for it"
            )
        seen: dict[Any, None] = {}
        for combo in itertools.product(*(leaf.values for leaf in leaves)):
            arch = {leaf.label: v for leaf, v in zip(leaves, combo)}
            seen.setdefault(self.evaluate(arch), None)
        return list(seen)


class Leaf(Expr):
    """A labelled value choice. Its label may be assigned after recording (automatic labels)."""

    def __init__(
        self,
        values: tuple[Any, ...],
        declaration: Declaration | None = None,
        domain: Range | None = None,
    ) -> None:
        self.values = values
        self.declaration = declaration
        self.domain = domain

    @property
    def label(self) -> str:
        if self.declaration is None or self.declaration.label is None:
            raise SpaceError("this value choice has no label yet (its space is still recording)")
        return self.declaration.label

    def evaluate(self, arch: Mapping[str, Any]) -> Any:
        try:
            return arch[self.label]
        except KeyError:
            raise ArchitectureError(f"missing label {self.label!r} in the architecture") from None

    def leaves(self) -> list[Leaf]:
        return [self]

    def __repr__(self) -> str:
        label = self.declaration.label if self.declaration else None
        if self.domain is not None:
            return f"{self.domain.describe()[:-1]}, label={label!r})"
        return f"choice({list(self.values)}, label={label!r})"


class Const(Expr):
    """A constant operand of an expression."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def evaluate(self, arch: Mapping[str, Any]) -> Any:
        return self.value

    def leaves(self) -> list[Leaf]:
        return []

    def __repr__(self) -> str:
        return repr(self.value)


class Op(Expr):
    """An operation applied to sub-expressions."""

    def __init__(self, name: str, fn: Callable[..., Any], args: Sequence[Expr]) -> None:
        self.name, self.fn, self.args = name, fn, tuple(args)

    def evaluate(self, arch: Mapping[str, Any]) -> Any:
        return self.fn(*(a.evaluate(arch) for a in self.args))

    def leaves(self) -> list[Leaf]:
        out: dict[int, Leaf] = {}
        for a in self.args:
            for leaf in a.leaves():
                out.setdefault(id(leaf), leaf)
        return list(out.values())

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.args))})"

    def __reduce__(self) -> tuple[Any, ...]:
        # operator functions pickle by name; builtins.max/min too
        return (Op, (self.name, self.fn, self.args))


def as_expr(value: object) -> Expr:
    """Returns the expression behind a choice value, or a constant for a plain value."""
    if isinstance(value, ChoiceValue):
        return value.expr
    if isinstance(value, Expr):
        return value
    return Const(value)


def is_choice(value: object) -> bool:
    """Returns whether ``value`` carries a value choice (so it may differ between architectures)."""
    return isinstance(value, ChoiceValue)


class ChoiceValue:
    """Mixin of the values ``choice`` returns while recording; ``.expr`` is the symbolic form."""

    expr: Expr

    def evaluate(self, arch: Mapping[str, Any]) -> Any:
        """Returns this value under architecture ``arch``."""
        return self.expr.evaluate(arch)

    def candidates(self) -> list[Any]:
        """Returns every value this can take over the space."""
        return self.expr.candidates()

    def labels(self) -> list[str]:
        return self.expr.labels()


def _wrap(value: Any, expr: Expr) -> Any:
    """Returns ``value`` as a choice value of its own type carrying ``expr``."""
    if type(value) is int:
        return ChoiceInt(value, expr)
    if type(value) is float:
        return ChoiceFloat(value, expr)
    if type(value) is str:
        return ChoiceStr(value, expr)
    return ChoiceObject(value, expr)


def symbolic(value: Any, expr: Expr) -> Any:
    """Returns ``value`` as a choice value carrying ``expr`` (an ``int`` subclass for an int,
    and so on), or ``value`` itself when ``expr`` depends on no choice: how code that builds its
    own expression trees (the NNI adapter, :mod:`nasforge.compat.nni`) hands one to the space's
    modules."""
    if not expr.leaves():
        return value
    return _wrap(value, expr)


def _binary(
    name: str, fn: Callable[[Any, Any], Any], reflected: bool = False
) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        if not isinstance(other, (int, float)) and not isinstance(other, ChoiceValue):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        plain = fn(_plain(a), _plain(b))
        return _wrap(plain, Op(name, fn, (as_expr(a), as_expr(b))))

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _plain(value: Any) -> Any:
    """Returns the plain builtin value behind a choice value (or ``value`` itself)."""
    if isinstance(value, ChoiceObject):
        return value.value
    if isinstance(value, _Builtin):
        return value._builtin(value)
    return value


_ARITHMETIC = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
}


class _Builtin(ChoiceValue):
    """A choice value that *is* a builtin (``_builtin``) equal to its expression's default."""

    _builtin: type

    def __new__(cls, value: Any, expr: Expr) -> _Builtin:
        # the builtin's own constructor makes the instance (``int.__new__(ChoiceInt, 3)``)
        new: Callable[..., Any] = cls._builtin.__new__
        obj: _Builtin = new(cls, value)
        obj.expr = expr
        return obj

    def __repr__(self) -> str:
        return f"{self._builtin(self)!r}~{self.expr!r}"

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (type(self), (self._builtin(self), self.expr))


class _Arithmetic(_Builtin):
    def __neg__(self) -> Any:
        return _wrap(-_plain(self), Op("neg", operator.neg, (self.expr,)))


for _name, _fn in _ARITHMETIC.items():
    setattr(_Arithmetic, f"__{_name}__", _binary(_name, _fn))
    setattr(_Arithmetic, f"__r{_name}__", _binary(_name, _fn, reflected=True))


class ChoiceInt(_Arithmetic, int):
    """An ``int`` equal to the default of its expression, carrying the expression."""

    _builtin = int


class ChoiceFloat(_Arithmetic, float):
    """A ``float`` equal to the default of its expression, carrying the expression."""

    _builtin = float


class ChoiceStr(_Builtin, str):
    """A ``str`` equal to the default of its choice, carrying the expression."""

    _builtin = str


class ChoiceObject(ChoiceValue):
    """A choice over values of other types (bool, tuple, None): not usable as the value itself;
    space-aware modules read ``.expr`` and ``.value`` (the default)."""

    def __init__(self, value: Any, expr: Expr) -> None:
        self.value, self.expr = value, expr

    def __repr__(self) -> str:
        return f"{self.value!r}~{self.expr!r}"


@overload
def choice(values: Iterable[bool], label: str | None = None) -> Any: ...
@overload
def choice(values: Iterable[int], label: str | None = None) -> int: ...
@overload
def choice(values: Iterable[float], label: str | None = None) -> float: ...
@overload
def choice(values: Iterable[str], label: str | None = None) -> str: ...
@overload
def choice(values: Iterable[Any], label: str | None = None) -> Any: ...


def choice(values: Iterable[Any], label: str | None = None) -> Any:
    """Returns a value choice over ``values``: while recording, a choice value equal to the
    first candidate; while freezing, the architecture's plain value for ``label``.

    Types: over ints, floats or strs the result is one (a choice value while recording is an
    ``int``, ``float`` or ``str`` subclass), so ``nn.Conv2d(3, choice([16, 32]), 3)`` type-checks;
    over other values (bools, tuples, None, mixed types) it is ``Any``, as while recording it is
    a :class:`ChoiceObject` standing for the value, not the value itself.

    Invariants: the same label used twice ties both places to one decision.

    Raises:
        SpaceError: no candidates, duplicate candidates, a tied label with other candidates, or a
            call outside a model space.
        ArchitectureError: (when freezing) the label is missing or its value is not a candidate.
    """
    values = tuple(values)
    if not values:
        raise SpaceError(f"choice(label={label!r}) needs at least one candidate value")
    if label is not None and not isinstance(label, str):
        raise SpaceError(f"a label must be a string, got {label!r}")
    ctx = require("choice()")
    if isinstance(ctx, Frozen):
        return ctx.resolve(label, values)
    leaf = Leaf(values)
    leaf.declaration = ctx.declare("value", values, label, leaf)
    return _wrap(leaf.declaration.values[0], leaf)


def uniform(low: float, high: float, log: bool = False, label: str | None = None) -> float:
    """Returns a continuous hyperparameter in ``[low, high]`` (log-uniform when ``log``): while
    recording, a float equal to the range's middle carrying the range; while freezing, the
    architecture's value for ``label``. Read every range of a frozen model with
    ``nf.hparams(model)``.

    Invariants: the value an architecture holds is canonical (12 significant digits), so its
    ``arch_id`` does not depend on how the value was written.

    Raises:
        SpaceError: bad bounds (``low > high``, not finite, ``log`` with ``low <= 0``), a tied
            label with another range, or a call outside a model space.
        ArchitectureError: (when freezing) the label is missing or its value out of range.
    """
    return _ranged(Range(low, high, log), "float", label)  # type: ignore[no-any-return]


def integer(low: int, high: int, step: int = 1, log: bool = False, label: str | None = None) -> int:
    """Returns an integer hyperparameter in ``low, low + step, ..., high`` (log-uniform when
    ``log``, which needs ``step=1``): as :func:`uniform`, an ``int`` while recording.

    Raises:
        SpaceError: bad bounds or step, or a call outside a model space.
        ArchitectureError: (when freezing) the label is missing, or its value off the grid.
    """
    return _ranged(Range(low, high, log, True, step), "int", label)  # type: ignore[no-any-return]


def _ranged(domain: Range, kind: Any, label: str | None) -> Any:
    if label is not None and not isinstance(label, str):
        raise SpaceError(f"a label must be a string, got {label!r}")
    ctx = require("uniform()" if kind == "float" else "integer()")
    if isinstance(ctx, Frozen):
        return ctx.resolve(label, None, domain)
    leaf = Leaf((), domain=domain)
    leaf.declaration = ctx.declare(kind, (), label, leaf, domain)
    return _wrap(domain.default, leaf)


def _extreme(name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    if len(args) == 1:
        args = tuple(args[0])
    if not any(isinstance(a, ChoiceValue) for a in args):
        return fn(*args)
    plain = fn(*(_plain(a) for a in args))
    return _wrap(plain, Op(name, fn, tuple(as_expr(a) for a in args)))


@overload
def max_(a: int, /, *args: int) -> int: ...
@overload
def max_(a: float, /, *args: float) -> float: ...
@overload
def max_(values: Iterable[int], /) -> int: ...
@overload
def max_(values: Iterable[float], /) -> float: ...
@overload
def max_(*args: Any) -> Any: ...


def max_(*args: Any) -> Any:
    """Returns the largest argument, symbolically when any argument is a value choice (ints
    give an int, floats a float, as Python's ``max``)."""
    return _extreme("max", builtins.max, args)


@overload
def min_(a: int, /, *args: int) -> int: ...
@overload
def min_(a: float, /, *args: float) -> float: ...
@overload
def min_(values: Iterable[int], /) -> int: ...
@overload
def min_(values: Iterable[float], /) -> float: ...
@overload
def min_(*args: Any) -> Any: ...


def min_(*args: Any) -> Any:
    """Returns the smallest argument, symbolically when any argument is a value choice (ints
    give an int, floats a float, as Python's ``min``)."""
    return _extreme("min", builtins.min, args)
