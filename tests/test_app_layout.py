"""The app fits a 1280 x 720 projector and reads in plain words first (issue 33), checked without
a browser (AppTest and the configuration); the real-browser layout check is in tests/test_browser.py."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from app.launch import LAYOUT_SETTINGS

ROOT = Path(__file__).resolve().parents[1]


def test_layout_settings_of_the_config_file_and_the_launcher_agree():
    """``dp-explorer`` may start anywhere, where config.toml is not read: it passes the same layout."""
    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
    assert {f"theme.{k}": v for k, v in theme.items()} == {
        k: json.loads(v) if v.startswith("[") else v for k, v in LAYOUT_SETTINGS.items()}
