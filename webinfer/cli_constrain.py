"""`webinfer generate` flags for constrained decoding (llm/constrain): --json-schema, --regex, --grammar."""

from __future__ import annotations

from .errors import WebinferError


def add_constraint_args(parser) -> None:
    """The constraint flags of `generate` (at most one of them)."""
    c = parser.add_mutually_exclusive_group()
    c.add_argument("--json-schema", metavar="FILE", help="the output is JSON valid against this JSON Schema file")
    c.add_argument("--regex", metavar="R", help="the output matches this regular expression whole")
    c.add_argument("--grammar", metavar="FILE", help="the output is derived by this GBNF grammar (rule 'root')")
    c.add_argument("--json-object", action="store_true", help="the output is a JSON object")
    parser.add_argument("--whitespace", type=int, default=0, metavar="N",
                        help="with --json-schema/--json-object: up to N spaces or newlines around punctuation "
                             "(default 0: compact JSON)")


def constraint_from_args(args, tokenizer):
    """The Constraint the flags ask for, or None; bad files and specs are one-line errors."""
    from .llm import constrain

    if args.regex is not None:
        return constrain.regex_constraint(args.regex, tokenizer)
    if args.json_object:
        return constrain.json_object_constraint(tokenizer, whitespace=args.whitespace)
    for path, make in ((args.json_schema, lambda text: constrain.json_schema_constraint(
            text, tokenizer, whitespace=args.whitespace)), (args.grammar, lambda text: constrain.grammar_constraint(
            text, tokenizer))):
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise WebinferError(f"{path}: cannot read ({e.__class__.__name__})") from None
            return make(text)
    return None
