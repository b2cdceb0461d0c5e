"""The suite's own tmp_path (tests/conftest.py) stays short whatever TMPDIR is: errors cut a path past 120
characters in the middle, and 16 tests that find their file's name in a message failed under a long TMPDIR
(helper-122: a macOS /var/folders/.../T/)."""

from pathlib import Path

from tests.conftest import SHORT_TMP_CHARS


def test_tmp_path_is_short_and_empty(tmp_path: Path) -> None:
    assert len(str(tmp_path)) <= SHORT_TMP_CHARS and tmp_path.is_dir() and not any(tmp_path.iterdir())
