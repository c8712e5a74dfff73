"""Loading kline files: real data loads; every kind of broken file is a specific, named error."""

from pathlib import Path

import numpy as np
import pytest

from app.domain.errors import DataFileError
from app.market.csv_loader import load_csv, parse_file_name, symbol_from_pair
from tests.helpers.paths import BTC_USD_1D, BTC_USD_1H

HEADER = "timestamp_ms,open,high,low,close,volume\n"


GOOD_ROWS = HEADER + "".join(f"{k * 3_600_000},1,2,0.5,1.5,1\n" for k in range(2500))


def write(tmp_path: Path, body: str, name: str = "BTC-USDT_1h_test.csv") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def test_real_file_loads_with_symbol_interval_and_every_row():
    loaded = load_csv(BTC_USD_1H)
    assert loaded.series.symbol == "BTC/USD"
    assert loaded.series.interval == "1h"
    assert len(loaded.series) == 20111
    assert loaded.series.timestamp_ms[0] == 1498906800000
    assert loaded.series.close[0] == pytest.approx(2509.17)
    assert loaded.price_decimals == 2
    assert loaded.gaps == 0


def test_file_names_give_symbols_like_ccxt():
    assert symbol_from_pair("BTC-USDT") == "BTC/USDT"
    assert symbol_from_pair("XRP-USDT-PERP") == "XRP/USDT:USDT"
    assert symbol_from_pair("GOOG") == "GOOG"
    assert parse_file_name(Path("ETH-BTC_5m_20180110-20180130_unknown.csv")) == ("ETH/BTC", "5m")


def test_gaps_in_real_data_are_counted_and_can_be_refused():
    # the Coinbase daily file jumps from 2019-03-19 to 2019-04-01 (12 days missing), as its source
    assert load_csv(BTC_USD_1D).gaps == 1
    with pytest.raises(DataFileError, match=r"row 1572, field timestamp_ms: gap of 13 bars"):
        load_csv(BTC_USD_1D, allow_gaps=False)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("time,o,h,l,c,v\n1,1,1,1,1,1\n", "unexpected header"),
        (HEADER, "no candles"),
        ("", "empty"),
        (
            HEADER + "1000,1,2,0.5,1.5,10\n1000,1,2,0.5,1.5,10\n",
            "row 3, field timestamp_ms: duplicate",
        ),
        (
            HEADER + "2000,1,2,0.5,1.5,10\n1000,1,2,0.5,1.5,10\n",
            "row 3, field timestamp_ms: out-of-order",
        ),
        (HEADER + "1000,1,abc,0.5,1.5,10\n", "row 2, field high: 'abc' is not a number"),
        (HEADER + "1000,1,2,0.5,nan,10\n", "row 2, field close: 'nan' is not finite"),
        (HEADER + "1000,-1,2,0.5,1.5,10\n", "row 2, field open: -1 must be positive"),
        (HEADER + "1000,1,2,0.5,1.5,-3\n", "row 2, field volume: -3 must be non-negative"),
        (HEADER + "1000,1,1.2,0.5,1.5,1\n", "row 2: impossible candle"),
        (HEADER + "1000,1,2,0.5,1.5\n", "row 2: expected 6 cells, found 5"),
        (HEADER + "1e3,1,2,0.5,1.5,1\n", "row 2, field timestamp_ms"),
        (HEADER + "-1000,1,2,0.5,1.5,1\n", "row 2, field timestamp_ms"),
        (HEADER + "\u00b2,1,2,0.5,1.5,1\n", "row 2, field timestamp_ms"),  # a digit int() refuses
        (HEADER + "99999999999999999999,1,2,0.5,1.5,1\n", "row 2, field timestamp_ms"),
        (GOOD_ROWS + "9999999999999,1,2,0.5,inf,1\n", "row 2502, field close: 'inf' is not finite"),
        (GOOD_ROWS + "9999999999999,1,2,1.6,1.5,1\n", "row 2502: impossible candle"),
    ],
)
def test_broken_files_are_refused_with_the_row_and_field(tmp_path, body, message):
    with pytest.raises(DataFileError, match=message):
        load_csv(write(tmp_path, body))


def test_binary_file_is_a_clear_error(tmp_path):
    path = tmp_path / "BTC-USDT_1h_x.csv"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DataFileError, match="not a readable UTF-8 CSV"):
        load_csv(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataFileError, match="cannot open"):
        load_csv(tmp_path / "BTC-USDT_1h_missing.csv")


def test_interval_is_inferred_when_the_name_does_not_say(tmp_path):
    path = write(tmp_path, HEADER + "0,1,2,0.5,1.5,1\n300000,1,2,0.5,1.5,1\n", name="mydata.csv")
    loaded = load_csv(path, symbol="ABC/USDT")
    assert loaded.series.interval == "5m"
    assert np.array_equal(loaded.series.timestamp_ms, [0, 300000])


def test_a_file_with_padded_cells_loads_exactly_as_the_clean_file(tmp_path):
    lines = BTC_USD_1H.read_text(encoding="utf-8").splitlines()
    # spaces around the cells of one row: the file is read row by row, not a column at a time,
    # and must give the very same candles
    lines[-1] = ",".join(f" {cell} " for cell in lines[-1].split(","))
    padded = write(tmp_path, "\n".join(lines) + "\n", name=BTC_USD_1H.name)
    clean, loaded = load_csv(BTC_USD_1H).series, load_csv(padded).series
    for field in ("timestamp_ms", "open", "high", "low", "close", "volume"):
        assert np.array_equal(getattr(clean, field), getattr(loaded, field)), field
    assert load_csv(padded).price_decimals == load_csv(BTC_USD_1H).price_decimals


def test_a_timestamp_too_long_for_a_number_is_named_not_raised(tmp_path):
    # past the 4,300 digits Python's int() reads
    with pytest.raises(DataFileError, match="row 2, field timestamp_ms"):
        load_csv(write(tmp_path, HEADER + "9" * 5000 + ",1,2,0.5,1.5,1\n"))
