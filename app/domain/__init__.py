"""Plain domain types shared by every layer; this package imports nothing else of the app."""
