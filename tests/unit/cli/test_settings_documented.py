"""The README's settings table names every setting with its real default."""

from __future__ import annotations

import re
from pathlib import Path

from asanoha.platform.settings import Settings

README = Path(__file__).resolve().parents[3] / "README.md"


def documented_settings() -> dict[str, str]:
    rows = re.findall(r"^\| `(ASANOHA_[A-Z_]+)` \| `([^`]*)` \|", README.read_text("utf-8"), re.M)
    return dict(rows)


def test_every_setting_is_in_the_readme_with_its_default() -> None:
    documented = documented_settings()
    for name, field in Settings.model_fields.items():
        variable = f"ASANOHA_{name.upper()}"
        assert variable in documented, f"README: add {variable} to the settings table"
        default = field.default
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        if isinstance(default, float) and default.is_integer():
            shown = str(int(default))
        assert documented[variable] == shown, f"README: {variable} defaults to {shown}"
    assert set(documented) <= {f"ASANOHA_{name.upper()}" for name in Settings.model_fields}
