from hypothesis import given
from hypothesis import strategies as st

from tuneloop.data.decontam.numwords import spell_digits, spell_number, words_to_digits


@given(st.integers(min_value=0, max_value=10**12 - 1))
def test_spelled_numbers_read_back(n):
    assert words_to_digits(spell_number(n)) == str(n)


def test_common_forms():
    assert spell_number(38) == "thirty-eight"
    assert words_to_digits("one hundred and five, Thirty Eight") == "105, 38"
    assert words_to_digits("three and four") == "3 and 4"  # two numbers, not 34
    assert words_to_digits("three five") == "3 5"


def test_a_minus_sign_and_a_line_break_end_a_number():
    assert words_to_digits(spell_digits("What is 59 - 7?")) == "What is 59 - 7?"
    assert words_to_digits("thirty\neight") == "30\n8"


def test_words_inside_other_words_are_left_alone():
    assert words_to_digits("someone often tended it") == "someone often tended it"
