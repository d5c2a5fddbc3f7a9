"""The editable scenario document, its undo commands and the editor that pushes them."""
