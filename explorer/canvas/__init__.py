"""The model canvas: a QGraphicsScene that follows the scenario document, and its items."""
