"""Market charts for the desktop app: candlesticks with indicators and trades, and the order book.

``chart_widget.ChartWidget`` and ``book_widget.BookWidget`` are the panels the main window docks.
Nothing is imported here, so importing the package does not pull in pyqtgraph before a chart is
actually opened (the window's cold start stays short).
"""
