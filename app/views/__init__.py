"""What the window draws: Qt widgets and dialogs, and the Qt-free helpers only they use
(date groups, panel widths, Markdown code and LaTeX text, text positions)."""
