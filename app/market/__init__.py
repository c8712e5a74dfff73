"""Market data: the ``MarketData`` port, kline series, CSV loading, resampling and the replay
source.
"""
