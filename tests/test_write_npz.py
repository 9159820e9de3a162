"""write_npz_atomic keeps every weight, whatever its name (np.savez(f, **arrays) took a
weight named `allow_pickle` as its flag and silently left it out of the file)."""

import zipfile

import numpy as np

from tpu_xdsl.weights import write_npz_atomic


def test_every_name_is_written(tmp_path):
    arrays = {
        "allow_pickle": np.arange(3, dtype=np.float32),
        "file": np.ones((2, 2), np.int8),
        "conv1/W": np.zeros(4, np.float32),
    }
    path = tmp_path / "weights.npz"
    write_npz_atomic(path, arrays)
    with np.load(path) as loaded:
        assert sorted(loaded.files) == sorted(arrays)
        for name, array in arrays.items():
            assert loaded[name].dtype == array.dtype
            np.testing.assert_array_equal(loaded[name], array)


def test_same_members_as_savez(tmp_path):
    """The archive holds what np.savez writes for ordinary names (member names and bytes)."""
    arrays = {"w": np.linspace(0, 1, 5, dtype=np.float32), "b": np.array(7, np.int32)}
    ours, theirs = tmp_path / "ours.npz", tmp_path / "theirs.npz"
    write_npz_atomic(ours, arrays)
    np.savez(theirs, **arrays)
    with zipfile.ZipFile(ours) as a, zipfile.ZipFile(theirs) as b:
        assert a.namelist() == b.namelist()
        for name in a.namelist():
            assert a.read(name) == b.read(name)
            assert a.getinfo(name).compress_type == b.getinfo(name).compress_type
