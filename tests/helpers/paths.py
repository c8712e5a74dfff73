"""Where test data lives: the app's bundled sample data and the tests' own data, both in the repo.

Nothing here points outside the repository: a fresh clone has every file the tests read
(``tests/data/README.md`` says where each one comes from).
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DATA = REPO / "resources" / "sample_data"
TEST_DATA = REPO / "tests" / "data"
KLINES = TEST_DATA / "klines"
INDICATOR_SHEETS = TEST_DATA / "indicators_reference" / "bukosabino_ta"
BTC_USD_1H = SAMPLE_DATA / "BTC-USD_1h_20170701-20191017_coinbase.csv"
BTC_USD_1D = SAMPLE_DATA / "BTC-USD_1d_20141201-20191017_coinbase.csv"
BTC_USDT_1H = SAMPLE_DATA / "BTC-USDT_1h_20190930-20191024_unknown.csv"
BTC_USDT_1D = KLINES / "BTC-USDT_1d_20200101-20201231_binance.csv"
BTC_USD_1M = KLINES / "BTC-USD_1m_20200101-20200101_bitstamp.csv"
