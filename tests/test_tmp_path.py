"""The suite's own tmp_path (tests/conftest.py) stays short whatever TMPDIR is: errors cut a path past 120
characters in the middle, and 16 tests that find their file's name in a message failed under a long TMPDIR
(helper-122: a macOS /var/folders/.../T/)."""

from pathlib import Path

from tests.conftest import SHORT_TMP_CHARS, short_tmp


def test_tmp_path_is_short_and_empty(tmp_path: Path) -> None:
    assert len(str(tmp_path)) <= SHORT_TMP_CHARS and tmp_path.is_dir() and not any(tmp_path.iterdir())


def test_a_long_tmp_path_is_swapped_for_a_short_one_removed_after(tmp_path: Path) -> None:
    long = tmp_path / ("var-folders-" + "x" * 60) / "T" / "pytest-of-someone" / "test_a_long_name0"
    long.mkdir(parents=True)
    assert len(str(long)) > SHORT_TMP_CHARS
    with short_tmp(long) as path:
        assert path != long and len(str(path)) <= SHORT_TMP_CHARS and path.is_dir()
        (path / "f").write_text("x")
    assert not path.exists() and long.is_dir()
    with short_tmp(tmp_path) as same:  # a short one is kept as it is
        assert same == tmp_path
