from ...judge_fixture import fake_judge  # noqa: F401  (the fixture, for the judge cut)
