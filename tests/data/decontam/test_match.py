from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.data.decontam.match import (
    RowText,
    build_index,
    find_contaminated,
    find_contaminated_reference,
    group_hits,
)

ITEMS = [
    ("add", "What is 37 + 45?"),
    ("long", " ".join(f"t{i}" for i in range(20))),
    ("short", "Hi there"),
]


def test_rules_and_reasons():
    index = build_index("suite", ITEMS, n=13, min_tokens=4)
    rows = [
        RowText("What is 37 + 45?\n82", "What is 37 + 45?"),  # exact + whole-item window
        RowText("so, WHAT is 37+45 ? tell me", "so, WHAT is 37+45 ? tell me"),  # window only
        RowText("What is 37 + 46?\n83", "What is 37 + 46?"),  # a different problem
        RowText("x " + " ".join(f"t{i}" for i in range(5, 18)) + " y", "x"),  # one 13-gram
        RowText("hi there, friend", "hi there, friend"),  # short item: exact only
        RowText("Hi  there", "Hi  there"),
    ]
    hits = group_hits(find_contaminated(rows, index))
    assert hits == {
        0: [("exact_prompt", ["add"]), ("ngram_6", ["add"])],
        1: [("ngram_6", ["add"])],
        3: [("ngram_13", ["long"])],
        5: [("exact_prompt", ["short"])],
    }
    assert hits == group_hits(find_contaminated_reference(rows, index))


def test_rows_do_not_match_across_boundaries():
    index = build_index("suite", [("a", "alpha beta gamma delta")], n=13)
    rows = [RowText("x alpha beta", ""), RowText("gamma delta y", "")]
    assert find_contaminated(rows, index) == {}


words = st.sampled_from(
    [
        "what",
        "is",
        "37",
        "+",
        "45",
        "?",
        "a",
        "b",
        "Ünïcode",
        "東京",
        "½",
        "x\x00y",
        "—",
        "a_very_long_token_of_more_than_sixteen_bytes",
        "abcdefghijklmnop",
    ]
)


@settings(max_examples=120, deadline=None)
@given(
    items=st.lists(st.lists(words, min_size=1, max_size=8), min_size=1, max_size=5),
    rows=st.lists(
        st.tuples(
            st.lists(words, max_size=6),
            st.sampled_from(["\n", " ", "", "\n\n"]),
            st.lists(words, max_size=10),
            st.sampled_from([" ", "\n"]),
        ),
        max_size=6,
    ),
    n=st.integers(1, 6),
    min_tokens=st.integers(1, 4),
)
def test_fast_equals_reference(items, rows, n, min_tokens):
    index = build_index("s", [(f"i{k}", " ".join(w)) for k, w in enumerate(items)], n, min_tokens)
    texts = []
    for prompt_words, sep, rest, joiner in rows:
        prompt = joiner.join(prompt_words)  # prompts with and without inner newlines
        texts.append(RowText(prompt + sep + " ".join(rest), prompt))
    assert find_contaminated(texts, index) == find_contaminated_reference(texts, index)


def test_prompt_tokens_reused_from_the_text_when_it_starts_with_the_prompt():
    index = build_index("suite", [("add", "What is 37 + 45?")], n=13)
    rows = [
        RowText("What is\n37 + 45?\n82", "What is\n37 + 45?"),  # prefix, multi-line prompt
        RowText("What is 37 + 45?", "What is 37 + 45?"),  # text is the prompt
        RowText("What is 37 + 45?!\nno", "What is 37 + 45?"),  # not followed by a newline
        RowText("sys\nWhat is 37 + 45?", "What is 37 + 45?"),  # not a prefix
        RowText("What is 37\n+ 45? x", "What is 37"),  # prompt shorter than the item
    ]
    fast = find_contaminated(rows, index)
    assert fast == find_contaminated_reference(rows, index)
    assert {r for r, rules in fast.items() if "exact_prompt" in rules} == {0, 1, 2, 3}
