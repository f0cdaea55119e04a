"""The built-in packs on secrets, family by family: every true positive is extracted exactly
and flagged sensitive; no clean negative is flagged.

The cases are written here from the vendors' published token formats (prefix, length,
alphabet); every token is generated with a fixed seed, so the source holds no secret.
`firewall scan` runs the same engine over one conversation per case.
"""

from __future__ import annotations

import base64
import json
import random
import string

import pytest

from firewall.extraction.extract import Extractor, Scanner
from firewall.extraction.packs import load_packs
from firewall.turns import Turn

RANDOM = random.Random(16)
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
B64 = ALNUM + "+/"
B64URL = ALNUM + "_-"


def rand(alphabet: str, n: int) -> str:
    return "".join(RANDOM.choice(alphabet) for _ in range(n))


def b64url(data: dict) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def jwt() -> str:
    header = b64url({"alg": "HS256", "typ": "JWT"})
    payload = b64url({"sub": rand(string.digits, 10), "name": "Ann", "iat": 1516239022})
    return f"{header}.{payload}.{rand(B64URL, 43)}"


def pem(kind: str) -> str:
    body = "\n".join(rand(B64, 64) for _ in range(6))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n{rand(B64, 20)}==\n-----END {kind}PRIVATE KEY-----"


def sentry_org() -> str:
    payload = base64.b64encode(json.dumps(
        {"iat": 1700000000.5, "url": "https://sentry.io", "region_url": "https://us.sentry.io",
         "org": "acme"}, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"sntrys_{payload}_{rand(B64, 43)}"


def k8s_manifest(value: str) -> str:
    return (f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-db\ntype: Opaque\ndata:\n"
            f"  password: {value}\n")


# (family, secret, the text it stands in): the secret must be extracted exactly, flagged
def _positives() -> list[tuple[str, str, str]]:
    cases: list[tuple[str, str, str]] = []

    def add(family: str, secret: str, *templates: str) -> None:
        for template in templates:
            cases.append((family, secret, template.format(s=secret)))

    add("aws-access-key-id", "AKIA" + rand(BASE32, 16), "aws_access_key_id = {s}",
        '{{"AccessKeyId": "{s}"}}')
    add("aws-access-key-id", "ASIA" + rand(BASE32, 16), "export AWS_ACCESS_KEY_ID={s}")
    add("aws-secret-access-key", rand(B64, 40), "aws_secret_access_key = {s}",
        'AWS_SECRET_ACCESS_KEY="{s}"')
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
        add("github", prefix + rand(ALNUM, 36), "GITHUB_TOKEN={s}")
    add("github", "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
        "git clone https://x-access-token:{s}@github.com/acme/app.git",
        "token: {s}")
    add("gitlab", "glpat-" + rand(B64URL, 20), "GITLAB_TOKEN={s}", "PRIVATE-TOKEN: {s}")
    add("gitlab", "glpat-" + rand(B64URL, 36) + ".01" + rand(LOWER_ALNUM, 7), "use {s} here")
    for prefix in ("gldt-", "glrt-", "glft-", "glsoat-"):
        add("gitlab", prefix + rand(ALNUM, 20), "token {s}")
    add("gitlab", "glptt-" + rand(HEX, 40), "trigger {s}")
    add("slack", f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 13)}-{rand(ALNUM, 24)}",
        "SLACK_BOT_TOKEN={s}", '{{"token": "{s}"}}')
    add("slack", f"xoxp-{rand(string.digits, 12)}-{rand(string.digits, 12)}-"
                 f"{rand(string.digits, 13)}-{rand(HEX, 32)}", "user token {s}")
    add("slack", "xoxe.xoxp-1-" + rand(ALNUM, 164), "config token: {s}")
    add("slack", "xoxe.xoxb-1-" + rand(ALNUM, 165), "{s}")
    add("slack", "xoxe-1-" + rand(ALNUM, 146), "refresh_token={s}")
    add("slack", f"xoxs-{rand(string.digits, 10)}-{rand(string.digits, 12)}-"
                 f"{rand(string.digits, 12)}-{rand(HEX, 64)}", "legacy {s}")
    add("slack", "xoxa-2-" + rand(ALNUM, 40), "workspace {s}")
    add("slack", f"xapp-1-A{rand(BASE32, 10)}-{rand(string.digits, 13)}-{rand(HEX, 64)}",
        "SLACK_APP_TOKEN={s}")
    add("slack-webhook", "https://hooks.slack.com/services/T" + rand(BASE32, 8) + "/B"
        + rand(BASE32, 8) + "/" + rand(ALNUM, 24), "POST {s}")
    add("stripe", "sk_live_" + rand(ALNUM, 24), "STRIPE_SECRET_KEY={s}")
    add("stripe", "rk_test_" + rand(ALNUM, 99), "curl https://api.stripe.com -u {s}:")
    add("openai", "sk-proj-" + rand(B64URL, 58) + "T3BlbkFJ" + rand(B64URL, 58),
        "OPENAI_API_KEY={s}", 'client = OpenAI(api_key="{s}")')
    add("openai", "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20), "key: {s}")
    add("anthropic", "sk-ant-api03-" + rand(B64URL, 93) + "AA", "ANTHROPIC_API_KEY={s}")
    add("anthropic", "sk-ant-admin01-" + rand(B64URL, 93) + "AA", "admin {s}")
    add("google-api-key", "AIza" + rand(B64URL, 35), "https://maps.example/js?key={s}&v=3")
    add("jwt", jwt(), "Authorization: Bearer {s}", '{{"id_token": "{s}"}}', "cookie={s}")
    add("jwt-base64", base64.b64encode(jwt().encode()).decode(), "session: {s}")
    add("private-key", pem("RSA "), "cat id_rsa\n{s}\n")
    add("private-key", pem("OPENSSH "), "{s}")
    add("private-key", pem(""), '{{"private_key": "{s}"}}'.replace("\n", "\\n"))
    add("private-key", pem("EC "), "key:\n{s}")
    add("sentry", sentry_org(), "SENTRY_AUTH_TOKEN={s}", "sentry-cli --auth-token {s} releases")
    add("sentry", "sntryu_" + rand(HEX, 64), "token {s}")
    add("hugging-face", "hf_" + rand(string.ascii_letters, 34), "HF_TOKEN={s}",
        "huggingface-cli login --token {s}")
    add("hugging-face", "api_org_" + rand(string.ascii_letters, 34), "{s}")
    add("atlassian", "ATATT3" + rand(B64URL + "=", 178) + rand("0123456789ABCDEF", 8),
        "JIRA_API_TOKEN={s}", "curl -u me@acme.dev:{s} https://acme.atlassian.net")
    add("cloudflare-origin-ca", f"v1.0-{rand(HEX, 24)}-{rand(HEX, 146)}",
        "CF_ORIGIN_CA_KEY={s}")
    add("azure-ad-client-secret", rand(ALNUM, 3) + "8Q~" + rand(ALNUM + "_~.-", 34),
        'AZURE_CLIENT_SECRET="{s}"', "client_secret: {s}")
    add("npm", "npm_" + rand(ALNUM, 36), "//npm.internal.example/:_authToken={s}")
    add("pypi", "pypi-AgEIcHlwaS5vcmc" + rand(B64URL, 70), "password = {s}")
    add("twilio", "SK" + rand(HEX, 32), "TWILIO_API_KEY={s}")
    add("sendgrid", f"SG.{rand(B64URL, 22)}.{rand(B64URL, 43)}", "SENDGRID_API_KEY={s}")
    add("shopify", "shpat_" + rand(HEX, 32), "X-Shopify-Access-Token: {s}")
    add("shopify", "shpss_" + rand(HEX, 32), "{s}")
    add("digitalocean", "dop_v1_" + rand(HEX, 64), "DIGITALOCEAN_TOKEN={s}")
    add("vault", "hvs." + rand(B64URL, 95), "VAULT_TOKEN={s}")
    add("databricks", "dapi" + rand(HEX, 32), "DATABRICKS_TOKEN={s}")
    add("linear", "lin_api_" + rand(ALNUM, 40), "{s}")
    add("postman", f"PMAK-{rand(HEX, 24)}-{rand(HEX, 34)}", "x-api-key: {s}")
    add("grafana", f"glsa_{rand(ALNUM, 32)}_{rand(HEX, 8)}", "{s}")
    add("telegram", rand(string.digits, 10) + ":AA" + rand(B64URL, 33), "bot{s}/getMe")
    add("1password", "A3-" + rand(BASE32, 6) + "-" + rand(BASE32, 11) + "-" + "-".join(
        rand(BASE32, 5) for _ in range(3)), "OP_SECRET_KEY={s}")
    add("sourcegraph", "sgp_" + rand(HEX, 16) + "_" + rand(HEX, 40), "SRC_ACCESS_TOKEN={s}")
    add("octopus", "API-" + rand(string.ascii_uppercase + string.digits, 26), "{s}")
    add("settlemint", "sm_pat_" + rand(ALNUM, 16), "token {s}")
    add("gitlab-session", "_gitlab_session=" + rand(LOWER_ALNUM, 32), "Cookie: {s}")
    add("vault-legacy", "s." + rand(ALNUM, 24), "VAULT_TOKEN={s}")
    add("facebook-app-token", rand(string.digits, 15) + "|" + rand(B64URL, 27),
        "access_token={s}&fields=id")
    add("uuid-api-key", "6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", 'HEROKU_API_KEY="{s}"')
    add("kubernetes-secret", base64.b64encode(rand(ALNUM, 18).encode()).decode(),
        k8s_manifest("{s}"))
    add("curl-user", "deploy:" + rand(ALNUM, 14), "curl -u {s} https://ci.acme.dev/job")
    add("curl-user", "admin:" + rand(ALNUM, 12), "curl --user '{s}' -X POST https://x.dev")
    add("url-password", rand(ALNUM, 16), "DATABASE_URL=postgres://app:{s}@db.internal:5432/x")
    add("password-assignment", "Q" + rand(ALNUM, 13) + "!", "DB_PASSWORD={s}",
        '{{"password": "{s}"}}')
    add("bearer", rand(B64URL, 40), 'curl -H "Authorization: Bearer {s}" https://api.x.dev')
    add("api-key-header", rand(ALNUM, 32), 'curl -H "X-API-Key: {s}" https://api.x.dev')
    # vendors without a prefix: a key/token/secret name and a high-entropy value
    for vendor, value in (("adafruit", rand(LOWER_ALNUM, 32)), ("algolia", rand(LOWER_ALNUM, 32)),
                          ("bitbucket", rand(LOWER_ALNUM, 32)), ("datadog", rand(LOWER_ALNUM, 40)),
                          ("discord", rand(HEX, 64)), ("heroku", rand(LOWER_ALNUM, 30)),
                          ("mailgun", "key-" + rand(HEX, 32)), ("twitch", rand(LOWER_ALNUM, 30))):
        add("generic-assignment", value, vendor + '_api_token = "{s}"',
            vendor.upper() + "_SECRET={s}", vendor + 'Token := "{s}"',
            '{{"' + vendor + '_key": "{s}"}}', vendor + "_auth_token: {s}",
            "<" + vendor + "_api_key>{s}</" + vendor + "_api_key>")
    # the syntaxes keys are written in: ini, escaped JSON, XML and YAML blocks, typed
    # declarations, PHP, Makefile operators, CSV, Logstash, a call
    value = rand(LOWER_ALNUM, 32)
    add("generic-syntax", value, "acmeToken = {s}", '\\{{\\"acme_token\\": \\"{s}\\"\\}}',
        "<acmeToken>\n    {s}\n</acmeToken>", "acme_token: |\n  {s}", "acme_token: >\n  {s}",
        'var acmeToken string = "{s}"', 'String acmeToken = "{s}";', 'let acmeToken = `{s}`',
        '$acmeToken .= "{s}";', 'ACME_TOKEN ::= "{s}"', 'ACME_TOKEN ?= "{s}"',
        'ACME_TOKEN += "{s}"', "acmeToken,{s},", '  "acmeToken" => "{s}"',
        'client.set_token("{s}")')
    return cases


POSITIVES = _positives()

# (family, clean text): nothing in it may be flagged sensitive
NEGATIVES = [
    ("aws", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"),
    ("aws", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws", "key = AKIAXXXXXXXXXXXXXXXX, and ASIAN markets"),
    ("github", "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("github", "export GITHUB_TOKEN=${GITHUB_TOKEN}"),
    ("gitlab", "GITLAB_TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx"),
    ("slack", "SLACK_BOT_TOKEN=xoxb-your-token-here"),
    ("slack", "see https://api.slack.com/messaging/webhooks"),
    ("stripe", "publishable pk_live_51HxFAKEbCdEfGhIjKlMnOpQr; sk_test_xxxxxxxxxxxxxxxx"),
    ("openai", "pip install scikit-learn; sk-learn is not a package"),
    ("hugging-face", "from huggingface_hub import hf_hub_download"),
    ("jwt", "config.eyJhbGciOiJIUzI1NiJ9.settings is a dotted name"),
    ("private-key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
                    "-----END PUBLIC KEY-----"),
    ("private-key", "the file starts with -----BEGIN OPENSSH PRIVATE KEY----- and that is all"),
    ("kubernetes", "kind: ConfigMap\ndata:\n  mode: production\n  log_level: debug\n"),
    ("kubernetes", "kind: Secret\ndata:\n  password: {{ .Values.dbPassword }}\n"),
    ("curl", "curl -u $USER:$PASSWORD https://ci.acme.dev"),
    ("curl", 'curl -u "<username>:<password>" https://api.example.com'),
    ("url", "postgres://app:${DB_PASSWORD}@db:5432/orders and mysql://root:****@localhost/x"),
    ("password", "password: ********, DB_PASSWORD=${DB_PASSWORD}, password_min_length = 12"),
    ("password", 'password = os.environ["DB_PASSWORD"]'),
    ("bearer", "Bearer authentication uses a Bearer <token>; Bearer $API_TOKEN"),
    ("api-key-header", "X-API-Key: your-api-key-here"),
    ("generic", 'api_key = os.environ.get("API_KEY")'),
    ("generic", "token = tokenizer.encode(text); max_tokens = 4096; key=lambda x: x[0]"),
    ("generic", "sorted(keys, key=str.lower); tokens, 4096; set_token(user_id)"),
    ("generic", "<auth>\n  <user>admin</user>\n</auth>; secretKeyRef:\n  name: db-secret"),
    ("generic", "SECRET_KEY = settings.DJANGO_SECRET_KEY2"),
    ("generic", "auth_token: ${AUTH_TOKEN}; secret_name: prod-db-credentials"),
    ("generic", "token_id: 550e8400-e29b-41d4-a716-446655440000"),
    ("generic", "api_key: your_api_key_here123"),
    ("generic", 'cache_key = "user_session_v2"; primary_key = "order_id"'),
    ("generic", "commit 3f2a9c1e5b7d4a6c8e0f2b4d6a8c0e1f3a5b7c9d fixed the token refresh"),
    ("generic", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("retail", "order #W2378156 paid with credit_card_8897086; user mia_li_3668"),
    ("prose", "this.someMethodNameHere1234 and API-GATEWAY-v2; the s.length property"),
    ("retail", '{"authenticated_user_id": "fatima_taylor_3452", "auth_user_name": "ann_lee_4411"}'),
    ("generic", "author: jdoe2024xyz; token_user_id = u_8f3k2m9q1z"),
]


@pytest.fixture(scope="module")
def extractor() -> Extractor:
    return Extractor(load_packs())


def _flagged(extractor: Extractor, text: str) -> dict[str, bool]:
    scanner = Scanner(extractor)
    scanner.add(Turn(role="user", text=text))
    return {lit.value: lit.sensitive for lit in scanner.result().literals}


@pytest.mark.parametrize("family, secret, text", POSITIVES,
                         ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(POSITIVES)])
def test_secret_is_extracted_exactly_and_flagged_sensitive(extractor, family, secret, text):
    found = _flagged(extractor, text)
    assert found.get(secret) is True, f"{family}: {secret!r} not flagged in {sorted(found)}"


@pytest.mark.parametrize("family, text", NEGATIVES,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(NEGATIVES)])
def test_clean_negative_is_not_flagged(extractor, family, text):
    flagged = [value for value, sensitive in _flagged(extractor, text).items() if sensitive]
    assert flagged == [], f"{family}: flagged {flagged}"


def test_every_family_has_true_positives_and_the_suite_is_large():
    assert len({family for family, _, _ in POSITIVES}) >= 35
    assert len(POSITIVES) >= 120 and len(NEGATIVES) >= 30


def test_a_long_secret_manifest_is_read_whole_without_a_timeout(extractor):
    # a kubectl dump: 3,000 values under one data: block, after 1,000 lines of other YAML.
    # A rule whose cost grows with the lines it looks back over times out here (fail closed:
    # the turn is kept, nothing pinned); one that stops after 50 lines misses the rest.
    values = [rand(B64, 24) for _ in range(3000)]
    text = ("kind: ConfigMap\ndata:\n" + "".join(f"  key{i}: value{i}\n" for i in range(1000))
            + "---\nkind: Secret\ndata:\n"
            + "".join(f"  k{i}: {v}\n" for i, v in enumerate(values)))
    scanner = Scanner(extractor)
    scanner.add(Turn(role="tool", text=text))
    result = scanner.result()
    assert result.timeouts == []
    flagged = {lit.value for lit in result.literals if lit.sensitive}
    assert set(values) <= flagged and not any(v.startswith("value") for v in flagged)


def test_sensitivity_precision_on_false_positive_cases(extractor):
    """Issue 28: lines in the style of a secret scanner's own false-positive tests (names that
    say key/secret/password, references such as ``var.db_password`` or ``$(cat ...)``,
    identifiers such as ``struct_X509_pubkey_st`` or ``s.AcceptanceTimeoutSeconds``, ids beside
    key-ish names) were flagged sensitive 14 % of the time, and every name overlapping such a
    match inherited it. At most 8 % may be, and every secret of the fixture stays flagged, as
    user text, tool output and a tool-call argument."""
    from secret_precision import measure

    result = measure(extractor)
    assert result.negatives >= 100 and result.positives >= 90
    assert result.false_positive_share <= 0.08, result.flagged
    assert result.missed == []
