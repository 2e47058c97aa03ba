"""Every file is written atomically: a failure while writing leaves the old file (or none), never a part."""

import json
import os

import pytest

from vcmc.atomic import atomic_path, atomic_write_json, atomic_write_text


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "result.json"
    atomic_write_json(target, {"n": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text('{"n": 2, "trunc')
        raise RuntimeError("disk full")
    assert json.loads(target.read_text()) == {"n": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_the_new_file_replaces_the_old_with_normal_permissions(tmp_path):
    target = tmp_path / "sub" / "table.csv"
    atomic_write_text(target, "a,b\n")
    atomic_write_text(target, "a,b\n1,2\n")
    assert target.read_text() == "a,b\n1,2\n"
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_json_is_strict(tmp_path):
    with pytest.raises(ValueError):
        atomic_write_json(tmp_path / "x.json", {"v": float("nan")})
    assert not (tmp_path / "x.json").exists()
