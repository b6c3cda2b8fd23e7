"""NNI 3.0's mutables (``nni.choice``, ``Categorical``, their arithmetic) on nasforge's space.

An NNI model space computes with *symbolic* values: ``nni.choice('c', [16, 32]) * 2`` is an
expression, not a number, and so are ``round(x)``, ``x < y`` and
``MutableExpression.condition(...)``. Code may do any of that; an expression becomes a value only
where NNI freezes it (``ensure_frozen``, a mutable layer's arguments, a ``Repeat``'s depth).
Here that is :func:`concretize`: while nasforge records a space it declares each leaf as a
decision (``nf.choice(values, label=...)``) and returns a nasforge choice value that carries the
expression (so ``Repeat`` and friends learn every value it can take); while freezing, it returns
the architecture's plain value.

Leaves map to decisions of the same label:

    Categorical            a value choice over the same values
    CategoricalMultiple    a value choice over every allowed subset (sorted lists)
    uniform, loguniform    a range (``nf.uniform``); quantized ones list their grid
    normal, qnormal        refused in one line: nasforge has no unbounded distribution

This module is pure (no torch).
"""

from __future__ import annotations

import builtins
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nasforge.compat.nni._labels import auto_label, label_scope
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.context import Frozen, Recording, current
from nasforge.space.expr import Const, Expr, Op, as_expr, symbolic
from nasforge.space.expr import choice as nf_choice
from nasforge.space.expr import uniform as nf_uniform

__all__ = [
    "Mutable",
    "LabeledMutable",
    "MutableExpression",
    "MutableSymbol",
    "Categorical",
    "CategoricalMultiple",
    "Numerical",
    "Sample",
    "uniform",
    "quniform",
    "loguniform",
    "qloguniform",
    "normal",
    "qnormal",
    "ensure_frozen",
    "concretize",
    "evaluate",
]

Sample = dict  # NNI's name for an architecture dict


def _condition(true: Any, pred: Any, false: Any) -> Any:
    return true if pred else false


def _getitem(obj: Any, key: Any) -> Any:
    return obj[key]


def _first_symbolic(*objects: Any) -> bool:
    return any(isinstance(o, Mutable) for o in objects)


class Mutable:
    """Base of NNI's mutable objects: things whose value an architecture decides."""

    def freeze(self, sample: Mapping[str, Any]) -> Any:
        """Returns this mutable's value under architecture ``sample``."""
        return evaluate(self, sample)

    def leaves(self) -> list[LabeledMutable]:
        """Returns the labelled leaves this depends on, each once."""
        raise NotImplementedError

    def simplify(self) -> dict[str, LabeledMutable]:
        """Returns label -> leaf for every leaf this depends on."""
        return {leaf.label: leaf for leaf in self.leaves()}

    def default(self) -> Any:
        """Returns the value under every leaf's default."""
        return evaluate(self, {leaf.label: leaf.default_value() for leaf in self.leaves()})


def _binop(fn: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        args = [other, self] if reflected else [self, other]
        return MutableExpression(fn, args)

    return method


class MutableExpression(Mutable):
    """Returns, when evaluated, ``function(*arguments)`` over mutables and constants: NNI's
    symbolic arithmetic (``+ - * / // % **``, comparisons, ``round``, ``abs``, indexing and the
    static ``max``, ``min``, ``condition``, ``to_int``, ``to_float``)."""

    def __class_getitem__(cls, item: Any) -> Any:  # NNI's are generic: MutableExpression[int]
        return cls

    def __init__(self, function: Callable[..., Any], arguments: Iterable[Any]) -> None:
        self.function = function
        self.arguments = list(arguments)

    def leaves(self) -> list[LabeledMutable]:
        out: dict[str, LabeledMutable] = {}
        for a in self.arguments:
            if isinstance(a, Mutable):
                for leaf in a.leaves():
                    out.setdefault(leaf.label, leaf)
        return list(out.values())

    def evaluate(self, sample: Mapping[str, Any]) -> Any:
        """Returns the expression's value under ``sample``."""
        return self.function(*(evaluate(a, sample) for a in self.arguments))

    def __repr__(self) -> str:
        name = getattr(self.function, "__name__", "expr")
        return f"{name}({', '.join(map(repr, self.arguments))})"

    # NNI's static helpers (``MutableExpression.max(a, b)``)
    @staticmethod
    def max(arg0: Any, *args: Any) -> Any:
        items = list(arg0) if not args else [arg0, *args]
        return MutableExpression(max, items) if _first_symbolic(*items) else max(items)

    @staticmethod
    def min(arg0: Any, *args: Any) -> Any:
        items = list(arg0) if not args else [arg0, *args]
        return MutableExpression(min, items) if _first_symbolic(*items) else min(items)

    @staticmethod
    def condition(pred: Any, true: Any, false: Any) -> Any:
        if _first_symbolic(pred, true, false):
            return MutableExpression(_condition, [true, pred, false])
        return true if pred else false

    @staticmethod
    def to_int(obj: Any) -> Any:
        return MutableExpression(int, [obj]) if isinstance(obj, Mutable) else int(obj)

    @staticmethod
    def to_float(obj: Any) -> Any:
        return MutableExpression(float, [obj]) if isinstance(obj, Mutable) else float(obj)

    def int(self) -> Any:
        """Returns this expression cast to int."""
        return MutableExpression(int, [self])

    def float(self) -> Any:
        """Returns this expression cast to float."""
        return MutableExpression(float, [self])

    __add__, __radd__ = _binop(operator.add), _binop(operator.add, True)
    __sub__, __rsub__ = _binop(operator.sub), _binop(operator.sub, True)
    __mul__, __rmul__ = _binop(operator.mul), _binop(operator.mul, True)
    __truediv__, __rtruediv__ = _binop(operator.truediv), _binop(operator.truediv, True)
    __floordiv__, __rfloordiv__ = _binop(operator.floordiv), _binop(operator.floordiv, True)
    __mod__, __rmod__ = _binop(operator.mod), _binop(operator.mod, True)
    __pow__, __rpow__ = _binop(operator.pow), _binop(operator.pow, True)
    __lt__, __le__ = _binop(operator.lt), _binop(operator.le)
    __gt__, __ge__ = _binop(operator.gt), _binop(operator.ge)
    __ne__ = _binop(operator.ne)  # type: ignore[assignment]
    __getitem__ = _binop(_getitem)

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return True if self is other else MutableExpression(operator.eq, [self, other])

    __hash__ = object.__hash__

    def __neg__(self) -> Any:
        return MutableExpression(operator.neg, [self])

    def __abs__(self) -> Any:
        return MutableExpression(abs, [self])

    def __round__(self, ndigits: Any = None) -> Any:
        return MutableExpression(round, [self] if ndigits is None else [self, ndigits])

    def __floor__(self) -> Any:
        return MutableExpression(math.floor, [self])

    def __ceil__(self) -> Any:
        return MutableExpression(math.ceil, [self])

    def __bool__(self) -> builtins.bool:
        raise SpaceError(
            f"an NNI expression ({self!r}) was used as a truth value (an if, and, or); as in "
            "NNI, use MutableExpression.condition(pred, a, b) or max/min, or ensure_frozen(x) "
            "for its value in this architecture"
        )

    def __index__(self) -> builtins.int:
        raise SpaceError(
            f"an NNI expression ({self!r}) was used as an int (range(), a size); as in NNI, "
            "pass it to a Mutable layer, or take its value with ensure_frozen(x)"
        )


MutableSymbol = MutableExpression


class LabeledMutable(MutableExpression):
    """A leaf: one labelled decision."""

    label: str

    def __init__(self) -> None:
        super().__init__(_identity, [])

    def leaves(self) -> list[LabeledMutable]:
        return [self]

    def evaluate(self, sample: Mapping[str, Any]) -> Any:
        if self.label not in sample:
            raise ArchitectureError(f"missing label {self.label!r} in the architecture")
        return sample[self.label]

    def default_value(self) -> Any:
        """Returns the value before any search."""
        raise NotImplementedError

    def declare(self) -> Any:
        """Returns this leaf's nasforge value in the current space context: a choice value
        while recording (the decision declared), the architecture's plain value when frozen."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(label={self.label!r})"


def _identity(x: Any) -> Any:
    return x


class Categorical(LabeledMutable):
    """One of ``values`` (``nni.choice(label, values)``); a value choice of the same label."""

    def __init__(
        self,
        values: Iterable[Any],
        *,
        weights: list[float] | None = None,
        default: Any = None,
        label: str | None = None,
    ) -> None:
        super().__init__()
        self.values = list(values)
        if not self.values:
            raise SpaceError(f"Categorical {label!r} has no values")
        self.label = auto_label(label)
        self.weights = weights
        self._default = default

    def default_value(self) -> Any:
        return self.values[0] if self._default is None else self._default

    def declare(self) -> Any:
        return nf_choice(self.values, label=self.label)

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"Categorical({self.values!r}, label={self.label!r})"


class CategoricalMultiple(LabeledMutable):
    """A subset of ``values`` (``n_chosen`` of them, or any number when None), as a sorted
    list; a value choice over every such subset."""

    def __init__(
        self,
        values: Iterable[Any],
        *,
        n_chosen: int | None = None,
        weights: list[float] | None = None,
        default: Any = None,
        label: str | None = None,
    ) -> None:
        super().__init__()
        self.values = list(values)
        if not self.values:
            raise SpaceError(f"CategoricalMultiple {label!r} has no values")
        if n_chosen is not None and not 1 <= n_chosen <= len(self.values):
            raise SpaceError(
                f"CategoricalMultiple {label!r}: n_chosen must be in 1..{len(self.values)} or "
                f"None, got {n_chosen!r}"
            )
        with label_scope(label) as scope:
            self.label = scope.name
        self.n_chosen = n_chosen
        self.weights = weights
        self._default = default

    def subsets(self) -> list[list[Any]]:
        """Returns every allowed subset, in NNI's grid order."""
        sizes = [self.n_chosen] if self.n_chosen is not None else range(len(self.values) + 1)
        return [list(c) for r in sizes for c in itertools.combinations(self.values, r)]

    def default_value(self) -> Any:
        return self.values[: self.n_chosen] if self._default is None else self._default

    def declare(self) -> Any:
        return nf_choice(self.subsets(), label=self.label)

    def __repr__(self) -> str:
        return (
            f"CategoricalMultiple({self.values!r}, n_chosen={self.n_chosen}, label={self.label!r})"
        )


class Numerical(LabeledMutable):
    """A number from a distribution (``nni.uniform``, ``loguniform``, their quantized forms);
    a range decision, or the list of a quantized range's grid."""

    def __init__(
        self,
        low: float = -math.inf,
        high: float = math.inf,
        *,
        mu: float | None = None,
        sigma: float | None = None,
        log_distributed: bool = False,
        quantize: float | None = None,
        default: float | None = None,
        label: str | None = None,
    ) -> None:
        super().__init__()
        self.low, self.high, self.mu, self.sigma = low, high, mu, sigma
        self.log_distributed, self.quantize = log_distributed, quantize
        self.label = auto_label(label)
        self._default = default

    def _grid(self) -> list[float]:
        assert self.quantize is not None
        n = int(math.floor((self.high - self.low) / self.quantize + 1e-9))
        grid = {min(max(round(self.low / self.quantize + i) * self.quantize, self.low), self.high)
                for i in range(n + 1)} | {self.low, self.high}  # fmt: skip
        return sorted(grid)

    def default_value(self) -> Any:
        if self._default is not None:
            return self._default
        if self.mu is not None:
            return self.mu
        if self.log_distributed:
            return math.sqrt(self.low * self.high)
        return (self.low + self.high) / 2

    def declare(self) -> Any:
        if self.mu is not None or not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise SpaceError(
                f"NNI construct not mapped: {self!r} (nni.normal/qnormal) has unbounded "
                "support, and nasforge decisions are lists or bounded ranges; use "
                f"nni.uniform/nni.choice for label {self.label!r}"
            )
        if self.quantize is not None:
            grid = self._grid()
            if len(grid) > 10_000:
                raise SpaceError(
                    f"NNI construct not mapped: {self!r} quantizes to {len(grid)} values; use a "
                    "coarser quantize or nni.uniform"
                )
            return nf_choice(grid, label=self.label)
        return nf_uniform(self.low, self.high, log=self.log_distributed, label=self.label)

    def __repr__(self) -> str:
        return f"Numerical({self.low}, {self.high}, label={self.label!r})"


def uniform(label: str, low: float, high: float) -> Numerical:
    """Returns a number uniform in ``[low, high]``."""
    return Numerical(low, high, label=label)


def quniform(label: str, low: float, high: float, quantize: float) -> Numerical:
    """Returns a number of ``[low, high]`` rounded to multiples of ``quantize``."""
    return Numerical(low, high, quantize=quantize, label=label)


def loguniform(label: str, low: float, high: float) -> Numerical:
    """Returns a number log-uniform in ``[low, high]``."""
    return Numerical(low, high, log_distributed=True, label=label)


def qloguniform(label: str, low: float, high: float, quantize: float) -> Numerical:
    """Returns a log-uniform number of ``[low, high]`` rounded to multiples of ``quantize``."""
    return Numerical(low, high, log_distributed=True, quantize=quantize, label=label)


def normal(label: str, mu: float, sigma: float) -> Numerical:
    """Returns a normal number (refused when a space uses it: see :meth:`Numerical.declare`)."""
    return Numerical(mu=mu, sigma=sigma, label=label)


def qnormal(label: str, mu: float, sigma: float, quantize: float) -> Numerical:
    """Returns a quantized normal number (refused like :func:`normal`)."""
    return Numerical(mu=mu, sigma=sigma, quantize=quantize, label=label)


def evaluate(value: Any, sample: Mapping[str, Any]) -> Any:
    """Returns ``value`` under architecture ``sample`` (constants as they are; lists, tuples
    and dicts of mutables item by item)."""
    if isinstance(value, MutableExpression):
        return value.evaluate(sample)
    if isinstance(value, (list, tuple)):
        return type(value)(evaluate(v, sample) for v in value)
    if isinstance(value, dict):
        return {k: evaluate(v, sample) for k, v in value.items()}
    return value


def _nf_expr(value: Any, leaves: Mapping[str, Any]) -> Expr:
    """Returns the nasforge expression of ``value``, its leaves taken from ``leaves`` (label ->
    the nasforge choice value declared for it)."""
    if isinstance(value, LabeledMutable):
        return as_expr(leaves[value.label])
    if isinstance(value, MutableExpression):
        fn = value.function
        return Op(getattr(fn, "__name__", "fn"), fn, [_nf_expr(a, leaves) for a in value.arguments])
    return Const(value)


def concretize(value: Any) -> Any:
    """Returns what an NNI mutable stands for in the current nasforge context: recording, a
    nasforge choice value carrying its expression (every leaf declared as a decision);
    frozen, the architecture's value; outside any space, NNI's dry-run default. Anything else
    is returned as it is.

    Raises:
        SpaceError: a leaf cannot be mapped (see the module's table).
        ArchitectureError: (frozen) a leaf's label is missing or its value not a candidate.
    """
    if not isinstance(value, Mutable):
        return value
    ctx = current()
    leaves = value.leaves()
    if ctx is None:
        return value.default()
    if isinstance(ctx, Recording):
        for leaf in leaves:  # a width declared as a layer decision is a value from here on
            first = ctx.first(leaf.label)
            if first is not None and first.kind == "layer":
                first.kind = "value"
    declared = {leaf.label: leaf.declare() for leaf in leaves}
    if isinstance(ctx, Frozen):
        return evaluate(value, declared)
    assert isinstance(ctx, Recording)
    if isinstance(value, LabeledMutable):
        return declared[value.label]
    plain = evaluate(value, {k: _plain(v) for k, v in declared.items()})
    return symbolic(plain, _nf_expr(value, declared))


def _plain(v: Any) -> Any:
    """Returns the plain default behind a nasforge choice value."""
    from nasforge.space.expr import ChoiceValue

    if isinstance(v, ChoiceValue):
        leaf = v.expr.leaves()[0]
        return leaf.domain.default if leaf.domain is not None else leaf.values[0]
    return v


def ensure_frozen(
    mutable: Any, *, sample: Mapping[str, Any] | None = None, retries: int = 0
) -> Any:
    """Returns the value of ``mutable`` (NNI's ``ensure_frozen``): under ``sample`` when given,
    else as :func:`concretize` gives it (a choice value while nasforge records the space)."""
    if sample is not None:
        return evaluate(mutable, sample)
    return concretize(mutable)
