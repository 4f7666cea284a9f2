"""``dp-explorer`` console script: start the Streamlit app (bundled digits dataset selected)."""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    from streamlit.web import cli as stcli

    app = Path(__file__).resolve().parent / "streamlit_app.py"
    # The same hardened defaults as .streamlit/config.toml, whatever the working directory.
    defaults = [
        "--server.address", "localhost", "--server.maxUploadSize", "50",
        "--server.enableXsrfProtection", "true", "--browser.gatherUsageStats", "false",
        "--client.showErrorDetails", "none",
    ]
    sys.argv = ["streamlit", "run", str(app), *defaults, *sys.argv[1:]]
    sys.exit(stcli.main())


if __name__ == "__main__":  # pragma: no cover
    main()
