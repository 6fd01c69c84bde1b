"""`webinfer generate`: text from an artifact built for generation, with the options the Generator takes
(sampling, a constraint, speculative decoding, a prefix cache file), streamed or as one JSON line."""

from __future__ import annotations

import sys

from . import cli_args as A
from . import cli_prefix, cli_speculative
from .cli_constrain import add_constraint_args, constraint_from_args


def register(sub) -> None:
    g = sub.add_parser("generate", help="generate text with an artifact built from a decoder with a KV cache")
    g.add_argument("artifact")
    g.add_argument("--prompt", required=True)
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--max-new-tokens", type=A.positive_int, default=64)
    g.add_argument("--temperature", type=A.finite_float, default=0.0, help="0 (the default) is greedy")
    g.add_argument("--top-k", type=A.non_negative_int, default=0, help="0 (the default) turns it off")
    g.add_argument("--top-p", type=A.finite_float, default=1.0, help="in (0, 1]; 1 (the default) turns it off")
    g.add_argument("--repetition-penalty", type=A.finite_float, default=1.0, help="> 0; 1 (the default) is none")
    g.add_argument("--seed", type=A.seed, default=0, help=f"0..{A.SEED_MAX}")
    g.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    cli_prefix.add_generate_flags(g)
    cli_speculative.add_flags(g)
    add_constraint_args(g)
    g.set_defaults(fn=cmd_generate)


def cmd_generate(args) -> int:
    import json

    from .llm.generate import Generator, check_options

    opts = {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "top_k": args.top_k,
            "top_p": args.top_p, "repetition_penalty": args.repetition_penalty, "seed": args.seed}
    check_options(**opts)
    gen = Generator.load(args.artifact)
    cache = cli_prefix.before(gen, args)
    opts["chat"] = args.chat
    opts["constraint"] = constraint_from_args(args, gen.tokenizer)
    interrupted = False
    try:
        for tok in gen.generate(args.prompt, **opts, **cli_speculative.options(args)):
            if not args.json:
                print(tok.text, end="", flush=True)
    except KeyboardInterrupt:  # Ctrl-C: what came so far stands; the statistics of a cut run are not kept
        gen.cancel()
        interrupted = True
    if interrupted:
        if not args.json:
            print()
        print("webinfer: interrupted", file=sys.stderr)
        return 130
    cli_prefix.after(gen, args, cache)
    st = gen.stats
    if args.json:
        print(json.dumps({k: st[k] for k in ("prompt_ids", "token_ids", "text", "prefill_tok_s", "decode_tok_s",
                                             "ttft_s", "speculative") if k in st}, ensure_ascii=False))
    else:
        print()
        print(f"[{len(st['prompt_ids'])} prompt tokens, {len(st['token_ids'])} generated; prefill "
              f"{_rate(st['prefill_tok_s'])} tok/s, decode {_rate(st['decode_tok_s'])} tok/s, "
              f"first token after {st['ttft_s']:.2f} s]", file=sys.stderr)
    return 0


def _rate(v) -> str:
    return "-" if v is None else f"{v:.1f}"


