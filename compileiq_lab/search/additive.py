"""A Bayesian additive model of one objective over control states: each state's effect, a config's chance to improve."""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import log_ndtr, ndtri
from scipy.stats import rankdata

from compileiq_lab.search.states import bucketed

__all__ = ["AdditiveModel", "normal_scores"]


def normal_scores(y: np.ndarray) -> np.ndarray:
    """Each score's rank (ties share their mean rank) as a standard normal quantile: an outlier (a config built at
    ``-O0``, ten times slower) weighs as one rank does, and equal scores stay equal."""
    y = np.asarray(y, dtype=float).reshape(-1)
    return np.asarray(ndtri((rankdata(y) - 0.5) / len(y)))


class AdditiveModel:
    """One objective's score as a sum of one effect per control state, fitted by Bayesian linear regression.

    Each control state (absent, or one of the control's values; a wide range's values bucketed into at most
    ``MAX_STATES``) has an effect with a Gaussian prior; the score modelled is each compiled config's normal score
    (``normal_scores``: ranks, so the model needs no scale and no outlier handling). A state tried once, in any
    context, teaches its effect for every config that has it: a register cap seen beside other controls' values is
    known beside all of them, where a density of good configs learns it only once a good config holds it. What the
    sum leaves unexplained (a control that matters only beside another's value) is the ``noise`` term.

    A config's chance of improving is the posterior predictive chance that its normal score lies below the best so
    far: a state never tried keeps its prior's spread, so it is neither ruled out nor preferred blindly. Measured
    on the tune half of bench/tables and not kept (bench/results/variants_additive_acq.md, one objective, seeds
    400-439, paired by seed, catalog / plain space): every pair of states as a feature too (prior variance 0.5:
    0.99 / 1.00 times the calls; 0.2: 1.03 / 1.00), ranking by expected improvement (0.99 / 1.03) or by a posterior
    draw (1.07 / 1.05), and a smoothness prior linking an ordered control's neighbouring values (length 1 or 2
    positions: 1.03 / 1.05, 0.98 / 1.02; bench/results/variants_additive_smooth.md), all within noise.

    Args:
        n_states: Per control, its number of states (see ``compileiq_lab.search.states.states_of``).
        prior: Prior variance of a config's summed effects (spread evenly over the controls); default ``PRIOR``.
        noise: Variance of what the sum leaves unexplained, in normal-score units; default ``NOISE``.
    """

    #: States of a control beyond this are bucketed (a fit costs the cube of the summed states).
    MAX_STATES = 16
    #: The default ``prior`` and ``noise`` variances. On the tune half of bench/tables (one objective, seeds 400-439,
    #: paired by seed, catalog / plain; bench/results/variants_priors.md) a PRIOR of 3 took 1.00 / 1.03 times the
    #: calls and 0.3 1.02 / 1.02 (noise); a NOISE of 0.03 or 0.3 was noise too (variants_additive_settings.md).
    PRIOR = 1.0
    NOISE = 0.1

    def __init__(self, n_states: np.ndarray, prior: float | None = None, noise: float | None = None) -> None:
        prior = self.PRIOR if prior is None else prior
        noise = self.NOISE if noise is None else noise
        self.k = np.asarray(n_states, dtype=np.int64)
        if not (prior > 0 and noise > 0):
            raise ValueError(f"AdditiveModel: prior and noise must be variances > 0, but got prior={prior!r}, "
                             f"noise={noise!r}; pass positive numbers (defaults 1.0 and 0.1)")
        self.kb = np.minimum(self.k, self.MAX_STATES)
        self.offset = np.concatenate([[0], np.cumsum(self.kb)[:-1]]).astype(np.int64)
        self.d = int(self.kb.sum())
        self.prior, self.noise = prior / max(1, len(self.k)), noise
        self._post: tuple[np.ndarray, np.ndarray, float] | None = None

    def _index(self, S: np.ndarray) -> np.ndarray:
        """Per config, the column of each control's (bucketed) state in the one-hot design."""
        return np.asarray(self.offset + bucketed(S, self.k, self.kb))

    @property
    def fitted(self) -> bool:
        """Whether ``fit`` has had at least two compiled configs."""
        return self._post is not None

    def fit(self, S: np.ndarray, y: np.ndarray) -> None:
        """Fit on the compiled configs' states (rows of ``S``) and scores ``y`` (minimised); fewer than two leave
        the model unfitted."""
        y = np.asarray(y, dtype=float).reshape(-1)
        if len(y) < 2:
            self._post = None
            return
        z = normal_scores(y)
        idx = self._index(S)
        c = idx.shape[1]
        pairs = (idx[:, :, None] * self.d + idx[:, None, :]).ravel()  # how often each two states meet
        gram = np.bincount(pairs, minlength=self.d * self.d).reshape(self.d, self.d).astype(float)
        precision = gram / self.noise + np.eye(self.d) / self.prior
        factor = cho_factor(precision)
        xz = np.bincount(idx.ravel(), weights=np.repeat(z, c), minlength=self.d)
        mean = cho_solve(factor, xz / self.noise)
        cov = cho_solve(factor, np.eye(self.d))
        self._post = (mean, cov, float(z.min()))

    def log_improve(self, S: np.ndarray) -> np.ndarray:
        """Per config (rows of ``S``), the log chance that its score lies below the best so far (0 while the model is
        not fitted)."""
        if self._post is None:
            return np.zeros(len(S))
        mean, cov, best = self._post
        idx = self._index(S)
        mu = mean[idx].sum(axis=1)
        var = cov[idx[:, :, None], idx[:, None, :]].sum(axis=(1, 2)) + self.noise
        return np.asarray(log_ndtr((best - mu) / np.sqrt(var)))
