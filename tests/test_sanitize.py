"""Text from AWS never reaches a terminal or a pipe with its control sequences live."""
import json

from launcher.core.sanitize import clean, clean_data


def test_terminal_escapes_are_shown_not_run():
    osc52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
    title = "\x1b]0;owned\x07"
    cleared = clean(f"loss=1.0{osc52}{title}\x1b[2J\r\x9b31m")
    assert "\x1b" not in cleared and "\x07" not in cleared and "\r" not in cleared and "\x9b" not in cleared
    assert cleared.startswith("loss=1.0\\x1b]52;c;")
    assert "\\x9b" in cleared


def test_newlines_and_bidi_overrides_are_escaped_tab_kept():
    assert clean("a\nb\tc") == "a\\x0ab\tc"
    assert clean("admin\u202e") == "admin\\u202e"


def test_lone_surrogates_become_replacement_chars_and_encode():
    text = clean("bad \udcff byte")
    assert text == "bad \ufffd byte"
    text.encode("utf-8", errors="strict")


def test_each_unsafe_character_shows_as_the_shortest_escape_that_names_it():
    # the first and last lone surrogates, both ends of each escape's width
    assert clean("\ud800|\udfff") == "\ufffd|\ufffd"
    assert clean("\x00|\x9f|\u061c|\ufeff|\U000e0000|\U000e007f") == (
        "\\x00|\\x9f|\\u061c|\\ufeff|\\U000e0000|\\U000e007f")
    assert clean("\ud7ff\ue000") == "\ud7ff\ue000"  # their neighbours are printable as they are


def test_limit_cuts_long_values():
    assert len(clean("x" * 10_000, limit=80)) == 80
    assert [clean("abc", limit=n) for n in (1, 2, 3)] == ["…", "a…", "abc"]  # the mark counts in the limit


def test_clean_data_reaches_nested_strings_and_keys():
    data = clean_data({"a\x1b": ["\x1b[2J", {"b": "\ud800"}], "n": 3})
    assert json.loads(json.dumps(data, ensure_ascii=False)) == {"a\\x1b": ["\\x1b[2J", {"b": "\ufffd"}], "n": 3}


def test_a_quoted_value_is_its_repr_cut_at_80_characters():
    from launcher.core.sanitize import QUOTED, quoted

    assert QUOTED == 80
    assert quoted("a" * 80) == repr("a" * 80) and quoted("a" * 81) == repr("a" * 80)
    assert quoted("\x1b[2J") == repr("\x1b[2J") and "\x1b" not in quoted("\x1b[2J")
    assert quoted(12) == "'12'"
