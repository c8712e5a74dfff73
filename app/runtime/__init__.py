"""The runtime: venues, the one composition function, the replay loop and the backtest runners.

``build_world`` (``app.runtime.world``) composes everything from a workspace and a ``Venue``
(``app.runtime.venue``, opened by ``app.runtime.venues``): the runtime holds the ports, the
adapters stay behind the venue. The command line (``app.cli``) and the window (``app.ui``) sit
above; the agents, tools, stores and adapters below know nothing of this package.
"""
