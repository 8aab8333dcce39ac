"""The message index's lookups as SQL, its errors, and how a search says which source answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.exceptions import AdapterError
from adapter.ops.message_index import MessageIndex, conditions, literal
from adapter.ops.message_search import Life

pytestmark = pytest.mark.timeout(10)


def test_a_literal_doubles_its_quotes() -> None:
    assert literal("it's") == "'it''s'"


def test_a_lookup_by_key_names_the_topics_the_window_and_one_of_the_keys() -> None:
    where = conditions(["Paid", "O'Brien"], (1, 2), key="k 1")
    assert where == (
        "TRUE AND CAST(stored_time AS BIGINT) >= 1000 AND CAST(stored_time AS BIGINT) < 2000 "
        "AND topic IN ('Paid', 'O''Brien') AND array_has(keys, 'k 1')"
    )


def test_a_lookup_by_id_or_tag_over_every_topic_and_any_time() -> None:
    assert conditions(None, msg_id="ID") == "TRUE AND msg_id = 'ID'"
    assert conditions(None, tag="paid") == "TRUE AND tags = 'paid'"
    assert conditions([]) == "TRUE AND topic IN ('')", "no topic: nothing matches"


def test_a_missing_index_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="no message index at .*rmq-adapter spark index"):
        MessageIndex(tmp_path / "nowhere")


def test_a_corrupt_index_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / "00000000000000000000.json").write_text("{not json\n")
    with pytest.raises(AdapterError) as raised:
        MessageIndex(tmp_path)
    assert str(raised.value).startswith(f"the message index at {tmp_path} cannot be read: ")
    assert "\n" not in str(raised.value)


def test_a_search_says_which_source_answered() -> None:
    scanned = Life(records=3, topics=1)
    assert scanned.summary() == "(scanned 3 records of 1 topics in the window; source: scan)"
    indexed = Life(records=1, topics=1, source="index", indexed=2, gone=1)
    assert indexed.summary() == (
        "(source: index, which found 2 records, 1 gone from Kafka; scanned 1 records of 1 topics"
        " in the window, past the index's end or not in it)"
    )
