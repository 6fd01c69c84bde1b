"""``webinfer generate --speculative ngram | DRAFT.wi [--draft-tokens K]``: the flags and the options they
give ``Generator.generate`` (llm/speculative.py)."""

from __future__ import annotations


def add_flags(g) -> None:
    g.add_argument("--speculative", metavar="ngram|DRAFT.wi",
                   help="speculative decoding: prompt-lookup drafts ('ngram') or a draft model's artifact of the "
                        "same tokenizer; greedy output is unchanged, sampling keeps its distribution")
    g.add_argument("--draft-tokens", type=int, metavar="K",
                   help="tokens drafted per verification step (default 7 for ngram, 4 for a draft model)")


def options(args) -> dict:
    """The generate() keywords for these flags ({} without --speculative); a draft artifact is opened here."""
    if args.speculative is None:
        return {}
    from .llm.generate import Generator
    from .llm.speculative import check_draft_tokens

    if args.draft_tokens is not None:
        check_draft_tokens(args.draft_tokens)
    draft = "ngram" if args.speculative == "ngram" else Generator.load(args.speculative)
    return {"speculative": draft, "draft_tokens": args.draft_tokens}
