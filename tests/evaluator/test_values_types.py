"""Each value type on its own: what it reads, what it rejects, when two values are equal."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from webarena_live.evaluator.errors import NormalizationError
from webarena_live.evaluator.values import (
    Base64Text,
    Boolean,
    Coordinates,
    Currency,
    Date,
    Distance,
    Duration,
    Empty,
    FullAddress,
    JsonText,
    LocationName,
    MarkdownText,
    Month,
    Number,
    StringList,
    Text,
)


class TestText:
    def test_folds_case_accents_marks_and_spaces(self) -> None:
        assert Text("  Quest   Lumaflex\u2122 Band ").normalized == "quest lumaflex band"
        assert Text("Caf\u00e9") == Text("CAFE")
        assert Text("Buffalo-Niagara").normalized == "buffalo niagara"
        assert Text("555-1234").normalized == "555-1234"  # hyphens between digits stay

    def test_quotes_and_sentence_punctuation_around_a_value_are_ignored(self) -> None:
        assert Text('"Paris."') == Text("paris")
        assert Text("Paris") != Text("Pariss")

    def test_regex_on_either_side_matches_whole_text_ignoring_case(self) -> None:
        assert Text("^.*pending.*$") == Text("Order is PENDING now")
        assert Text("order is pending") == Text("^.*pending.*$")
        assert Text("^pending$") != Text("not pending")

    def test_alternatives_overlap(self) -> None:
        assert Text(["ok", "success"]) == Text("Success")
        assert Text(["ok", "success"]) != Text("fail")
        with pytest.raises(NormalizationError):
            Text(["only one"])

    def test_falsy_values_read_as_empty_text_and_raw_strings_compare(self) -> None:
        assert Text(None).normalized == "" and Text(0).normalized == ""
        assert Text("Hello") == "hello"
        assert Text("5") != Number(5)


class TestLocationName:
    def test_fuzzy_word_order_insensitive_match(self) -> None:
        assert LocationName("Carnegie Mellon University") == LocationName("Carnegie Mellon Univ")
        assert LocationName("Apple Store Shadyside") == LocationName("Shadyside Apple Store")
        assert LocationName("Carnegie Mellon University") != LocationName("University of Pittsburgh")

    def test_null_is_rejected(self) -> None:
        with pytest.raises(NormalizationError):
            LocationName(None)


class TestNumbers:
    def test_number_reads_numerals_separators_and_words(self) -> None:
        assert Number("1,234.5").normalized == 1234.5
        assert Number("1 000").normalized == 1000.0
        assert Number("twenty three").normalized == 23.0
        assert Number(True).normalized == 1.0
        assert Number("7") == Number(7.0)
        with pytest.raises(NormalizationError):
            Number("a lot")
        with pytest.raises(NormalizationError):
            Number("")

    def test_boolean_words(self) -> None:
        assert Boolean("Yes") == Boolean(True)
        assert Boolean("off").normalized is False
        assert Boolean(0).normalized is False
        with pytest.raises(NormalizationError):
            Boolean("maybe")

    def test_empty_spellings_and_zero_is_not_empty(self) -> None:
        for nothing in (None, "", "N / A", "none", "NULL", "nan"):
            assert Empty(nothing) == Empty(None)
        with pytest.raises(NormalizationError):
            Empty(0)
        with pytest.raises(NormalizationError):
            Empty("nothing")

    def test_currency_notations_and_tolerance(self) -> None:
        assert Currency("$1,234.50").normalized == Decimal("1234.5")
        assert Currency("1.234,50 EUR").normalized == Decimal("1234.5")
        assert Currency("-$5").normalized == Decimal("-5")
        assert Currency("$10.00") == Currency(10.05)
        assert Currency("$10.00") != Currency(10.2)
        with pytest.raises(NormalizationError):
            Currency("unknown")

    def test_currency_compares_only_the_first_alternative_like_the_reference(self) -> None:
        assert Currency([10, 17]) == Currency(10)
        assert Currency([10, 17]) != Currency(17)


class TestCalendar:
    def test_dates_in_several_notations_month_first(self) -> None:
        for spelling in ("2023-01-05", "Jan 5, 2023", "01/05/2023", "January 5,2023", "5 January 2023"):
            assert Date(spelling).normalized == "2023-01-05", spelling
        assert Date("2023-01-05") != Date("2023-01-06")
        with pytest.raises(NormalizationError):
            Date(20230105)

    def test_months_from_numbers_names_and_dates(self) -> None:
        assert Month("jan").normalized == "January"
        assert Month(3).normalized == "March"
        assert Month("09").normalized == "September"
        assert Month("2023-05").normalized == "May"
        with pytest.raises(NormalizationError):
            Month(13)
        with pytest.raises(NormalizationError):
            Month(2.5)

    def test_durations_need_a_unit_and_compare_with_tolerance(self) -> None:
        assert Duration("1h 30m").normalized == timedelta(minutes=90)
        assert Duration("1:30 hours").normalized == timedelta(minutes=90)
        assert Duration("90 minutes") == Duration("1.5 hours")
        assert Duration("10 min") == Duration("12 min")  # within 3 minutes
        assert Duration("60 min") != Duration("75 min")  # beyond max(3 min, 10%)
        assert Duration("10 hours") == Duration("10.9 hours")  # within 10%
        with pytest.raises(NormalizationError):
            Duration("90")


class TestGeo:
    def test_distances_in_units_with_tolerance(self) -> None:
        assert Distance("5 km").normalized == Decimal("5000")
        assert Distance("110k").normalized == Decimal("110000")
        assert Distance("5 km") == Distance("3.1 miles")  # 4989 m, within 2%
        assert Distance("5 km") != Distance("5.5 km")
        with pytest.raises(NormalizationError):
            Distance("5")

    @pytest.mark.filterwarnings("ignore:Latitude normalization:UserWarning")
    def test_coordinates_in_several_shapes(self) -> None:
        point = Coordinates([40.4433, -79.9436])
        assert point.normalized == {"latitude": 40.4433, "longitude": -79.9436}
        assert point == Coordinates("40.4433, -79.9436")
        assert point == Coordinates({"lat": 40.4433, "lng": -79.9436})
        assert point == Coordinates({"latitude": 40.443305, "longitude": -79.9436})
        assert point != Coordinates([40.45, -79.9436])
        with pytest.raises(NormalizationError):
            Coordinates({"x": 1, "y": 2})
        with pytest.raises(NormalizationError):
            Coordinates([95, 10])

    def test_full_address_is_standardised(self) -> None:
        spelled_out = FullAddress(
            {
                "house_number": "5000",
                "street": "Forbes Avenue",
                "city": "Pittsburgh",
                "state": "Pennsylvania",
                "postcode": "15213",
                "name": "CMU",
            }
        )
        abbreviated = FullAddress(
            {
                "house_number": "5000",
                "street": "forbes ave",
                "city": "PITTSBURGH",
                "state": "PA",
                "postcode": "15213",
            }
        )
        assert spelled_out.normalized["street"] == "forbes ave"
        assert spelled_out.normalized["state"] == "PA"
        assert spelled_out == abbreviated
        with pytest.raises(NormalizationError):
            FullAddress({"street": "Forbes Avenue"})


class TestEncoded:
    def test_json_text_ignores_key_order_and_layout(self) -> None:
        assert JsonText('{"b": 1, "a": [2, 1]}').normalized == '{"a":[2,1],"b":1}'
        assert JsonText('{"a":[2,1],"b":1}') == JsonText('{ "b":1, "a":[2, 1] }')
        assert JsonText('{"a": [1, 2]}') != JsonText('{"a": [2, 1]}')
        with pytest.raises(NormalizationError):
            JsonText({"a": 1})

    def test_markdown_layout_differences_are_ironed_out(self) -> None:
        messy = MarkdownText("##   Title  \r\n\n\n\n* item\n    + nested\n[a link\n  split]( http://x.org )")
        assert messy.normalized == "## Title\n\n- item\n  - nested\n[a link split](http://x.org)"
        assert MarkdownText("Case Matters") != MarkdownText("case matters")

    def test_base64_compares_decoded_text_and_regexes_match_it(self) -> None:
        assert Base64Text("SGVsbG8gV29ybGQ=").normalized == "Hello World"
        assert Base64Text("^.*World$") == Base64Text("SGVsbG8gV29ybGQ=")
        assert Base64Text("^.*world$") != Base64Text("SGVsbG8gV29ybGQ=")  # case-sensitive
        with pytest.raises(NormalizationError):
            Base64Text("not base64!")

    def test_string_list_is_an_unordered_set_of_items(self) -> None:
        assert StringList("632,64, 86").normalized == ("632", "64", "86")
        assert StringList("86,632,64") == StringList("632, 64 ,86")
        assert StringList("1,2") != StringList("1,2,3")
        with pytest.raises(NormalizationError):
            StringList(" , ")
