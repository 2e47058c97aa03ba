"""``vcmc keygen``: the operators' keys of the rounds, as a silo built from its node config reads them."""

import os
import stat

import pytest

from vcmc.cli import main
from vcmc.silo import secure_sum


def _keygen(capsys, *args):
    assert main(["keygen", *args]) == 0
    return capsys.readouterr().out.strip()


def _refused(capsys, *args) -> str:
    assert main(["keygen", *args]) == 1
    return capsys.readouterr().err


def test_keys_made_by_three_operators_are_the_pinned_peers_of_each_silo(tmp_path, capsys):
    lines = {n: _keygen(capsys, str(tmp_path / f"{n}.key"), "--silo-name", n) for n in ("a", "b", "c")}
    for name, line in lines.items():
        path = tmp_path / f"{name}.key"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600          # the private key is the operator's alone
        private = secure_sum.read_private_key(path)
        assert line == f"{name}={secure_sum.public_of(private)}"
        assert private not in line
        assert _keygen(capsys, str(path), "--silo-name", name, "--public") == line
    # operator a pins the lines the others sent, as a file of lines
    peers = tmp_path / "peers.txt"
    peers.write_text(f"{lines['b']}\n{lines['c']}\n")
    pinned = secure_sum.parse_peers(str(peers))
    assert pinned == {n: lines[n].split("=")[1] for n in ("b", "c")}


def test_a_key_is_not_replaced_unless_asked(tmp_path, capsys):
    path = tmp_path / "site.key"
    first = _keygen(capsys, str(path), "--silo-name", "site")
    assert "exists" in _refused(capsys, str(path), "--silo-name", "site")
    assert _keygen(capsys, str(path), "--silo-name", "site", "--public") == first
    assert _keygen(capsys, str(path), "--silo-name", "site", "--force") != first


@pytest.mark.parametrize("name", ["", "a=b", "a,b"])
def test_a_silo_name_that_cannot_be_pinned_is_refused(tmp_path, capsys, name):
    assert "--silo-name" in _refused(capsys, str(tmp_path / "k"), "--silo-name", name)
    assert not (tmp_path / "k").exists()


def test_a_file_that_is_not_a_key_is_named(tmp_path, capsys):
    bad = tmp_path / "not-a-key.txt"
    bad.write_text("hello\n")
    err = _refused(capsys, str(bad), "--silo-name", "x", "--public")
    assert "not-a-key.txt" in err and "hello" not in err
