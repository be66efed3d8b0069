"""Secret values never leave this process except to SageMaker itself.

Two ways a spec can hand a job a secret:

* `secrets: {HF_TOKEN: arn:aws:secretsmanager:...}` (the right way): only the ARN is in the plan,
  the job's entry script fetches the value at start (train_secrets.py, rendered next to train.py)
  and the role check asks for secretsmanager:GetSecretValue on exactly those ARNs.
* `environment: {HF_TOKEN: ${HF_TOKEN}}`: the value must reach CreateTrainingJob's Environment,
  so it is in the request the SDK sends, but every plan, output and file written shows it redacted.

The rule for "looks secret" (`looks_secret`), on the variable's NAME, never its value: split the name
into words at `_`, `-`, `.` and lower-to-upper case changes; it is secret when any word is one of
SECRET_WORDS, or when the last word is KEY and the word before it is not KMS (KMS_KEY and *_KMS_KEY
name key ids, not secrets; *_KEY_ID and *_KEY_ARN end in ID/ARN and are not secret either).
So HF_TOKEN, WANDB_API_KEY, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, hfToken are secret; NCCL_DEBUG,
TOKENIZERS_PARALLELISM (TOKENIZERS is not TOKEN), KMS_KEY_ID, SSE_KMS_KEY, KEY_PREFIX are not.

A name is not the only sign: the loader also follows VALUES. A value that came from a secret-looking
variable (`${AWS_SESSION_TOKEN}`) or that has a credential's shape (`credential_kind`) may stand only
where it is redacted, an `environment` entry of a secret-looking name; anywhere else (another
environment name, a hyperparameter, a tag, any field) the spec is refused, naming the field and never
the value. The shapes (prefixes their issuers document):

* AWS access key ids begin AKIA (long-term) or ASIA (temporary), 20 characters in all
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids);
  STS session tokens are long base64 text beginning IQoJb3JpZ2lu or FwoGZXIvYXdz / FQoGZXIvYXdz;
* Hugging Face user access tokens begin hf_ (https://huggingface.co/docs/hub/security-tokens);
* GitHub tokens begin ghp_, gho_, ghu_, ghs_, ghr_ or github_pat_
  (https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/);
* Slack tokens begin xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxo- (https://api.slack.com/authentication/token-types);
* API keys of the sk- family (OpenAI's, Anthropic's sk-ant-, Stripe's sk_live_).
"""
from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"
SECRET_WORDS = frozenset({"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
                          "CREDENTIALS", "APIKEY", "PAT"})
# Secrets Manager secret ARNs: arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME-SUFFIX
# (the pattern AWS APIs document for a secret ARN, e.g.
# https://docs.aws.amazon.com/iot-mi/latest/APIReference/API_SecretsManager.html)
SECRET_ARN_PATTERN = (r"^arn:aws(-cn|-us-gov|-iso|-iso-b)?:secretsmanager:[a-z]{2}(-[a-z]+)+-\d:\d{12}:"
                      r"secret:[A-Za-z0-9/_+=.@-]{1,512}$")
_WORDS = re.compile(r"[_\-.]+|(?<=[a-z0-9])(?=[A-Z])")
# (what it is, its shape, the kinds of character its random part must mix: U upper case, L lower case, D
# digits): a real key is random text, so words that happen to share a prefix ("sk-learn-...") are not one.
_CREDENTIALS = (
    ("an AWS access key id", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"), ""),
    ("an AWS session token", re.compile(r"(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz)[A-Za-z0-9/+=]{40,}"), ""),
    ("a Hugging Face token", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"), "UL"),
    ("a GitHub token", re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"), ""),
    ("a Slack token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"), ""),
    ("an API key", re.compile(r"(?<![A-Za-z0-9])sk(?:-ant)?[-_](?:live_|test_|proj-)?[A-Za-z0-9_-]{32,}"), "ULD"),
)
_KINDS = {"U": str.isupper, "L": str.islower, "D": str.isdigit}


def _mixes(text: str, kinds: str) -> bool:
    return all(any(_KINDS[k](c) for c in text) for k in kinds)


def looks_secret(name: str) -> bool:
    """True when an environment variable NAME says its value is a secret (the rule is in the docstring)."""
    words = [w.upper() for w in _WORDS.split(name) if w]
    if any(w in SECRET_WORDS for w in words):
        return True
    return bool(words) and words[-1] == "KEY" and (len(words) < 2 or words[-2] != "KMS")


def credential_kind(value: object) -> str | None:
    """What credential `value` holds by its shape ("an AWS access key id", ...), or None; it may be part of a
    longer text (`Bearer hf_...`)."""
    if not isinstance(value, str) or len(value) < 20:
        return None
    for kind, shape, mixed in _CREDENTIALS:
        if any(_mixes(m.group()[3:], mixed) for m in shape.finditer(value)):
            return kind
    return None


def mask_credentials(text: str) -> str:
    """`text` with each credential-shaped part (as `credential_kind` finds them) replaced by REDACTED: for echoing
    what a user typed (a malformed flag) without what it may hold."""
    for _kind, shape, mixed in _CREDENTIALS:
        text = shape.sub(functools.partial(_masked, mixed=mixed), text)
    return text


def _masked(match: re.Match[str], mixed: str) -> str:
    return REDACTED if _mixes(match.group()[3:], mixed) else match.group()


def shown_value(path: tuple[str, ...], value: Any) -> Any:
    """A value given for spec path `path` as it may be shown (a sweep's `overrides`): REDACTED where it may hold a
    secret (a secret-looking environment name), or holds a credential's shape anywhere inside it."""
    if may_hold_secret(path) and value not in ("", None):
        return REDACTED
    if path == ("environment",) and isinstance(value, Mapping):
        value = redact_env(value)
    return REDACTED if _holds_credential(value) else value


def _holds_credential(value: Any) -> bool:
    if isinstance(value, str):
        return credential_kind(value) is not None
    if isinstance(value, Mapping):
        return any(_holds_credential(k) or _holds_credential(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_credential(v) for v in value)
    return False


def may_hold_secret(path: tuple[str, ...]) -> bool:
    """Whether a secret value may stand at this spec path: only an environment entry of a secret-looking
    name, which every plan, output and file shows redacted."""
    return len(path) == 2 and path[0] == "environment" and looks_secret(path[1])


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """The environment map with the values of secret-looking names replaced by REDACTED."""
    return {k: (REDACTED if looks_secret(str(k)) and v not in ("", None) else v) for k, v in env.items()}


def redact_request(request: dict[str, Any]) -> dict[str, Any]:
    """A CreateTrainingJob request as it may be shown: Environment redacted (a copy; the input is kept)."""
    if not request.get("Environment"):
        return request
    return {**request, "Environment": redact_env(request["Environment"])}
