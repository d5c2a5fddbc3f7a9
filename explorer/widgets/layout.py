"""Small layout helpers: a read-only figures table, and a bar stacked above a view."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

__all__ = ["read_only_table", "stacked"]


def read_only_table(columns: list[str], parent: QWidget | None = None) -> QTableWidget:
    """A figures table: read-only rows, first column stretched, the rest fit to content."""
    table = QTableWidget(0, len(columns), parent)
    table.setHorizontalHeaderLabels(columns)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectRows)
    table.setAlternatingRowColors(True)
    table.setShowGrid(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.Stretch)
    for c in range(1, len(columns)):
        header.setSectionResizeMode(c, QHeaderView.ResizeToContents)
    return table


def stacked(top: QWidget, main: QWidget, parent: QWidget | None = None) -> QWidget:
    """``top`` (a caption or an error bar) above ``main``, without margins."""
    pane = QWidget(parent)
    box = QVBoxLayout(pane)
    box.setContentsMargins(0, 0, 0, 0)
    box.setSpacing(0)
    box.addWidget(top)
    box.addWidget(main, 1)
    return pane
