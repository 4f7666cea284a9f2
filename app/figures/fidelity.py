"""Figures of the fidelity report (no Streamlit import): the private table's correlations beside
the file's (:func:`correlation_figure`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["correlation_figure"]


def correlation_figure(private: pd.DataFrame, file: pd.DataFrame) -> go.Figure:
    """Two heatmaps side by side on one colour scale (-1 to 1): the Pearson correlations of the
    private table's numeric columns (and label) and those of the file."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = [str(c) for c in private.columns]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("your data (private)", "the file"),
                        horizontal_spacing=0.12)
    for col, matrix in ((1, private), (2, file.reindex(index=private.index, columns=private.columns))):
        fig.add_trace(go.Heatmap(z=matrix.to_numpy(), x=names, y=names, zmin=-1, zmax=1,
                                 colorscale="RdBu", reversescale=True, showscale=col == 2,
                                 hovertemplate="%{y} / %{x}: %{z:.2f}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=320 + 12 * len(names), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
