"""``open_world``: connect a venue's live market, then build the world on it.

``build_world`` is synchronous (it may run off the event loop, as the window's loading does) and
never touches the network. A live venue's market is connected first, on the loop the world will
run on (ccxt's session belongs to that loop); this module does both in order, and closes the
connection when building fails, so no caller has to remember either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.config import Settings
from app.events import EventBus
from app.runtime.venue import VenueSpec
from app.runtime.venues import connect_venue
from app.runtime.world import World, WorldOptions, build_world
from app.store.writer import WriterHold
from app.workspace import Workspace


async def connect_for(
    workspace: Workspace | None, spec: VenueSpec, options: WorldOptions | None = None
) -> VenueSpec:
    """``spec`` with its live market connected, using the workspace's exchange settings.

    Raises:
        OperationalError: the settings cannot be read, or the market cannot be opened.
    """
    if not spec.live:
        return spec
    settings = (options.settings if options is not None else None) or (
        workspace.settings() if workspace is not None else Settings())
    return await connect_venue(spec, settings.exchanges,
                               options.secrets if options is not None else None)


async def open_world(
    workspace: Workspace | None,
    spec: VenueSpec,
    options: WorldOptions | None = None,
    *,
    bus: EventBus | None = None,
    hold: WriterHold | None = None,
    build: Callable[..., World] = build_world,
    off_loop: bool = False,
) -> World:
    """Connect ``spec``'s market (a live venue), then build the world (``build_world``'s
    arguments and errors; also ``connect_venue``'s).

    Args:
        off_loop: build in a worker thread (the window: reading a large workspace must not
            freeze it); the connection is made on this loop either way.
    """
    try:
        spec = await connect_for(workspace, spec, options)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    try:
        if off_loop:
            return await asyncio.to_thread(build, workspace, spec, options, bus=bus, hold=hold)
        return build(workspace, spec, options, bus=bus, hold=hold)
    except BaseException:
        if spec.market is not None:
            await spec.market.close()
        if spec.account is not None:
            await spec.account.close()
        raise
