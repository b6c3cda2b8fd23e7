"""Evaluators: what a trial runs. An evaluator gets an architecture (and the space to freeze it
in) plus a ``report`` callable, and returns the trial's final metrics.

    FunctionEvaluator    wraps ``def evaluate(model, report) -> float | dict``: the user trains
                         the frozen model however they like, calls ``report(value)`` after each
                         epoch (intermediate metrics; this is where early stopping can happen)
                         and returns the final metric(s)
    ClassificationEvaluator / TabularEvaluator live in their own modules.

A returned float is named after the experiment's metric; a dict may carry several metrics
(accuracy, latency, params, FLOPs) and must contain the experiment's metric.

An evaluator that knows what it returns declares it in ``metric_names``; the experiment then
checks the metric, constraints and second objective it names before anything runs
(:func:`check_metric_names`). For one that does not, the engine checks the first finished
trial's metrics (:func:`missing_metric`) and stops the run there.
"""

from __future__ import annotations

import abc
import ast
import inspect
import logging
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from nasforge.errors import ConfigError, did_you_mean

__all__ = [
    "BaseEvaluator",
    "FunctionEvaluator",
    "Report",
    "get_evaluator",
    "check_metric_names",
    "missing_metric",
    "MAX_METRICS",
    "MAX_METRIC_NAME",
]

#: the most metrics one report or one result may hold (a trial over it fails, naming it):
#: a record, and every view of it, stays of a size a reader can show
MAX_METRICS = 1000
#: the longest metric name, in characters
MAX_METRIC_NAME = 200

log = logging.getLogger(__name__)


class EarlyStop(BaseException):  # noqa: N818 - control flow, not an error
    """Raised inside ``report`` when the stopper ends a trial; BaseException so that a user's
    ``except Exception`` around a training loop does not swallow it."""


Report = Callable[..., None]


class BaseEvaluator(abc.ABC):
    """Returns the final metrics of one architecture; runs inside a worker.

    Invariants: ``evaluate`` gets an architecture already validated against the space; it must
    return a finite float or a mapping of names to finite floats. ``check`` runs once in the
    engine before the first trial and raises ConfigError for anything detectable up front.
    """

    #: True when ``evaluate`` needs a model space that can be frozen into a model.
    needs_model: bool = True
    #: The metric an experiment optimises when it names none.
    default_metric: str = "default"
    #: The names of the metrics ``evaluate`` returns, when known (a class or instance
    #: attribute), or a mapping of each name to its type (``{"accuracy": float}``: a run that
    #: optimises a metric declared as text then fails before training); None: not declared,
    #: so the engine checks the first trial's metrics instead. A subclass that returns other
    #: metrics than its base sets its own.
    metric_names: tuple[str, ...] | Mapping[str, type] | None = None
    #: The model the last ``evaluate`` built, when it built one (a torch module): the trial
    #: saves its weights as the checkpoint, then clears it.
    last_model: Any = None

    def check(self) -> None:  # noqa: B027 - optional hook
        """Raises ConfigError when the evaluator is misconfigured (default: nothing to check)."""

    def prepare(self, space: Any) -> None:  # noqa: B027 - optional hook
        """Returns None after loading, once per process, what every trial needs (a data set,
        heavy imports): the pool calls it in the engine's process before its children fork,
        Ray once per worker process (``nasforge.engine.warm``); default: nothing."""

    @abc.abstractmethod
    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> Any:
        """Returns the final metric (float) or metrics (dict) of ``arch``."""

    def config(self) -> dict[str, Any]:
        """Returns plain data describing the evaluator (stored with the experiment)."""
        return {"type": type(self).__name__}

    def reseeded(self, repeat: int) -> BaseEvaluator | None:
        """Returns an evaluator that trains as this one does but with the ``repeat``-th other
        seed (``repeat`` >= 1; the same for the same ``repeat``), or None when this one cannot
        train otherwise (the default: a function that seeds itself would only repeat its
        training). The engine trains an architecture's ``repeat``-th retraining with it
        (``retrain_duplicates``), and a two-stage search confirms its finalists so."""
        return None


def _returns_a_value(fn: Callable[..., Any]) -> bool | None:
    """Returns whether the function's source has a ``return <value>`` (None: source unknown)."""
    if getattr(fn, "__name__", "") == "<lambda>":
        return True
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    func = next(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
        None,
    )
    if func is None:
        return None

    def walk(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            # returns of nested functions or classes are not this function's
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Return) and child.value is not None:
                if not (isinstance(child.value, ast.Constant) and child.value.value is None):
                    return True
            if walk(child):
                return True
        return False

    return walk(func)


class FunctionEvaluator(BaseEvaluator):
    """Returns what a user function ``fn(model, report)`` returns for the frozen architecture.

    When the experiment's space is a plain ``SearchSpace`` (no model to build, e.g. a tabular
    benchmark), ``fn`` receives the architecture dict instead of a model.

    Raises:
        ConfigError: ``fn`` is not callable, does not take two arguments, or never returns a
            value (checked on its source before any trial starts).
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise ConfigError(f"an evaluator function must be callable, got {fn!r}")
        self.fn = fn

    def check(self) -> None:
        """Raises ConfigError for a wrong signature or a function that returns nothing."""
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):  # builtins without a signature
            sig = None
        if sig is not None:
            try:
                sig.bind(None, None)
            except TypeError as exc:
                raise ConfigError(
                    f"evaluator {name}{sig} must accept two arguments (model, report): {exc}"
                ) from exc
        if _returns_a_value(self.fn) is False:
            raise ConfigError(
                f"evaluator {name} never returns a value; it must return the final metric "
                "(a float) or a dict of metrics, e.g. `return accuracy`"
            )

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> Any:
        """Returns ``fn(model, report)`` (or ``fn(arch, report)`` for a plain search space)."""
        if hasattr(space, "freeze"):
            from nasforge.space import freeze

            model = freeze(space, arch)
            self.last_model = model
            return self.fn(model, report)
        return self.fn(arch, report)

    def config(self) -> dict[str, Any]:
        """Returns plain data naming the function."""
        fn = self.fn
        return {
            "type": "function",
            "function": f"{fn.__module__}.{fn.__qualname__}"
            if hasattr(fn, "__qualname__")
            else repr(fn),
        }


def get_evaluator(obj: BaseEvaluator | Callable[..., Any]) -> BaseEvaluator:
    """Returns an evaluator: instances pass through, a callable is wrapped.

    Raises:
        ConfigError: ``obj`` is neither.
    """
    if isinstance(obj, BaseEvaluator):
        return obj
    if callable(obj):
        return FunctionEvaluator(obj)
    raise ConfigError(
        f"evaluator must be a BaseEvaluator or a function (model, report) -> metric, got "
        f"{type(obj).__name__}"
    )


def as_metrics(value: Any, metric: str, require: bool = True) -> dict[str, float]:
    """Returns an evaluator's return value (or a report) as a dict of floats named after
    ``metric`` if bare.

    Raises:
        TypeError / ValueError: nothing returned, the metric missing, a non-number, more
            than :data:`MAX_METRICS` metrics or a name longer than :data:`MAX_METRIC_NAME`
            characters; the trial runner turns these into a failed trial with the message.
    """
    if value is None:
        raise ValueError(
            "the evaluator returned None; return the final metric (a float) or a dict of metrics"
        )
    if isinstance(value, Mapping):
        if len(value) > MAX_METRICS:
            raise ValueError(
                f"{len(value)} metrics in one result; at most {MAX_METRICS} are kept per "
                "report or result (MAX_METRICS): return the ones the search needs, and save "
                "the rest as an artifact"
            )
        out = {}
        for k, v in value.items():
            if len(str(k)) > MAX_METRIC_NAME:
                raise ValueError(
                    f"metric name {str(k)[:40]!r}... has {len(str(k))} characters; at most "
                    f"{MAX_METRIC_NAME} are allowed (MAX_METRIC_NAME): name it shorter"
                )
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                and not hasattr(v, "__float__")
            ):
                raise TypeError(f"metric {k!r} is {v!r}; metrics must be numbers")
            out[str(k)] = float(v)
        if require and metric not in out:
            raise ValueError(
                f"the evaluator returned metrics {sorted(out)} but the experiment optimises "
                f"{metric!r}; return it or set metric= to one of them"
            )
        return out
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise TypeError(f"the evaluator returned {value!r}; expected a float or a dict")
    return {metric: float(value)}


def check_metric_names(evaluator: BaseEvaluator, wanted: Mapping[str, str]) -> None:
    """Returns None when the evaluator declares no metrics or declares every name in
    ``wanted`` (metric name -> the setting naming it: ``metric``, ``constraints``,
    ``second_objective``).

    Raises:
        ConfigError: a wanted name is not declared; one line with the closest declared names.
    """
    declared = evaluator.metric_names
    if declared is None:
        return
    types = declared if isinstance(declared, Mapping) else {}
    for name, setting in wanted.items():
        kind = types.get(name)
        if isinstance(kind, type) and (kind is bool or not issubclass(kind, (int, float))):
            raise ConfigError(
                f"{type(evaluator).__name__}'s metric {name!r} is declared {kind.__name__} "
                f"(named by {setting}); a run ranks and constrains numbers: name a numeric "
                "metric (nothing was run)"
            )
        if name not in declared:
            hint = did_you_mean(name, list(declared))
            raise ConfigError(
                f"{type(evaluator).__name__} returns no metric {name!r} (named by {setting}); "
                f"it returns {', '.join(declared)}; {hint + ' ' if hint else ''}"
                f"fix {setting} (nothing was run)"
            )


def missing_metric(
    trial: int, metrics: Mapping[str, float], wanted: Mapping[str, str]
) -> str | None:
    """Returns a one-line message when a finished trial's ``metrics`` lack a name in ``wanted``
    (metric name -> the setting naming it), else None."""
    for name, setting in wanted.items():
        if name not in metrics:
            hint = did_you_mean(name, sorted(metrics))
            return (
                f"trial {trial} returned metrics {sorted(metrics)} but no {name!r} (named by "
                f"{setting}); {hint + ' ' if hint else ''}the run stopped at this first such "
                f"trial: fix {setting}, or return {name!r} from the evaluator"
            )
    return None
