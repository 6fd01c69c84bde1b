"""Post-processors (special tokens around one sequence), truncation and padding of tokenizer.json, for single
sequences (pairs are not what the runtime encodes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .errors import Unsupported

PostProcessor = Callable[[list[int]], list[int]]


class Processor:
    """`add(ids)`: the sequence with the processor's special tokens; `n_added`: how many it adds."""

    def __init__(self, spec: Mapping | None) -> None:
        self.steps: list[tuple[list[int], list[int]]] = []  # (before, after) per step
        self._add(spec)

    def _add(self, spec: Mapping | None) -> None:
        if spec is None:
            return
        kind = spec.get("type")
        if kind == "Sequence":
            for sub in spec.get("processors", []):
                self._add(sub)
        elif kind == "ByteLevel":
            pass  # only offsets change
        elif kind in ("BertProcessing", "RobertaProcessing"):
            self.steps.append(([int(spec["cls"][1])], [int(spec["sep"][1])]))
        elif kind == "TemplateProcessing":
            self.steps.append(self._template(spec))
        else:
            raise Unsupported(f"post_processor {kind!r}")

    @staticmethod
    def _template(spec: Mapping) -> tuple[list[int], list[int]]:
        specials = spec.get("special_tokens") or {}
        before: list[int] = []
        after: list[int] = []
        seen_a = False
        for piece in spec.get("single") or []:
            if "Sequence" in piece:
                if piece["Sequence"].get("id", "A") != "A" or seen_a:
                    raise Unsupported("post_processor 'TemplateProcessing': single template must hold $A once")
                seen_a = True
            elif "SpecialToken" in piece:
                name = piece["SpecialToken"]["id"]
                if name not in specials:
                    raise Unsupported(f"post_processor 'TemplateProcessing': no special token {name!r}")
                (after if seen_a else before).extend(int(i) for i in specials[name]["ids"])
            else:
                raise Unsupported(f"post_processor 'TemplateProcessing': piece {piece!r}")
        if not seen_a:
            raise Unsupported("post_processor 'TemplateProcessing': single template without $A")
        return before, after

    @property
    def n_added(self) -> int:
        return sum(len(b) + len(a) for b, a in self.steps)

    def add(self, ids: list[int]) -> list[int]:
        for before, after in self.steps:
            ids = before + ids + after
        return ids


def truncation(spec: Mapping | None) -> tuple[int, bool] | None:
    """(max_length, keep the end) or None."""
    if not spec:
        return None
    direction = spec.get("direction", "Right")
    if direction not in ("Right", "Left"):
        raise Unsupported(f"truncation direction {direction!r}")
    if spec.get("strategy", "LongestFirst") not in ("LongestFirst", "OnlyFirst"):
        raise Unsupported(f"truncation strategy {spec.get('strategy')!r} (single sequences only)")
    return int(spec["max_length"]), direction == "Left"


def truncate(ids: list[int], max_length: int, left: bool) -> list[int]:
    if max_length <= 0:
        return []
    if len(ids) <= max_length:
        return ids
    return ids[-max_length:] if left else ids[:max_length]


def padding(spec: Mapping | None) -> Callable[[list[int]], list[int]] | None:
    if not spec:
        return None
    strategy = spec.get("strategy", "BatchLongest")
    fixed = strategy.get("Fixed") if isinstance(strategy, Mapping) else None
    if fixed is None and strategy != "BatchLongest":
        raise Unsupported(f"padding strategy {strategy!r}")
    multiple = spec.get("pad_to_multiple_of") or 0
    pad_id, left = int(spec.get("pad_id", 0)), spec.get("direction", "Right") == "Left"

    def run(ids: list[int]) -> list[int]:
        target = len(ids) if fixed is None else int(fixed)
        if multiple and target % multiple:
            target += multiple - target % multiple
        if len(ids) >= target:
            return ids
        pad = [pad_id] * (target - len(ids))
        return pad + ids if left else ids + pad
    return run
