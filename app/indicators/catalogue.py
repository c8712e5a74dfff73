"""The indicator catalogue: every indicator an agent may ask for, assembled from the data modules.

Everything about an indicator is data (``IndicatorDef``), so adding one is adding an entry, never a
branch. Only causal indicators are catalogued (the value at bar t depends on bars up to t only); a
test proves it for every entry. Conventions where pandas-ta and TA-Lib differ are written in each
entry's description (OBV's starting level, CMO's plain sums, TRIMA's even lengths, NATR's
smoothing), and the indicators pandas-ta computes wrongly (CCI, MFI, EOM) come from ``custom``.
"""

from __future__ import annotations

from app.indicators.defs_momentum import MOMENTUM
from app.indicators.defs_overlap_trend import OVERLAP, TREND
from app.indicators.defs_volatility_volume import VOLATILITY, VOLUME
from app.indicators.model import Catalogue, IndicatorDef

ALL_INDICATORS: tuple[IndicatorDef, ...] = MOMENTUM + OVERLAP + TREND + VOLATILITY + VOLUME


def default_catalogue() -> Catalogue:
    """A catalogue of every indicator Kestrel offers."""
    return Catalogue(ALL_INDICATORS)
