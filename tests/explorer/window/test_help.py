"""Help ▸ User Guide renders the guide; Help ▸ Keyboard Shortcuts lists the actions' keys."""
from PySide6.QtGui import QAction, QKeySequence

from explorer.window.help import USER_GUIDE, action_shortcuts


def test_the_help_menu_has_the_guide_the_shortcuts_and_about(make_window):
    w = make_window("")
    help_menu = [a.menu() for a in w.menuBar().actions() if a.menu() is not None][-1]
    texts = [a.text().replace("&", "") for a in help_menu.actions() if not a.isSeparator()]
    assert texts == ["User Guide", "Keyboard Shortcuts", "About"]
    assert w.user_guide_action.shortcut() == QKeySequence(QKeySequence.HelpContents)


def test_user_guide_opens_with_its_title_and_pictures(make_window, qtbot):
    assert USER_GUIDE.exists()
    w = make_window("")
    w.user_guide_action.trigger()
    dialog = w._guide
    assert dialog.isVisible()
    text = dialog.browser.toPlainText()
    assert text.startswith("User guide") and "Keyboard and mouse" in text
    assert "**" not in text and "](images/" not in text  # rendered, not the raw Markdown
    assert dialog.browser.source().toLocalFile() == str(USER_GUIDE)
    # every screenshot the guide links to is shown (and scaled to fit)
    assert dialog.fit_pictures(840) == USER_GUIDE.read_text().count("](images/") > 0
    assert w.show_user_guide() is dialog  # one guide window, brought to the front


def test_keyboard_shortcuts_come_from_the_actions(make_window, qtbot):
    w = make_window("")
    dialog = w.show_shortcuts()
    qtbot.waitUntil(dialog.isVisible)
    rows = dict(dialog.rows())
    save = w.save_action.shortcut().toString(QKeySequence.NativeText)
    assert save and rows["File ▸ Save"] == save
    assert rows["Run ▸ Predict"] == "Ctrl+R"
    assert rows["Run ▸ Rank Shardings"] == "Ctrl+Shift+R"  # added by the Sharding dock
    assert "Help ▸ User Guide" in rows
    assert not any("&" in where for where in rows)
    # a new action's shortcut shows up without anyone listing it
    extra = QAction("Frobnicate", w)
    extra.setShortcut(QKeySequence("Ctrl+Alt+F"))
    w.addAction(extra)
    assert ("Frobnicate", "Ctrl+Alt+F") in action_shortcuts(w)
    dialog.close()


def test_view_menu_makes_the_timeline_rows_taller_and_shorter(make_window, qtbot):
    from explorer.timeline.lane_rows import ROW_ZOOM
    from explorer.timeline.sample import synthetic_timeline

    w = make_window("")
    w.gantt.set_timeline(synthetic_timeline(ranks=16, steps=2))
    w.gantt.set_collapsed(set())
    view = [a.menu() for a in w.menuBar().actions() if a.text().replace("&", "") == "View"][0]
    actions = {a.text().replace("&", ""): a for a in view.actions()}
    before = w.gantt.row_height_px()
    actions["Taller Timeline Rows"].trigger()
    assert w.gantt.row_height_px() > before * (ROW_ZOOM - 0.01)
    actions["Shorter Timeline Rows"].trigger()
    assert abs(w.gantt.row_height_px() - before) < 0.5
    rows = dict(w.show_shortcuts().rows())
    assert rows["View ▸ Taller Timeline Rows"]
