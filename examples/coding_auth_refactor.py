"""A coding agent hours into an auth refactor: it edited src/auth/handler.ts and committed.

Compacts the Anthropic-format session offline and shows that the paths, the branch, the
commit and the test id survive while a paraphrase loses them.
Runs offline: python examples/coding_auth_refactor.py
"""

from pathlib import Path

import firewall

HERE = Path(__file__).parent

BASELINE = ("The agent migrated the login handler and logout to the new session store on a "
            "feature branch, fixed a failing test, committed, and will migrate the remaining "
            "middleware next.")


def main() -> None:
    (conversation,) = firewall.read_conversations(HERE / "coding_auth_refactor.json")
    fw = firewall.Firewall(keep_last=2)

    literals = [lit.value for lit in fw.scan(conversation)]
    kept = [v for v in literals if v in BASELINE]
    print(f"{len(literals)} literals in the session; the paraphrase keeps {len(kept)}")

    result = fw.compact(conversation, summarizer=firewall.ExtractiveSummarizer())
    blocks = result.messages[0]["content"]  # Anthropic: one user message, two text blocks
    print(blocks[0]["text"], "\n")
    print(blocks[1]["text"], "\n")
    context = repr(result.messages)
    for value in ("src/auth/handler.ts", "src/middleware/requireAuth.ts:57",
                  "refactor/session-store", "3f9c2ab"):
        print(f"{value!r} in the compacted context: {value in context}")


if __name__ == "__main__":
    main()
