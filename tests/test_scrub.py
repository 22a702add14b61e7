import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneloop.records.trace import Message, Trace
from tuneloop.scrub import Scrubber, ScrubRules

SECRETS = [
    "sk-proj-abcDEF0123456789ghiJKL0123",
    "sk-ant-api03-FAKEfakeFAKEfake0123",
    "sk-0123456789abcdefABCDEF",
    "ghp_abcdefghijklmnopqrstuvwxyz0123",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_secrets_are_replaced(secret):
    s = Scrubber()
    out = s.text(f"config: {secret} end")
    assert secret not in out and out == "config: <SECRET> end"
    assert s.counts == {"secret": 1}


def test_bearer_email_ip_and_counts():
    s = Scrubber()
    out = s.text(
        "Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9.sig mail a.b+c@mail.example.org from "
        "192.168.0.1 or 2001:db8::8a2e:370:7334"
    )
    assert out == "Authorization: Bearer <SECRET> mail <EMAIL> from <IP> or <IP>"
    assert s.counts == {"secret": 1, "email": 1, "ip": 2}


@pytest.mark.parametrize(
    "text", ["What is 37 + 45?", "version 1.2.3", "999.1.1.1", "12:30", "a@b", "sk-short"]
)
def test_ordinary_text_is_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text and not s.counts


def test_rules_are_configurable():
    s = Scrubber(
        ScrubRules(
            emails=False, ips=False, replacement="[{kind}]", extra_patterns={"phone": r"\+\d{11}"}
        )
    )
    assert s.text("x@example.com 10.0.0.1 +15551234567") == "x@example.com 10.0.0.1 [PHONE]"


def test_trace_scrub_covers_every_text_field():
    t = Trace(
        source="s",
        source_id="id-a@b.com",
        source_file="f",
        source_lines=[1],
        messages=[
            Message(
                role="assistant", content="k sk-ant-api03-0123456789abcdef", reasoning="ip 8.8.8.8"
            )
        ],
        metadata={"note": ["ghp_abcdefghijklmnopqrstuvwxyz0123"]},
    )
    clean = Scrubber().trace(t).model_dump_json()
    for leaked in ("sk-ant", "8.8.8.8", "ghp_", "a@b.com"):
        assert leaked not in clean


@given(st.text(alphabet="abcdefXYZ0123456789 +-_?.", max_size=40))
def test_secret_never_survives_in_any_context(prefix):
    out = Scrubber().text(prefix + " sk-proj-TUNELOOPfake0000KEY1111notreal2222 " + prefix)
    assert "TUNELOOPfake" not in out


def test_a_reject_excerpt_never_cuts_a_key_short():
    from tuneloop.data.ingest.base import EXCERPT_CHARS, cut

    key = "sk-proj-TUNELOOPfake0000KEY1111notreal2222"
    line = "x" * (EXCERPT_CHARS - 12) + " " + key + ' "more"'
    assert Scrubber().text(cut(line)).endswith("<SECRET>")


# ---- secrets in identifiers, any whitespace, more provider formats -------------------------

MORE_SECRETS = [
    "Bearer  abcdefghijklmnopqrstu0123",
    "Bearer\tabcdefghijklmnopqrstu0123",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "postgres://admin:hunter2pw@db.example.com/x",
]


@pytest.mark.parametrize("secret", MORE_SECRETS)
def test_more_formats_and_any_whitespace(secret):
    material = {
        "Bearer": "abcdefghijklmnopqrstu0123",
        "aws_secret": "wJalrXUtnFEMI",
        '"SecretAccessKey"': "wJalrXUtnFEMI",
        "postgres": "hunter2pw",
    }
    needle = next((v for k, v in material.items() if secret.startswith(k)), secret)
    assert needle not in Scrubber().text(f"x {secret} y")


def test_identifiers_names_keys_and_file_names_are_scrubbed():
    key = "sk-proj-TUNELOOPfake0000KEY1111"
    t = Trace(
        source="s",
        source_id=f"resp_{key}",
        source_file=f"/logs/{key}/requests.jsonl",
        source_lines=[1],
        model=f"ft:{key}",
        messages=[
            Message(role="user", content="hi"),
            Message(
                role="assistant",
                tool_calls=[{"id": f"call_{key}", "name": f"tool_{key}", "arguments": "{}"}],
            ),
            Message(role="tool", tool_call_id=f"call_{key}", name=f"tool_{key}", content="ok"),
        ],
        metadata={"tools": [{key: {"nested": {f"{key}_2": 1}}}]},
    )
    assert "TUNELOOPfake" not in Scrubber().trace(t).model_dump_json()


def test_redacted_dict_keys_are_all_kept():
    out = Scrubber().value(
        {"sk-proj-aaaaaaaaaaaaaaaa1111": 1, "sk-proj-bbbbbbbbbbbbbbbb2222": 2, "<SECRET>": 3}
    )
    assert sorted(out.values()) == [1, 2, 3] and "<SECRET>" in out and out["<SECRET>"] == 3


def test_a_known_key_is_redacted_by_value():
    s = Scrubber(ScrubRules(known_keys=("plain-looking-key-42",)))
    assert s.text("key is plain-looking-key-42.") == "key is <SECRET>."


def test_code_in_a_json_string_is_not_an_email_but_an_escaped_address_is() -> None:
    from tuneloop.scrub import EMAIL

    assert EMAIL.findall(r'{"content": "import x\n@app.get(\"/\")\ndef f(): ..."}') == []
    assert EMAIL.findall(r'"line one\nops@example.org"') == ["ops@example.org"]
