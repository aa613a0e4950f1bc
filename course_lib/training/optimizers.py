"""Layer-wise adaptive optimizers for large-batch training: LARS and LAMB (Keras 2: tf_keras).

Both rescale each variable's update by a *trust ratio* built from the norm of the variable and
the norm of its update, so every layer moves by a similar *relative* amount however large the
global batch (and the learning rate scaled with it) becomes.

* LARS, You, Gitman & Ginsburg 2017 (arXiv:1708.03888), Algorithm 1::

      trust = eta * ||w|| / (||g|| + wd * ||w||)       (1 when ||w|| or ||g|| is 0)
      v = momentum * v + lr * trust * (g + wd * w) ;  w = w - v

* LAMB, You et al. 2019 (arXiv:1904.00962), Algorithm 2::

      m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g² ;  m̂ = m / (1 - b1^t) ;  v̂ = v / (1 - b2^t)
      r = m̂ / (sqrt(v̂) + eps) + wd * w ;  trust = ||w|| / ||r|| (1 when either is 0)
      w = w - lr * trust * r

Variables whose name matches one of ``exclude_from_weight_decay`` (regular expressions searched
in ``variable.name``) get no weight decay; those matching ``exclude_from_layer_adaptation``
(default: the same list) use trust ratio 1. By default biases and normalisation parameters are
excluded, as in both papers. The weight decay is the papers' *coupled* one, applied inside
``update_step``; Keras' own decoupled decay step is disabled for these classes.

Both subclass the *new* ``keras.optimizers.Optimizer`` of Keras 2 (TF 2.11+, tf_keras) (``build`` +
``update_step``), round-trip through ``get_config``/``from_config`` and can be wrapped by
``hvd.DistributedOptimizer``. This module imports TensorFlow (which does not yet initialise any
device, so ``simulate_devices`` still works after it); the scripts import it after parsing
their flags.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from course_lib.training.keras2 import keras
import tensorflow as tf

__all__ = ["DEFAULT_EXCLUDE", "LARS", "LAMB", "get_optimizer"]

#: Patterns excluded from weight decay and layer adaptation by default: biases and the
#: parameters of batch / layer normalisation layers (Keras and TF-Slim spellings).
DEFAULT_EXCLUDE: tuple[str, ...] = ("bias", "batch_normalization", "BatchNorm",
                                    "layer_normalization", "LayerNorm")

def _as_patterns(value: Sequence[str] | str | None, default: Sequence[str]) -> list[str]:
    """Normalise a pattern argument to a list of strings, validating each as a regex."""
    patterns = list(default) if value is None else [value] if isinstance(value, str) else [
        str(p) for p in value]
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"Invalid exclusion pattern {pattern!r}: {exc}. Pass regular "
                             "expressions matched against variable names, e.g. ['bias'].") from exc
    return patterns


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(re.search(pattern, name) is not None for pattern in patterns)


def _check_range(key: str, value: float, low: float, high: float | None = None) -> None:
    if value is None or float(value) < low or (high is not None and float(value) >= high):
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"{key} must be {bound}, got {value!r}.")


class _Layerwise(keras.optimizers.Optimizer):
    """Common parts: exclusion lists, coupled weight decay, trust ratio, config."""

    def __init__(self, *, name: str, weight_decay: float | None,
                 exclude_from_weight_decay: Sequence[str] | str | None,
                 exclude_from_layer_adaptation: Sequence[str] | str | None,
                 **kwargs: Any) -> None:
        weight_decay = 0.0 if weight_decay is None else float(weight_decay)
        _check_range("weight_decay", weight_decay, 0.0)
        super().__init__(name=name, weight_decay=weight_decay, **kwargs)
        self.exclude_from_weight_decay_patterns = _as_patterns(exclude_from_weight_decay,
                                                               DEFAULT_EXCLUDE)
        self.exclude_from_layer_adaptation_patterns = _as_patterns(
            exclude_from_layer_adaptation, self.exclude_from_weight_decay_patterns)

    def _apply_weight_decay(self, variables: Any) -> None:
        """Disable Keras' decoupled decay: the decay here is coupled, in update_step."""
        return None

    def uses_weight_decay(self, variable: tf.Variable) -> bool:
        """Whether ``variable`` receives weight decay (non-zero rate, name not excluded)."""
        return self.weight_decay > 0 and not _matches(
            variable.name, self.exclude_from_weight_decay_patterns)

    def uses_layer_adaptation(self, variable: tf.Variable) -> bool:
        """Whether ``variable``'s update is scaled by a trust ratio (name not excluded)."""
        return not _matches(variable.name, self.exclude_from_layer_adaptation_patterns)

    def _slots(self, variable: tf.Variable, *lists: list) -> list[tf.Variable]:
        index = self._index_dict[self._var_key(variable)]
        return [slot_list[index] for slot_list in lists]

    def _add_slots(self, var_list: Sequence[tf.Variable], *names: str) -> list[list]:
        return [[self.add_variable_from_reference(model_variable=var, variable_name=n)
                 for var in var_list] for n in names]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(),
                "learning_rate": self._serialize_hyperparameter(self._learning_rate),
                "exclude_from_weight_decay": list(self.exclude_from_weight_decay_patterns),
                "exclude_from_layer_adaptation": list(
                    self.exclude_from_layer_adaptation_patterns)}

class LARS(_Layerwise):
    """Layer-wise Adaptive Rate Scaling with momentum (You et al. 2017).

    Args:
        learning_rate: Global learning rate (float or Keras schedule). LARS multiplies it by
            ``trust_coefficient * ||w|| / ||g||``, so useful values are much larger than
            Adam's, typically 0.1 to 10.
        momentum: Heavy-ball momentum coefficient, in [0, 1).
        trust_coefficient: ``eta`` of the paper.
        weight_decay: Coupled L2 weight decay ``beta`` of the paper (0 disables it).
        epsilon: Added to the trust-ratio denominator (paper: 0).
        exclude_from_weight_decay: Regexes; matching variables get no decay. None means
            :data:`DEFAULT_EXCLUDE`.
        exclude_from_layer_adaptation: Regexes; matching variables use trust ratio 1 (plain
            momentum SGD). None means the weight-decay exclusions.
        name: Optimizer name.
        **kwargs: Other ``keras.optimizers.Optimizer`` arguments (``clipnorm``, ...).

    Raises:
        ValueError: A coefficient is out of range or a pattern is not a valid regex.

    Introduced in notebooks/04_large_batch.ipynb.
    """

    def __init__(self, learning_rate: Any = 1.0, momentum: float = 0.9,
                 trust_coefficient: float = 0.001, weight_decay: float | None = 0.0,
                 epsilon: float = 0.0,
                 exclude_from_weight_decay: Sequence[str] | str | None = None,
                 exclude_from_layer_adaptation: Sequence[str] | str | None = None,
                 name: str = "LARS", **kwargs: Any) -> None:
        _check_range("momentum", momentum, 0.0, 1.0)
        _check_range("trust_coefficient", trust_coefficient, 0.0)
        _check_range("epsilon", epsilon, 0.0)
        super().__init__(name=name, weight_decay=weight_decay,
                         exclude_from_weight_decay=exclude_from_weight_decay,
                         exclude_from_layer_adaptation=exclude_from_layer_adaptation, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)
        self.momentum = float(momentum)
        self.trust_coefficient = float(trust_coefficient)
        self.epsilon = float(epsilon)

    def build(self, var_list: Sequence[tf.Variable]) -> None:
        """Create one momentum slot per variable."""
        super().build(var_list)
        if getattr(self, "_built", False):
            return
        self._built = True
        (self._momentums,) = self._add_slots(var_list, "m")

    def update_step(self, gradient: Any, variable: tf.Variable) -> None:
        """Apply one LARS update to ``variable`` (sparse gradients are densified)."""
        dtype = variable.dtype
        grad = tf.cast(tf.convert_to_tensor(gradient), dtype)
        (velocity,) = self._slots(variable, self._momentums)
        wd = self.weight_decay if self.uses_weight_decay(variable) else 0.0
        trust = tf.constant(1.0, dtype)
        if self.uses_layer_adaptation(variable):
            w_norm, g_norm = tf.norm(variable), tf.norm(grad)
            denom = g_norm + wd * w_norm + self.epsilon
            trust = tf.where(tf.logical_and(w_norm > 0, g_norm > 0),
                             self.trust_coefficient * w_norm / denom, trust)
        if wd:
            grad = grad + wd * variable
        lr = tf.cast(self.learning_rate, dtype)
        velocity.assign(self.momentum * velocity + lr * trust * grad)
        variable.assign_sub(velocity)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "momentum": self.momentum, "epsilon": self.epsilon,
                "trust_coefficient": self.trust_coefficient}

class LAMB(_Layerwise):
    """Layer-wise Adaptive Moments for Batch training (You et al. 2019).

    Args:
        learning_rate: Global learning rate (float or Keras schedule).
        beta_1: Decay of the first-moment estimate, in [0, 1).
        beta_2: Decay of the second-moment estimate, in [0, 1).
        epsilon: Added to ``sqrt(v_hat)``.
        weight_decay: Weight decay ``lambda`` added to the Adam ratio (0 disables it).
        exclude_from_weight_decay: Regexes; matching variables get no decay. None means
            :data:`DEFAULT_EXCLUDE`.
        exclude_from_layer_adaptation: Regexes; matching variables use trust ratio 1 (plain
            Adam step). None means the weight-decay exclusions.
        name: Optimizer name.
        **kwargs: Other ``keras.optimizers.Optimizer`` arguments (``clipnorm``, ...).

    Raises:
        ValueError: A coefficient is out of range or a pattern is not a valid regex.

    Introduced in notebooks/04_large_batch.ipynb.
    """

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 weight_decay: float | None = 0.0,
                 exclude_from_weight_decay: Sequence[str] | str | None = None,
                 exclude_from_layer_adaptation: Sequence[str] | str | None = None,
                 name: str = "LAMB", **kwargs: Any) -> None:
        _check_range("beta_1", beta_1, 0.0, 1.0)
        _check_range("beta_2", beta_2, 0.0, 1.0)
        _check_range("epsilon", epsilon, 0.0)
        super().__init__(name=name, weight_decay=weight_decay,
                         exclude_from_weight_decay=exclude_from_weight_decay,
                         exclude_from_layer_adaptation=exclude_from_layer_adaptation, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def build(self, var_list: Sequence[tf.Variable]) -> None:
        """Create the first- and second-moment slots."""
        super().build(var_list)
        if getattr(self, "_built", False):
            return
        self._built = True
        self._momentums, self._velocities = self._add_slots(var_list, "m", "v")

    def update_step(self, gradient: Any, variable: tf.Variable) -> None:
        """Apply one LAMB update to ``variable`` (sparse gradients are densified)."""
        dtype = variable.dtype
        grad = tf.cast(tf.convert_to_tensor(gradient), dtype)
        step = tf.cast(self.iterations + 1, dtype)
        m, v = self._slots(variable, self._momentums, self._velocities)
        m.assign(self.beta_1 * m + (1.0 - self.beta_1) * grad)
        v.assign(self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad))
        m_hat = m / (1.0 - tf.pow(tf.cast(self.beta_1, dtype), step))
        v_hat = v / (1.0 - tf.pow(tf.cast(self.beta_2, dtype), step))
        update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
        if self.uses_weight_decay(variable):
            update = update + self.weight_decay * variable
        trust = tf.constant(1.0, dtype)
        if self.uses_layer_adaptation(variable):
            w_norm, r_norm = tf.norm(variable), tf.norm(update)
            safe_r = tf.where(r_norm > 0, r_norm, tf.ones_like(r_norm))
            trust = tf.where(tf.logical_and(w_norm > 0, r_norm > 0), w_norm / safe_r, trust)
        variable.assign_sub(tf.cast(self.learning_rate, dtype) * trust * update)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}


def get_optimizer(name: str, learning_rate: float, **kwargs: Any) -> keras.optimizers.Optimizer:
    """Build an optimizer by its course name.

    Args:
        name: One of ``"adam"``, ``"sgd"`` (momentum 0.9 unless given), ``"lars"``, ``"lamb"``.
        learning_rate: The learning rate.
        **kwargs: Extra keyword arguments for the optimizer's constructor.

    Returns:
        A new Keras 2 (tf_keras) optimizer.

    Raises:
        ValueError: If ``name`` is not one of the four names.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    key = name.lower()
    if key == "adam":
        return keras.optimizers.Adam(learning_rate=learning_rate, **kwargs)
    if key == "sgd":
        kwargs.setdefault("momentum", 0.9)
        return keras.optimizers.SGD(learning_rate=learning_rate, **kwargs)
    if key in ("lars", "lamb"):
        return (LARS if key == "lars" else LAMB)(learning_rate=learning_rate, **kwargs)
    raise ValueError(f"Unknown optimizer {name!r}; choose one of 'adam', 'sgd', 'lars', 'lamb'.")
