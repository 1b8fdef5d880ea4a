"""docs/configuration.md is what the settings classes give: every setting, its variable,
default and meaning, secrets without their defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools import docs_check, settings_doc
from webgym_common.config import Settings


def test_committed_page_is_what_the_settings_give() -> None:
    assert settings_doc.TARGET.read_text() == settings_doc.render(), (
        "docs/configuration.md is stale: run .venv/bin/python -m devtools.settings_doc")


def test_every_setting_has_a_row_with_a_meaning() -> None:
    rows = {line.split("|")[1].strip().strip("`"): line.split("|")[3].strip()
            for line in settings_doc.render().splitlines() if line.startswith("| `WEBGYM_")}
    assert set(rows) >= docs_check.setting_variables()
    for section in Settings.model_fields:
        model = settings_doc.section_model(section)
        said = settings_doc.comments_of(model)
        for name, field in model.model_fields.items():
            # a comment written with the field, or its description: not bounds alone
            assert said.get(name) or field.description, (
                f"{section}.{name}: say what it does (Field(description=...) or a comment)")


def test_secrets_show_no_default() -> None:
    page = settings_doc.render()
    secret_rows = [line for line in page.splitlines()
                   if line.startswith("| `WEBGYM_") and settings_doc.SECRET.search(
                       line.split("|")[1].lower())]
    assert len(secret_rows) >= 6  # MinIO's keys, SASL's password, three API keys
    assert all(line.split("|")[2].strip() == "(secret)" for line in secret_rows), secret_rows
    assert "EMPTY" not in page  # the API keys' no-key default


def test_comments_are_read_from_the_source() -> None:
    class Example:
        # the block above,
        # on two lines
        first: int = 1  # and the end of its line

        second: str = "x"  # its own
        third: bool = True

    said = settings_doc.comments_of(Example)
    assert said == {"first": "the block above, on two lines and the end of its line",
                    "second": "its own", "third": ""}


def test_check_mode_fails_on_a_stale_page(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         ) -> None:
    page = tmp_path / "configuration.md"
    page.write_text("old\n")
    assert settings_doc.main(["--check", "--out", str(page)]) == 1
    assert "stale" in capsys.readouterr().err
    assert settings_doc.main(["--out", str(page)]) == 0
    assert settings_doc.main(["--check", "--out", str(page)]) == 0
