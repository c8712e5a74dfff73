"""Where test data lives: the bundled sample data and the shared real market data."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DATA = REPO / "resources" / "sample_data"
SHARED_DATA = REPO.parent / "shared" / "data"
KLINES = SHARED_DATA / "klines"
BTC_USD_1H = SAMPLE_DATA / "BTC-USD_1h_20170701-20191017_coinbase.csv"
BTC_USD_1D = SAMPLE_DATA / "BTC-USD_1d_20141201-20191017_coinbase.csv"
BTC_USDT_1H = SAMPLE_DATA / "BTC-USDT_1h_20190930-20191024_unknown.csv"
