"""Tests of course_lib.training.data: raw files, both loaders, sharding and pipelines."""

from __future__ import annotations

import gzip
import hashlib
import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from course_lib.training import data, fmnist_files, pipeline


# ----------------------------------------------------------------- raw files
def test_verify_raw_files_matches_idx_sha256():
    folder = fmnist_files.find_raw_files()
    assert fmnist_files.verify_raw_files(folder) == fmnist_files.IDX_SHA256


def test_course_data_dir_is_searched_first(tmp_path, monkeypatch):
    for stem in fmnist_files.IDX_SHA256:
        shutil.copy(fmnist_files.find_raw_files() / f"{stem}.gz", tmp_path / f"{stem}.gz")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert fmnist_files.search_paths()[0] == tmp_path
    assert fmnist_files.find_raw_files() == tmp_path


def test_missing_data_names_every_path(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("COURSE_DATA_DIR", str(empty))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(fmnist_files, "SYSTEM_DATA_DIRS", [str(tmp_path / "no-system-dir"),
                                                    "~/.keras/datasets/fashion-mnist"])
    with pytest.raises(data.DataNotFoundError) as info:
        fmnist_files.find_raw_files()
    message = str(info.value)
    for path in fmnist_files.search_paths():
        assert str(path) in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "COURSE_DATA_DIR" in message
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(data.DataNotFoundError):
        fmnist_files.verify_raw_files()


def test_corrupt_files_are_named(tmp_path):
    source = fmnist_files.find_raw_files()
    for stem in fmnist_files.IDX_SHA256:
        shutil.copy(source / f"{stem}.gz", tmp_path / f"{stem}.gz")
    # 1) valid gzip, one flipped content byte -> wrong sha256
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(labels.read_bytes()))
    raw[100] ^= 0xFF
    labels.write_bytes(gzip.compress(bytes(raw), compresslevel=1))
    # 2) flipped bytes inside the compressed stream -> cannot be decompressed (CRC / data error)
    train_labels = tmp_path / "train-labels-idx1-ubyte.gz"
    blob = bytearray(train_labels.read_bytes())
    for i in range(200, 260):
        blob[i] ^= 0xFF
    train_labels.write_bytes(bytes(blob))
    with pytest.raises(data.DataCorruptError) as info:
        fmnist_files.verify_raw_files(tmp_path)
    message = str(info.value)
    assert "t10k-labels-idx1-ubyte.gz" in message
    assert "train-labels-idx1-ubyte.gz" in message
    assert "train-images" not in message


def test_restored_gzip_header_gives_upstream_bytes():
    upstream = fmnist_files._tfds_upstream_sha256()
    folder = fmnist_files.find_raw_files()
    for stem in fmnist_files.IDX_SHA256:
        restored = fmnist_files._upstream_gz(stem, (folder / f"{stem}.gz").read_bytes())
        assert hashlib.sha256(restored).hexdigest() == upstream[f"{stem}.gz"]
        assert fmnist_files._upstream_gz(stem, restored) == restored  # already upstream: unchanged


def test_tfds_staging_refuses_corrupt_raw_file(tmp_path):
    source = fmnist_files.find_raw_files()
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    for stem in fmnist_files.IDX_SHA256:
        shutil.copy(source / f"{stem}.gz", raw_dir / f"{stem}.gz")
    bad = raw_dir / "train-labels-idx1-ubyte.gz"
    blob = bytearray(bad.read_bytes())
    blob[-20] ^= 0x01
    bad.write_bytes(bytes(blob))
    with pytest.raises(data.DataCorruptError, match="train-labels-idx1-ubyte"):
        fmnist_files.stage_tfds_manual(raw_dir, tmp_path / "manual")
    assert not (tmp_path / "manual" / "train-labels-idx1-ubyte.gz").exists()


# ----------------------------------------------------------------- loaders
def _check_counts(arrays):
    assert arrays.x_train.shape == (data.TRAIN_SIZE, 28, 28)
    assert arrays.y_train.shape == (data.TRAIN_SIZE,)
    assert arrays.x_test.shape == (data.TEST_SIZE, 28, 28)
    assert arrays.y_test.shape == (data.TEST_SIZE,)
    assert all(a.dtype == np.uint8 for a in arrays)
    assert set(np.unique(arrays.y_train)) == set(range(data.NUM_CLASSES))
    assert len(arrays.x_train) == 60_000 and len(arrays.x_test) == 10_000


def test_keras_loader_counts_and_idx_order(fmnist):
    _check_counts(fmnist)
    raw_labels = gzip.decompress((fmnist_files.find_raw_files() / "train-labels-idx1-ubyte.gz").read_bytes())
    assert np.array_equal(fmnist.y_train, np.frombuffer(raw_labels, np.uint8, offset=8))
    assert Counter(fmnist.y_train.tolist()) == {c: 6000 for c in range(10)}


def _canonical(images, labels):
    keys = [hashlib.sha256(img.tobytes() + bytes([lab])).hexdigest() for img, lab in zip(images, labels)]
    return sorted(keys)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_tfds_and_keras_hold_identical_examples(fmnist, fmnist_tfds):
    # tfds stores examples in its own fixed order; the examples themselves must be identical.
    _check_counts(fmnist_tfds)
    assert _canonical(fmnist.x_test, fmnist.y_test) == _canonical(fmnist_tfds.x_test, fmnist_tfds.y_test)
    assert _canonical(fmnist.x_train, fmnist.y_train) == _canonical(fmnist_tfds.x_train,
                                                                     fmnist_tfds.y_train)


def test_subsets_are_the_first_examples(fmnist, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    part = data.load_arrays("keras", train_subset=300, test_subset=50)
    assert np.array_equal(part.x_train, fmnist.x_train[:300])
    assert np.array_equal(part.y_test, fmnist.y_test[:50])
    with pytest.raises(ValueError, match="train_subset"):
        data.load_arrays("keras", train_subset=0)
    with pytest.raises(ValueError, match="source"):
        data.load_arrays("torchvision")


# ----------------------------------------------------------------- sharding
def _labels_of(ds):
    return [batch[1].numpy().tolist() for batch in ds]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_shards_cover_every_example_once(workers):
    n, batch = 10, 3
    images = np.zeros((n, 28, 28), np.uint8)
    ids = np.arange(n)
    seen: Counter = Counter()
    steps = set()
    for rank in range(workers):
        batches = _labels_of(pipeline.make_dataset(images, ids, batch_size=batch, training=True, seed=7,
                                               num_workers=workers, worker_index=rank, epoch=2))
        steps.add(len(batches))
        seen.update(i for b in batches for i in b)
    assert steps == {pipeline.steps_per_epoch(n, batch, workers)}
    assert set(seen) == set(range(n))
    assert sum(seen.values()) == pipeline.samples_per_epoch(n, workers)
    twice = [i for i, c in seen.items() if c == 2]
    assert len(twice) == (-n) % workers and max(seen.values()) <= 2


def test_order_depends_only_on_seed_and_epoch():
    n = 50
    a = pipeline.epoch_indices(n, seed=1, epoch=0, num_workers=2, worker_index=0)
    assert np.array_equal(a, pipeline.epoch_indices(n, seed=1, epoch=0, num_workers=2, worker_index=0))
    assert not np.array_equal(a, pipeline.epoch_indices(n, seed=1, epoch=1, num_workers=2, worker_index=0))
    assert not np.array_equal(a, pipeline.epoch_indices(n, seed=2, epoch=0, num_workers=2, worker_index=0))
    # both workers interleave the SAME global permutation
    whole = pipeline.epoch_indices(n, seed=1, epoch=0)
    b = pipeline.epoch_indices(n, seed=1, epoch=0, num_workers=2, worker_index=1)
    assert np.array_equal(whole[0::2], a) and np.array_equal(whole[1::2], b)


def test_batches_types_and_partial_last_batch(small_fmnist):
    ds = pipeline.make_dataset(small_fmnist.x_train[:100], small_fmnist.y_train[:100], batch_size=32,
                           training=True)
    batches = list(ds)
    assert [len(b[1]) for b in batches] == [32, 32, 32, 4]
    x, y = batches[0]
    assert x.shape == (32, 28, 28, 1) and x.dtype.name == "float32" and y.dtype.name == "int32"
    assert 0.0 <= float(np.min(x)) and float(np.max(x)) <= 1.0
    # the image really belongs to its label
    idx = pipeline.epoch_indices(100, seed=0, epoch=0)[0]
    assert np.allclose(x[0, ..., 0], small_fmnist.x_train[idx] / 255.0)
    assert int(y[0]) == small_fmnist.y_train[idx]


def test_eval_is_ordered_unpadded_and_sharded():
    ids = np.arange(7)
    images = np.zeros((7, 28, 28), np.uint8)
    whole = _labels_of(pipeline.make_dataset(images, ids, batch_size=4, training=False))
    assert whole == [[0, 1, 2, 3], [4, 5, 6]]
    shard = _labels_of(pipeline.make_dataset(images, ids, batch_size=4, training=False, num_workers=2,
                                         worker_index=1))
    assert shard == [[1, 3, 5]]


def test_epochs_dataset_resumes_exactly():
    n, batch, workers = 11, 4, 2
    ids = np.arange(n)
    images = np.zeros((n, 28, 28), np.uint8)
    kw = dict(batch_size=batch, seed=3, num_workers=workers, worker_index=1)
    full = _labels_of(pipeline.make_epochs_dataset(images, ids, first_epoch=0, last_epoch=3, **kw))
    per_epoch = [_labels_of(pipeline.make_dataset(images, ids, training=True, epoch=e, **kw))
                 for e in range(3)]
    assert full == [b for epoch in per_epoch for b in epoch]
    resumed = _labels_of(pipeline.make_epochs_dataset(images, ids, first_epoch=1, last_epoch=3, **kw))
    steps = pipeline.steps_per_epoch(n, batch, workers)
    assert resumed == full[steps:]


def test_step_arithmetic():
    assert pipeline.shard_size(10, 3) == 4
    assert pipeline.samples_per_epoch(10, 3) == 12
    assert pipeline.steps_per_epoch(60_000, 64, 2) == math.ceil(30_000 / 64)
    assert pipeline.steps_per_epoch(60_000, 100, 4) == 60_000 // 400
    assert pipeline.steps_per_epoch(10, 3, 3) == 2


@pytest.mark.parametrize("kwargs", [dict(num_workers=2, worker_index=2),
                                    dict(num_workers=2, worker_index=-1),
                                    dict(num_workers=0, worker_index=0),
                                    dict(num_workers=1, worker_index=0, batch_size=0)])
def test_bad_shard_arguments_raise(kwargs):
    args = dict(batch_size=4, training=True) | kwargs
    with pytest.raises(pipeline.ShardError):
        pipeline.make_dataset(np.zeros((4, 28, 28), np.uint8), np.arange(4), **args)


def test_importing_course_lib_modules_does_not_import_tensorflow():
    code = ("import sys, course_lib, course_lib.training.data, course_lib.training.devices, course_lib.training.models, "
            "course_lib.training.throughput, course_lib.lessons.common.scaling\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------- content verification (issue 20)
def test_sorted_rows_digests_are_those_of_the_raw_files():
    folder = fmnist_files.find_raw_files()
    for split, expected in fmnist_files.SORTED_ROWS_SHA256.items():
        images = gzip.decompress((folder / f"{split}-images-idx3-ubyte.gz").read_bytes())
        labels = gzip.decompress((folder / f"{split}-labels-idx1-ubyte.gz").read_bytes())
        assert hashlib.sha256(images).hexdigest() == fmnist_files.IDX_SHA256[f"{split}-images-idx3-ubyte"]
        x = np.frombuffer(images, np.uint8, offset=16).reshape(-1, 28, 28)
        y = np.frombuffer(labels, np.uint8, offset=8)
        assert data.idx_sha256(x) == fmnist_files.IDX_SHA256[f"{split}-images-idx3-ubyte"]
        assert data.idx_sha256(y) == fmnist_files.IDX_SHA256[f"{split}-labels-idx1-ubyte"]
        assert data.sorted_rows_sha256(x, y) == expected
        # order-free, but not blind: a permutation keeps it, one changed pixel or label does not
        perm = np.random.default_rng(0).permutation(len(y))
        assert data.sorted_rows_sha256(x[perm], y[perm]) == expected
        flipped = x.copy()
        flipped[7, 14, 14] ^= 1
        assert data.sorted_rows_sha256(flipped, y) != expected
        assert data.idx_sha256(flipped) != fmnist_files.IDX_SHA256[f"{split}-images-idx3-ubyte"]
        relabelled = y.copy()
        relabelled[3] = (relabelled[3] + 1) % 10
        assert data.sorted_rows_sha256(x, relabelled) != expected


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_keras_cache_with_one_flipped_pixel_is_refused(fmnist, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    data.load_arrays("keras", test_subset=10)  # fills ~/.keras from the raw files, verified
    cached = tmp_path / ".keras" / "datasets" / "fashion-mnist" / "train-images-idx3-ubyte.gz"
    raw = bytearray(gzip.decompress(cached.read_bytes()))
    raw[16 + 5 * 784 + 400] ^= 0x01  # one pixel of the sixth image, least significant bit
    cached.write_bytes(gzip.compress(bytes(raw), compresslevel=1))  # level 9 (the default): ~17 CPU-s for 47 MB
    with pytest.raises(data.DataCorruptError, match="train-images-idx3-ubyte") as info:
        data.load_arrays("keras", train_subset=10)
    assert str(cached) in str(info.value) and "delete" in str(info.value)
    cached.unlink()  # the remedy the message gives: the intact raw file is copied back
    assert np.array_equal(data.load_arrays("keras").x_train, fmnist.x_train)


def _rewrite_first_record_with_a_flipped_pixel(tfrecord):
    import tensorflow as tf

    records = [bytes(r) for r in tf.data.TFRecordDataset(str(tfrecord)).as_numpy_iterator()]
    example = tf.train.Example.FromString(records[0])
    feature = example.features.feature["image"].bytes_list
    image = tf.io.decode_png(feature.value[0]).numpy()
    image[14, 14, 0] ^= 0x01
    feature.value[0] = tf.io.encode_png(image).numpy()
    records[0] = example.SerializeToString()
    with tf.io.TFRecordWriter(str(tfrecord)) as writer:  # valid CRCs: only the content is wrong
        for record in records:
            writer.write(record)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_tfds_files_with_one_flipped_pixel_are_refused(fmnist_tfds, tfds_home, tmp_path, monkeypatch):
    data_dir = tmp_path / "tensorflow_datasets"
    shutil.copytree(tfds_home / "tensorflow_datasets" / "fashion_mnist", data_dir / "fashion_mnist")
    assert np.array_equal(data.load_arrays("tfds", data_dir=data_dir).y_test, fmnist_tfds.y_test)  # intact
    [shard] = (data_dir / "fashion_mnist").glob("*/fashion_mnist-test.tfrecord*")
    _rewrite_first_record_with_a_flipped_pixel(shard)
    with pytest.raises(data.DataCorruptError, match="t10k") as info:
        data.load_arrays("tfds", data_dir=data_dir)
    assert str(data_dir / "fashion_mnist") in str(info.value)


def test_one_resolver_decides_the_data_folder(tmp_path, monkeypatch):
    """The parameter first (a script's --data-dir), then $COURSE_TFDS_DIR, $TFDS_DATA_DIR, ~/tensorflow_datasets."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("COURSE_TFDS_DIR", raising=False)
    monkeypatch.delenv("TFDS_DATA_DIR", raising=False)
    assert data.resolve_data_dir() == tmp_path / "tensorflow_datasets"
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    assert data.resolve_data_dir() == tmp_path / "tfds"
    monkeypatch.setenv("COURSE_TFDS_DIR", str(tmp_path / "course"))
    assert data.resolve_data_dir() == tmp_path / "course"
    assert data.resolve_data_dir(tmp_path / "given") == tmp_path / "given"
    assert data.resolve_data_dir("~/x") == tmp_path / "x"


# The course's full scripts (course_lib.training.flags.add_data_flags)...
@pytest.mark.parametrize("script", ["horovod_fmnist.py", "mirrored_fmnist.py"])
def test_every_training_script_takes_data_dir(script):
    path = Path(__file__).resolve().parents[1] / "source_code" / script
    out = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--data-dir" in out.stdout, out.stderr


#: ... and the copyable ones, which import no course_lib: keras_fmnist.py and the scripts written from it or from
#: horovod_fmnist_minimal.py. Each declares --data-dir itself, in the same words (the same change in all four, so
#: that the diffs notebooks 03 and 06 print from them stay what they were).
COPYABLE = ("keras_fmnist.py", "horovod_fmnist_minimal.py", "mwms_fmnist.py", "horovod_fmnist_elastic.py")


def _flag_help(path: Path, flag: str) -> str | None:
    """The help text of ``parser.add_argument(flag, ..., help=...)`` in a script's source, or None."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == flag):
            return next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "help"), None)
    return None


def copyable_data_dir_problems(source: Path) -> list[str]:
    """Copyable scripts whose --data-dir is missing or says other than add_data_flags' (less its course_lib pointer)."""
    import argparse

    from course_lib.training import flags

    parser = argparse.ArgumentParser()
    flags.add_data_flags(parser)
    (course,) = [a.help for a in parser._actions if "--data-dir" in a.option_strings]
    expected = (course or "").removesuffix(" (course_lib.training.data.resolve_data_dir)")
    return [f"{name}: --data-dir says {_flag_help(source / name, '--data-dir')!r}, not {expected!r}"
            for name in COPYABLE if _flag_help(source / name, "--data-dir") != expected]


def test_the_copyable_scripts_take_data_dir_in_the_same_words():
    source = Path(__file__).resolve().parents[1] / "source_code"
    assert copyable_data_dir_problems(source) == []


def test_a_copyable_script_without_data_dir_fails_it(tmp_path):
    source = Path(__file__).resolve().parents[1] / "source_code"
    for name in COPYABLE:
        shutil.copy(source / name, tmp_path / name)
    minimal = tmp_path / "horovod_fmnist_minimal.py"
    minimal.write_text(minimal.read_text().replace('"--data-dir"', '"--data-folder"'))
    elastic = tmp_path / "horovod_fmnist_elastic.py"
    elastic.write_text(elastic.read_text().replace('"$COURSE_TFDS_DIR, else ', '"$TFDS_DATA_DIR, else '))
    problems = copyable_data_dir_problems(tmp_path)
    assert [p.split(":")[0] for p in problems] == ["horovod_fmnist_minimal.py", "horovod_fmnist_elastic.py"], problems
    assert problems[0].startswith("horovod_fmnist_minimal.py: --data-dir says None, not 'tfds data folder"), problems
