"""Maximisation of the relaxed ELBO over the block-wise convex weights (docs/design.md §6.6-6.8).

Optimisers (``AggregationConfig.optimizer``):

``"projected-adaptive"`` (default)
    Each iteration draws M fresh tuples, computes the gradient and the block curvature, and takes a
    Newton step *in the tangent space of each block simplex*: it maximises ``g.d - d.B.d/2`` subject
    to ``sum_s d_s = 0``, which removes the component of the gradient common to all silos of a block
    BEFORE the scaling (the trap of docs/design.md §6.8: scaling uncentred gradients moves every weight by
    the same amount, which the projection then cancels). The curvature B is the exact Hessian of
    objective (a) and the EM (complete-data) curvature of (b), so the step is scale-free: no step size
    to tune, whatever the number of rows. A fraction-to-boundary rule keeps every weight positive, a
    Robbins-Monro factor ``min(1, kappa / t)`` averages out the minibatch noise, then the weights are
    projected (Duchi et al. with the floor).
``"projected-sgd"``
    The paper's plain method: per-entry gradient step of size ``eta_0 / (n sqrt(t))`` in the full space,
    block averaging (a step ``eta / m_b`` on the tied weight) and Duchi projection with the floor;
    ``eta_0 = step_size / 0.02`` and n is the total number of rows. Slow, as the paper reports.
``"exponentiated"``
    Mirror ascent on each block simplex: ``w <- w exp(eta g~) / Z`` with the centred gradient g~
    normalised by its running root-mean-square (RMSprop on the tangent gradient), ``eta = 5 step_size``.
``"softmax-lbfgs"``
    Softmax parameterisation of each block (with the floor) and L-BFGS (scipy) on the sample-average
    relaxed ELBO of the fixed evaluation tuples.

Stopping rules (``AggregationConfig.stop``), on the relaxed ELBO of the fixed evaluation tuples:

``"absolute"`` (default, the paper's)
    Stop when the ELBO changes by less than ``tol`` between two iterations.
``"plateau"`` (scale-aware)
    Stop when the gain over the last ``_PLATEAU_WINDOW`` iterations is below ``tol`` or below
    ``_PLATEAU_Z`` standard errors of the paired per-tuple differences (the same tuples evaluated at both
    iterates), i.e. when the optimiser no longer improves the objective by more than its Monte Carlo
    resolution. The ELBO grows with the number of rows (about 1e6-1e7 for 290,000 rows) and so do the
    changes its minibatch-driven iterates make: a fixed 0.1 is then met by chance on one lucky iteration, or
    not for hundreds of iterations; a standard error scales with the data by construction.

Every run also stops after ``max_iter`` iterations; the best evaluated iterate is returned.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

# a dependency of scikit-learn, hence always installed with vcmc
from threadpoolctl import ThreadpoolController

from vcmc._rng import as_generator
from vcmc.aggregation.elbo import BlockCurvature, Evaluation, Objective, Tuples, evaluation_tuples
from vcmc.aggregation.weights import project_simplex
from vcmc.config import AggregationConfig
from vcmc.exceptions import ConfigError

# Robbins-Monro factor of the Newton steps: full steps for the first KAPPA iterations, then 1/t decay so
# the iterate averages the minibatch optima instead of jumping between them
_KAPPA = 3.0
# fraction of the distance to 0 a single step may cover (keeps the log-barrier finite)
_TO_BOUNDARY = 0.9
# "plateau" stopping rule: the ELBO gain over this many iterations is compared with _PLATEAU_Z standard
# errors of its per-tuple differences on the evaluation tuples
_PLATEAU_WINDOW = 10
_PLATEAU_Z = 2.0


@dataclass
class RunOutput:
    """Result of optimising R starts.

    Attributes
    ----------
    blocks : ndarray of shape (R, n_blocks, S)
        Best evaluated weights of each start.
    value : ndarray of shape (R,)
        Relaxed ELBO of ``blocks`` on the evaluation tuples.
    trace : list of ndarray
        Per start, the ELBO of each evaluated iteration.
    n_iter : ndarray of shape (R,), int
    converged : ndarray of shape (R,), bool
    """

    blocks: np.ndarray
    value: np.ndarray
    trace: list
    n_iter: np.ndarray
    converged: np.ndarray


def newton_direction(objective: Objective, blocks: np.ndarray, grad: np.ndarray, curv: BlockCurvature):
    """Tangent-space Newton direction per block: argmax ``g.d - d.B.d/2`` subject to ``sum_s d_s = 0``.

    Solved in closed form on each block's present silos, with one batched linear solve per group of
    blocks of equal size: ``d = B^-1 (g - lambda e)``, ``lambda = e.B^-1 g / e.B^-1 e`` (silos outside a
    block keep d = 0).
    """
    s = objective.layout.n_silos
    d = np.zeros_like(grad)
    for blk, silos, mat in curv.groups:             # a loop over the distinct block sizes
        k = silos.shape[1]
        eye = np.eye(k)
        # a tiny ridge keeps blocks with a flat direction solvable (e.g. one cluster: every silo's pi is 1
        # and the pi block has neither curvature nor gradient along the tangent space); its scale is the
        # mean diagonal of the S x S system where the silos outside the block have unit rows
        diag = (np.trace(mat, axis1=-2, axis2=-1) + (s - k)) / s
        bm = mat + (1e-10 * diag + 1e-300)[..., None, None] * eye
        g = grad[:, blk[:, None], silos]                                    # (R, B, k)
        sol = np.linalg.solve(bm, np.stack([g, np.ones_like(g)], axis=-1))  # (R, B, k, 2)
        lam = np.sum(sol[..., 0], axis=-1) / np.sum(sol[..., 1], axis=-1)
        d[:, blk[:, None], silos] = sol[..., 0] - lam[..., None] * sol[..., 1]
    # fraction to the boundary: no weight may lose more than 90% of itself in one step
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d < 0, -_TO_BOUNDARY * blocks / d, np.inf)
    tau = np.minimum(1.0, ratio.min(axis=-1, keepdims=True))
    return d * tau


def _centre(grad: np.ndarray, mask: np.ndarray) -> np.ndarray:
    k = mask.sum(axis=-1, keepdims=True)
    return np.where(mask, grad - grad.sum(axis=-1, keepdims=True) / k, 0.0)


class _Stepper:
    """One optimiser's update rule for R starts at once."""

    def __init__(self, objective: Objective, config: AggregationConfig, n_starts: int):
        self.obj = objective
        self.cfg = config
        self.kind = config.optimizer
        lay = objective.layout
        self.mask = lay.mask
        if self.kind == "projected-sgd":
            k = np.asarray(lay.n_modalities)
            width_prof = np.tile(k, lay.n_clusters) if lay.tie == "per_block" else np.full(
                lay.n_clusters, k.sum())
            self.width = np.concatenate([[lay.n_clusters], width_prof]).astype(np.float64)
            self.n_total = float(np.sum(objective.matched.n_rows))
        if self.kind == "exponentiated":
            self.sq = np.zeros((n_starts, lay.n_blocks, lay.n_silos))
        self.want = 2 if self.kind == "projected-adaptive" else 1

    def step(self, blocks: np.ndarray, ev, t: int, idx: np.ndarray) -> np.ndarray:
        floor = self.cfg.floor
        if self.kind == "projected-adaptive":
            d = newton_direction(self.obj, blocks, ev.grad, ev.curv)
            new = blocks + min(1.0, _KAPPA / t) * d
        elif self.kind == "projected-sgd":
            eta = (self.cfg.step_size / 0.02) / (self.n_total * np.sqrt(t))
            new = blocks + eta * ev.grad / self.width[None, :, None]
        elif self.kind == "exponentiated":
            g = _centre(ev.grad, self.mask)
            self.sq[idx] = 0.9 * self.sq[idx] + 0.1 * g ** 2
            scale = np.sqrt(self.sq[idx] / (1.0 - 0.9 ** t)) + 1e-12
            logw = np.log(np.where(self.mask, np.maximum(blocks, 1e-300), 1.0))
            logw = logw + 5.0 * self.cfg.step_size * g / scale
            logw = np.where(self.mask, logw - logw.max(axis=-1, keepdims=True), -np.inf)
            e = np.exp(logw)
            new = e / e.sum(axis=-1, keepdims=True)
        else:  # pragma: no cover - guarded by AggregationConfig
            raise ConfigError(f"unknown optimizer {self.kind!r}")
        return project_simplex(new, self.mask[None], floor)


def run_starts(objective: Objective, init: np.ndarray, config: AggregationConfig, rng=None, *,
               eval_tuples: Tuples, n_iter: int | None = None, evaluate_each: bool = True) -> RunOutput:
    """Optimise R starts together (one batched evaluation per iteration = one round for objective (b)).

    Parameters
    ----------
    objective : Objective
    init : ndarray of shape (R, n_blocks, S)
        Starting weights (projected with the floor first).
    config : AggregationConfig
    rng : int, Generator or None
        Stream of the minibatches of tuples.
    eval_tuples : Tuples
        Fixed evaluation tuples (common random numbers across iterations and starts).
    n_iter : int, optional
        Iterations (default ``config.max_iter``).
    evaluate_each : bool
        Evaluate the ELBO on ``eval_tuples`` every iteration (piggybacked on the gradient round) and stop
        each start by the tolerance rule; if False, run exactly ``n_iter`` iterations and evaluate once
        at the end (the design strategy: few rounds).
    """
    # the BLAS calls of an iteration are tiny (products of a few thousand numbers, 30 x 30 solves): with
    # several BLAS threads on a busy machine each call waits for threads to wake (measured: a 200 x 4,160
    # matrix-vector product 0.1 ms on one thread, 16 ms with two threads on a loaded 2-core machine)
    with _blas_controller().limit(limits=1, user_api="blas"):
        if config.optimizer == "softmax-lbfgs":
            return _run_lbfgs(objective, init, config, eval_tuples=eval_tuples, n_iter=n_iter)
        return _run_projected(objective, init, config, rng, eval_tuples=eval_tuples, n_iter=n_iter,
                              evaluate_each=evaluate_each)


@functools.cache
def _blas_controller() -> ThreadpoolController:
    """One scan of the loaded BLAS libraries per process (a scan takes milliseconds)."""
    return ThreadpoolController()


def _run_projected(objective: Objective, init: np.ndarray, config: AggregationConfig, rng, *,
                   eval_tuples: Tuples, n_iter: int | None, evaluate_each: bool) -> RunOutput:
    gen = as_generator(rng)
    n_iter = config.max_iter if n_iter is None else n_iter
    lay = objective.layout
    blocks = project_simplex(np.asarray(init, dtype=np.float64), lay.mask[None], config.floor)
    r = blocks.shape[0]
    stepper = _Stepper(objective, config, r)
    active = np.ones(r, dtype=bool)
    best = blocks.copy()
    best_val = np.full(r, -np.inf)
    last = np.full(r, np.nan)
    traces: list[list[float]] = [[] for _ in range(r)]
    n_done = np.zeros(r, dtype=np.int64)
    converged = np.zeros(r, dtype=bool)
    rule = getattr(config, "stop", "absolute")
    if rule not in ("absolute", "plateau"):
        raise ConfigError(f"The 'stop' parameter of AggregationConfig must be 'absolute' or 'plateau'. "
                          f"Got {rule!r} instead.")
    history = np.zeros((r, _PLATEAU_WINDOW, eval_tuples.size)) if rule == "plateau" and evaluate_each else None
    buffer = None
    for t in range(1, n_iter + 1):
        idx = np.flatnonzero(active)
        # the minibatch's draws are gathered into one buffer reused across iterations
        batch = objective.tuples(evaluation_tuples(objective.matched, config.n_draws_batch, gen), out=buffer)
        buffer = batch.profiles
        cur = blocks[idx]
        if evaluate_each:
            ev_eval, ev = objective.evaluate(cur, [(eval_tuples, 0), (batch, stepper.want)])
            val = ev_eval.value
            for j, i in enumerate(idx):
                traces[i].append(float(val[j]))
            better = val > best_val[idx]
            best[idx[better]] = cur[better]
            best_val[idx[better]] = val[better]
            if history is None:
                stop = np.abs(val - last[idx]) < config.tol
            else:
                stop = _plateau(history, idx, ev_eval.per_tuple, t, config.tol)
            last[idx] = val
            converged[idx[stop]] = True
            n_done[idx] = t
            if np.all(stop):
                break
            keep = ~stop
            active[idx[stop]] = False
            idx, cur = idx[keep], cur[keep]
            ev = _subset(ev, keep)
        else:
            (ev,) = objective.evaluate(cur, [(batch, stepper.want)])
            n_done[idx] = t
        blocks[idx] = stepper.step(cur, ev, t, idx)
    if not evaluate_each:
        (ev_eval,) = objective.evaluate(blocks, [(eval_tuples, 0)])
        best, best_val = blocks, ev_eval.value
        traces = [[float(v)] for v in best_val]
    return RunOutput(blocks=best, value=best_val, trace=[np.asarray(tr) for tr in traces], n_iter=n_done,
                     converged=converged)


def _plateau(history: np.ndarray, idx: np.ndarray, per_tuple: np.ndarray, t: int, tol: float) -> np.ndarray:
    """The "plateau" rule for the starts ``idx`` at iteration ``t``; records ``per_tuple`` in ``history``.

    ``history[i, (t - 1) % W]`` holds start i's per-tuple ELBO of iteration t - W once t > W: the gain
    over W iterations is the mean of the paired differences, its standard error their standard deviation
    over sqrt(number of tuples).
    """
    w = history.shape[1]
    slot = (t - 1) % w
    stop = np.zeros(idx.size, dtype=bool)
    if t > w:
        diff = per_tuple - history[idx, slot]
        gain = diff.mean(axis=1)
        n = diff.shape[1]
        se = diff.std(axis=1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(idx.size)
        stop = gain < np.maximum(tol, _PLATEAU_Z * se)
    history[idx, slot] = per_tuple
    return stop


def _subset(ev, keep):
    return Evaluation(value=ev.value[keep], grad=None if ev.grad is None else ev.grad[keep],
                      curv=None if ev.curv is None else ev.curv.subset(keep))


def _softmax_blocks(z: np.ndarray, mask: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    zz = np.where(mask, z, -np.inf)
    zz = zz - zz.max(axis=-1, keepdims=True)
    e = np.exp(zz)
    sig = e / e.sum(axis=-1, keepdims=True)
    k = mask.sum(axis=-1, keepdims=True)
    scale = 1.0 - k * floor
    return np.where(mask, floor + scale * sig, 0.0), sig * scale


def _lbfgs_one(objective: Objective, start: np.ndarray, config: AggregationConfig, eval_tuples: Tuples,
               n_iter: int):
    """One softmax + L-BFGS run from ``start`` (n_blocks, S)."""
    lay = objective.layout
    shape = start.shape
    trace: list[float] = []
    state = {"last": None, "converged": False}
    z0 = np.where(lay.mask, np.log(np.maximum(start - config.floor, 1e-12)), 0.0).ravel()

    def fun(z):
        w, dsig = _softmax_blocks(z.reshape(shape), lay.mask, config.floor)
        (ev,) = objective.evaluate(w[None], [(eval_tuples, 1)])
        g = ev.grad[0]
        # d w_s / d z_u = scale sig_s (delta_su - sig_u), with dsig = scale sig and sum_s dsig_s = scale
        mean_g = np.sum(dsig * g, axis=-1, keepdims=True) / np.maximum(np.sum(dsig, axis=-1, keepdims=True),
                                                                       1e-300)
        gz = np.where(lay.mask, dsig * (g - mean_g), 0.0)
        return -float(ev.value[0]), -gz.ravel()

    def callback(intermediate_result):
        val = -float(intermediate_result.fun)
        trace.append(val)
        if state["last"] is not None and abs(val - state["last"]) < config.tol:
            state["converged"] = True
            raise StopIteration
        state["last"] = val

    # the starting point's ELBO opens the trace, as for the other optimisers
    start_val = -fun(z0)[0]
    trace.append(start_val)
    state["last"] = start_val
    res = minimize(fun, z0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": n_iter, "ftol": 0.0, "gtol": 1e-10})
    w, _ = _softmax_blocks(res.x.reshape(shape), lay.mask, config.floor)
    return (w, -float(res.fun), np.asarray(trace if trace else [-float(res.fun)]), int(res.nit),
            state["converged"] or bool(res.success))


def _run_lbfgs(objective: Objective, init: np.ndarray, config: AggregationConfig, *, eval_tuples: Tuples,
               n_iter: int | None) -> RunOutput:
    """Softmax + L-BFGS on the fixed evaluation tuples, one start at a time (docs/design.md §6.8)."""
    lay = objective.layout
    n_iter = config.max_iter if n_iter is None else n_iter
    init = project_simplex(np.asarray(init, dtype=np.float64), lay.mask[None], config.floor)
    # a loop over starts, each vectorised over tuples and blocks
    runs = [_lbfgs_one(objective, start, config, eval_tuples, n_iter) for start in init]
    return RunOutput(blocks=np.stack([r[0] for r in runs]), value=np.asarray([r[1] for r in runs]),
                     trace=[r[2] for r in runs], n_iter=np.asarray([r[3] for r in runs]),
                     converged=np.asarray([r[4] for r in runs]))
