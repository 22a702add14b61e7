from tests.data.conftest import write_jsonl
from tuneloop.data.corpus.bands import band_of, prompt_pass_rates
from tuneloop.records import write_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams
from tuneloop.suite import load_suite


def make_log(folder, suite_path, values):
    suite = load_suite(suite_path)
    folder.mkdir()
    rows = [
        SampleRow(
            suite_revision=suite.revision,
            item_id=item_id,
            sample_index=k,
            model="m",
            seed=0,
            completion="x",
            score=v,
            scorer="numeric",
        ).to_json()
        for item_id, vals in values.items()
        for k, v in enumerate(vals)
    ]
    write_jsonl(folder / "samples.jsonl", rows)
    write_record(
        folder / "summary.json",
        EvalSummary(
            suite_path=str(suite_path),
            suite_revision=suite.revision,
            item_ids=list(values),
            model="m",
            endpoint="http://x",
            sampling=SamplingParams(n_samples=4, temperature=1.0, max_tokens=8),
        ),
    )
    return folder


def test_band_edges():
    assert [band_of(p) for p in (None, 0.0, 0.2, 0.5, 0.8, 1.0)] == [
        "unknown",
        "hard",
        "hard",
        "medium",
        "easy",
        "easy",
    ]


def test_pass_rates_by_normalized_prompt(tmp_path, tiny_suite):
    log = make_log(tmp_path / "log", tiny_suite, {"q1": [1, 1, 1, 0], "q2": [0, 0, 0, 0]})
    rates = prompt_pass_rates(log)
    assert rates == {"what is 3 + 6 ?": 0.75, "what is 40 + 2 ?": 0.0}
