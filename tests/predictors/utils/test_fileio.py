"""Atomic writes replace regular files only."""
import os
import stat

import pytest

from predictors.utils.fileio import atomic_write_bytes, writable_target


def test_writes_a_new_file_and_replaces_an_old_one(tmp_path):
    path = tmp_path / "a.json"
    atomic_write_bytes(path, b"one")
    atomic_write_bytes(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["a.json"]  # no temporary file left beside it
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_refuses_a_device_a_fifo_and_a_folder(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    for target, kind in ((os.devnull, "a character device"), (fifo, "a FIFO"),
                         (folder, "a folder")):
        with pytest.raises(OSError, match=f"it is {kind}, not a regular file"):
            atomic_write_bytes(target, b"x")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and folder.is_dir()
    assert sorted(os.listdir(tmp_path)) == ["folder", "pipe"]


def test_a_link_is_followed_and_kept(tmp_path):
    real = tmp_path / "real.txt"
    real.write_bytes(b"old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_bytes(link, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    null_link = tmp_path / "null"
    null_link.symlink_to(os.devnull)
    with pytest.raises(OSError, match="character device"):
        writable_target(null_link)
