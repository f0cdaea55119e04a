"""A support agent eighteen tool calls into "why was INV-2025-08-44719 charged twice?".

Compares a typical paraphrasing summary (what a vendor compaction returns) with the firewall.
Runs offline: python examples/support_invoice.py
"""

from pathlib import Path

import firewall

HERE = Path(__file__).parent
INVOICE = "INV-2025-08-44719"

# What summaries look like in practice: the meaning survives, the strings do not.
BASELINE = ("The customer asked why their annual invoice was charged twice in early April. The "
            "agent traced it to a retry worker that replayed the charge, opened a ticket and "
            "offered to refund the duplicate to the customer's Visa.")


def main() -> None:
    (conversation,) = firewall.read_conversations(HERE / "support_invoice.json")
    fw = firewall.Firewall(keep_last=4)

    verdict = fw.check(conversation, BASELINE)
    lost = [f.value for f in verdict.findings if f.status != "present"]
    print(f"baseline summary keeps {INVOICE}: {INVOICE in BASELINE}")
    print(f"baseline summary lost {len(lost)} required literal(s): {', '.join(lost)}\n")

    result = fw.compact(conversation, summarizer=firewall.ExtractiveSummarizer())
    context = "\n".join(m["content"] for m in result.messages if isinstance(m["content"], str))
    print(result.messages[1]["content"], "\n")
    print(result.messages[2]["content"], "\n")
    print(f"firewall context keeps {INVOICE}: {INVOICE in context}")
    print(f"report: {result.report()}")


if __name__ == "__main__":
    main()
