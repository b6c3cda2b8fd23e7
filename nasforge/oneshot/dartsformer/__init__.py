"""DARTSformer: reversible one-shot search of an encoder-decoder (seq2seq) space, and the
``dartsformer`` kind of ``nasforge run``.

:mod:`~nasforge.oneshot.dartsformer.search` is the search loop (Algorithm 2, ``rev_search``);
:mod:`~nasforge.oneshot.dartsformer.space` the paper's seq2seq space built from the operations
of :mod:`~nasforge.oneshot.dartsformer.ops`; :mod:`~nasforge.oneshot.dartsformer.train`
retrains and decodes a found Transformer (BLEU); :mod:`~nasforge.oneshot.dartsformer.runner`
runs the whole as a recorded run (imported by :mod:`nasforge.runners`, not here, so that
importing the search does not import the run record's runner).
"""

from nasforge.oneshot.dartsformer.search import (
    RevSearchConfig,
    RevSearchResult,
    inverse_sqrt,
    rev_search,
    rev_step,
)

__all__ = ["RevSearchConfig", "RevSearchResult", "inverse_sqrt", "rev_search", "rev_step"]
