"""tests/notebooks/sanitize.cfg masks only what varies: deterministic values a learner is taught stay compared.

The rules are read with nbval's own parser and applied the way nbval applies them (in file order, with
``re.sub``), so these tests see exactly what the strict notebook comparison sees.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nbval.plugin import get_sanitize_patterns

SANITIZE = Path(__file__).resolve().parent / "notebooks" / "sanitize.cfg"


def rules() -> list[tuple[str, str]]:
    """The (regex, replacement) pairs of sanitize.cfg, in nbval's order."""
    pairs = get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8"))
    assert pairs, f"no rule parsed from {SANITIZE}"
    return pairs


def sanitize(text: str) -> str:
    """What nbval compares for ``text`` (IPyNbCell.sanitize)."""
    for regex, replace in rules():
        text = re.sub(regex, replace, text)
    return text


def test_every_rule_compiles_and_alignment_is_last():
    pairs = rules()
    for regex, _ in pairs:
        re.compile(regex)
    assert pairs[-1][0] == r"[ \t]+", "the [alignment] rule must run last (after the values are masked)"


# Pairs that MUST compare different: deterministic values and verdict thresholds.
MUST_DIFFER = [
    ("test accuracy ≥ 0.75: True", "test accuracy ≥ 0.10: True"),           # a verdict's threshold
    ("test accuracy ≥ 0.75: True", "test accuracy ≥ 0.75: False"),          # a verdict's outcome
    ("accuracy after 1 epoch ≥ 0.60 (chance is 0.10): 0.760", "accuracy after 1 epoch ≥ 0.60 (chance is 0.10): 0.101"),
    ("efficiency ≥ 0.25 (half of the ideal 0.50): True", "efficiency ≥ 0.01 (half of the ideal 0.50): True"),
    ("epoch 2: lr 0.001", "epoch 2: lr 0.064"),
    ("1  asynchronous  36.67  1  mean_staleness 3.0  4.5", "1  asynchronous  36.67  1  mean_staleness 21.0  4.5"),
    ("1  asynchronous  36.67  1  3.0  4.5", "1  asynchronous  36.67  1  21.0  4.5"),
    ("2  4.8  2  9.60  4  9.6", "2  14.4  2  9.60  4  9.6"),                 # ring traffic x 3
    ("the naive figure over-counts by a factor 1.1719", "the naive figure over-counts by a factor 1.0000"),
    ("steps per epoch: 47 = ceil( 6000 / 128 )", "steps per epoch: 48 = ceil( 6000 / 128 )"),
    ("largest learning rate 0.064", "largest learning rate 0.008"),
    ("Horovod minus Mirrored: cannot tell", "Horovod minus Mirrored: faster"),
    ("epoch 1: rank 0 wrote ../runs/03_horovod/checkpoints/epoch-0001/ckpt",
     "epoch 1: rank 0 wrote ../runs/03_horovod/checkpoints/epoch-0002/ckpt"),
    ("global batch: 128 before, 64 after resuming", "global batch: 128 before, 128 after resuming"),
    ("[  ok] CPU cores: 2", "[FAIL] CPU cores: 2"),                           # the doctor's status
    ("[  ok] TensorFlow build: tensorflow-cpu 2.18.1", "[warn] TensorFlow build: tensorflow-cpu 2.18.1"),
    ("[  ok] TensorFlow: 2.15.1", "[  ok] TensorFlow: 2.16.1"),               # pinned versions
    ("every training image exactly once: True", "every training image exactly once: False"),
    ("- Measured here, 2 replicas were slower", "- Measured here, 2 replicas were faster"),   # no marker: compared
    ("['/job:localhost/replica:0/task:0/device:CPU:0']", "['/job:localhost/replica:0/task:0/device:CPU:1']"),
    ("efficiency ≥ half of the best this machine allows: True", "efficiency ≥ half of the best this machine allows: cannot tell"),
    ("naive 8x loses accuracy beyond its CI: True", "naive 8x loses accuracy beyond its CI: False"),
    # 04's answer: the recovered fraction's words are compared (only its ≈ numbers are masked)
    ("(95 % interval ≈0.58 to ≈0.88, 11 seeds) -> how much of the loss: part of it, not all",
     "(95 % interval ≈0.58 to ≈1.08, 11 seeds) -> how much of the loss: cannot tell whether all"),
    ("recovers ≈0.76 of them (95 % interval ≈0.58 to ≈0.88): part of it, not all, so at this budget",
     "recovers ≈0.76 of them (95 % interval unbounded: the naive loss itself is not resolved from 0): cannot tell, so"),
]

# Pairs that MUST compare equal: timings, throughputs, spreads, measured values, machine facts.
MUST_MATCH = [
    ("one epoch on 2048 images: 3.4 s", "one epoch on 2048 images: 12.9 s"),
    ("epoch 2: 6000 images in 5.82 s; 1030.3 images/s (1030.3 per worker, 1 worker), 61.95 ms/step",
     "epoch 2: 6000 images in 11.2 s; 535.8 images/s (535.8 per worker, 1 worker), 119.04 ms/step"),
    ("wall time 31.4 s", "wall time 102.0 s"),
    ("honest throughput: 1941.4 images/s", "honest throughput: 982.0 images/s"),
    ("1 replica(s): 1748.7 images/s (± 98.7 over 3 epochs)", "1 replica(s): 950.1 images/s (± 1002.3 over 3 epochs)"),
    ("scaling efficiency with 2 replicas: ≈0.52 ± 0.04", "scaling efficiency with 2 replicas: ≈1.13 ± 0.40"),
    ("0  16  128  ≈1118.3  ≈500.2  ≈14.3", "0  16  128  ≈998.0  ≈35.0  ≈9.1"),
    ("largest difference between the two updates: ≈4.84e-08", "largest difference between the two updates: ≈0.00e+00"),
    ("Test accuracy 0.8530, loss 0.3873; 1021.6 images/s", "Test accuracy 0.8490, loss 0.4011; 977.4 images/s"),
    ("epoch 1: 47 steps, mean training loss 1.0471", "epoch 1: 47 steps, mean training loss 1.1002"),
    ("rank 0 weights digest 93b73ca722817f373c093db7580e73322815e34d0086d24bd043b73abdaa0ac6",
     "rank 0 weights digest 0c093db7580e73322815e34d0086d24bd043b73abdaa0ac693b73ca722817f37"),
    ("machine: Intel Xeon, 2 CPU cores, no GPU; speed probe 0.195 s", "machine: AMD EPYC, 16 CPU cores, no GPU"),
    ("on this machine: 2 CPU cores, no GPU", "on this machine: 16 CPU cores, 8 GPUs (NVIDIA H100 80GB HBM3)"),
    ("measured: batch 256 processes 1.26x the images/s of batch 32",
     "measured: batch 256 processes 0.97x the images/s of batch 32"),
    ("[  ok] CPU cores: 2", "[  ok] CPU cores: 16"),
    ("[  ok] GPUs: none — this is a CPU-only machine", "[  ok] GPUs: 1 (NVIDIA H100 80GB HBM3)"),
    ("[  ok] TensorFlow build: tensorflow-cpu 2.18.1 (the CPU-only build); this machine takes the cpu build",
     "[  ok] TensorFlow build: tensorflow 2.18.1 (the CUDA-capable build); this machine takes the gpu build"),
    ("[  ok] Python: 3.11.7 (the course's .venv)", "[  ok] Python: 3.11.9 (the course's .venv)"),
    ("[  ok] Fashion-MNIST: /usr/share/datasets/fashion-mnist (4 files)",
     "[  ok] Fashion-MNIST: /home/learner/tensorflow_datasets (4 files)"),
    ("data in /home/a/course/data", "data in /srv/x/data"),
    ("at 0x7f3a2b1c", "at 0x55d0e1"),
    ("run at 2026-11-21 13:57:31", "run at 2027-01-02T08:00:00.123"),
    ("(95 % interval ≈0.58 to ≈0.88, 11 seeds) -> how much", "(95 % interval ≈0.61 to ≈0.93, 11 seeds) -> how much"),
    ("One epoch = one pass\nepoch 1: 4096 images\n",
     "One epoch = one pass\nwaiting for 2 of 2 slots: position 4 in line; held by root (pid 21828, x.py, 2 workers, "
     "running 0 s); estimate: a slot frees within 300 s at the latest\nepoch 1: 4096 images\n"),
    ("VBox(children=(HBox(children=(IntSlider(value=2, description='workers', max=4, min=1,",
     "VBox(children=(HBox(children=(IntSlider(value=2, description='workers', max=2, min=1,"),
    ("MirroredStrategy over 1 replica(s): ['/job:localhost/replica:0/task:0/device:CPU:0']",
     "MirroredStrategy over 1 replica(s): ['/job:localhost/replica:0/task:0/device:GPU:0']"),
    ("*Measured here:* **This run cannot tell 2 simulated replicas from one device**",
     "*Measured here:* **2 simulated replicas processed fewer images per second than one device**"),
    ("- *Measured here:* 2 simulated replicas were not told apart from one device",
     "- *Measured here:* 2 simulated replicas were slower than one device"),
]


@pytest.mark.parametrize("stored, new", MUST_DIFFER)
def test_deterministic_values_stay_compared(stored, new):
    assert sanitize(stored) != sanitize(new), f"sanitize.cfg masks a deterministic value: {sanitize(stored)!r}"


@pytest.mark.parametrize("stored, new", MUST_MATCH)
def test_volatile_values_are_masked(stored, new):
    assert sanitize(stored) == sanitize(new), f"{sanitize(stored)!r} != {sanitize(new)!r}"


def test_words_that_merely_end_in_s_are_not_durations():
    for text in ("4 steps", "6000 samples per epoch", "3 epochs", "2 seeds", "ring_mb_per_worker 4.8"):
        assert "DURATION" not in sanitize(text) and "THROUGHPUT" not in sanitize(text), sanitize(text)


def test_a_plain_decimal_is_not_masked():
    """The old [floats] rule masked every decimal number: none of these may be masked now."""
    for text in ("0.001", "1.1719", "36.67", "9.60", "0.75", "4.8"):
        assert sanitize(text) == text
