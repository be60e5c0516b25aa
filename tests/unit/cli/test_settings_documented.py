"""The operations guide's settings table names every setting with its real default."""

from __future__ import annotations

import re
from pathlib import Path

from asanoha.platform.settings import Settings

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "operations.md"


def documented_settings() -> dict[str, str]:
    rows = re.findall(r"^\| `(ASANOHA_[A-Z0-9_]+)` \| `([^`]*)` \|", GUIDE.read_text("utf-8"), re.M)
    return dict(rows)


def test_every_setting_is_in_the_operations_guide_with_its_default() -> None:
    documented = documented_settings()
    for name, field in Settings.model_fields.items():
        variable = f"ASANOHA_{name.upper()}"
        assert variable in documented, (
            f"docs/guides/operations.md: add {variable} to the settings table"
        )
        default = field.default
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        if isinstance(default, float) and default.is_integer():
            shown = str(int(default))
        assert documented[variable] == shown, (
            f"docs/guides/operations.md: {variable} defaults to {shown}"
        )
    assert set(documented) <= {f"ASANOHA_{name.upper()}" for name in Settings.model_fields}
