"""The desktop window, its panels and dialogs.

The settings models (and with them the pydantic modules they use) are loaded here, before any
module of this package imports Qt: once PySide6 is loaded, its import hook reads the source of
every module imported after it, and asking a pydantic module that is still being imported for
``__wrapped__`` runs pydantic's lazy attribute lookup into a circular import. A module of this
package imported first (the Settings dialog, by the bundle's builder) failed so.
"""

import app.config  # noqa: F401  # loaded ahead of Qt, as said above
