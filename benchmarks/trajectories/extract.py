"""Build the compact trajectory corpus from tau-bench's ``historical_trajectories`` JSON.

tau-bench (https://github.com/sierra-research/tau-bench, MIT) publishes real agent runs:
one JSON list per model and domain, each record with ``task_id``, ``trial``, ``reward``
(1.0 = the run solved the task) and ``traj``, the OpenAI-style message list (system, user,
assistant with ``tool_calls``, tool results). This script keeps, per run, the domain,
task, trial, reward and the ordered turns; the system prompt (the domain policy, the same
for every run) is dropped and long texts are cut. A tool result longer than the limit is
cut too, and ends with the sha256 of the full text, so two results compare equal exactly
when the real ones did; every result also keeps its full ``sha256`` and length.

The output is gzip'd JSON lines, written deterministically (sorted keys, no gzip time
stamp): the same input gives the same bytes.

Usage (from the repository root, with a tau-bench checkout next to it)::

    python -m benchmarks.trajectories.extract ../tau-bench/historical_trajectories \
        -o tests/fixtures/trajectories/tau_bench_gpt4o.jsonl.gz

A directory argument picks ``gpt-4o-airline.json`` and ``gpt-4o-retail.json`` (those
present); files can also be given one by one (the domain is read from the name).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

DOMAINS = ("airline", "retail")
MODEL = "gpt-4o"
TOOL_CHARS = 10_000
"""Tool results longer than this are cut (the airline corpus has none that long)."""
TEXT_CHARS = 1_000
"""User and assistant texts longer than this are cut (they only mark turns)."""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cut_result(text: str, limit: int = TOOL_CHARS) -> tuple[str, bool]:
    """The result as stored: whole, or cut with the full text's digest appended."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[truncated: {len(text)} chars, sha256={sha256(text)}]", True


def cut_text(text: str | None, limit: int = TEXT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + " [...]"


def parse_args(raw: Any) -> Any:
    """A tool call's arguments: the JSON object the model sent (raw text if not JSON)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return {"__raw__": raw}


def turns_of(traj: Iterable[dict[str, Any]], tool_chars: int) -> list[dict[str, Any]]:
    """The ordered turns of one recorded run (system messages dropped)."""
    out: list[dict[str, Any]] = []
    for message in traj:
        role = message.get("role")
        if role == "user":
            out.append({"role": "user", "text": cut_text(message.get("content"))})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [
                {
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "args": parse_args(call["function"].get("arguments")),
                }
                for call in message["tool_calls"]
            ]
            turn = {"role": "assistant", "text": cut_text(message.get("content")), "calls": calls}
            out.append(turn)
        elif role == "assistant":
            out.append({"role": "assistant", "text": cut_text(message.get("content"))})
        elif role == "tool":
            full = message.get("content") or ""
            content, truncated = cut_result(full, tool_chars)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message["tool_call_id"],
                    "name": message.get("name", ""),
                    "content": content,
                    "sha256": sha256(full),
                    "chars": len(full),
                    "truncated": truncated,
                }
            )
    return out


def records(path: Path, domain: str, tool_chars: int) -> Iterator[dict[str, Any]]:
    """The compact records of one historical-trajectories file, in file order."""
    for run in json.loads(path.read_text(encoding="utf-8")):
        yield {
            "domain": domain,
            "task_id": run["task_id"],
            "trial": run.get("trial", 0),
            "reward": float(run.get("reward") or 0.0),
            "turns": turns_of(run["traj"], tool_chars),
        }


def inputs(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """(file, domain) for each input; a directory gives its gpt-4o airline/retail files."""
    out: list[tuple[Path, str]] = []
    for path in paths:
        if path.is_dir():
            base = (
                path / "historical_trajectories"
                if (path / "historical_trajectories").is_dir()
                else path
            )
            found = [(base / f"{MODEL}-{d}.json", d) for d in DOMAINS]
            out += [(f, d) for f, d in found if f.is_file()]
            continue
        domain = next((d for d in DOMAINS if path.stem.endswith(d)), None)
        if domain is None:
            raise SystemExit(f"{path}: cannot tell the domain from the name (airline, retail)")
        out.append((path, domain))
    if not out:
        raise SystemExit("no historical_trajectories JSON found in the given paths")
    return out


def write(rows: Iterable[dict[str, Any]], target: Path) -> int:
    """Write gzip'd JSON lines deterministically; returns the number of rows."""
    buffer = io.BytesIO()
    count = 0
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        for row in rows:
            line = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            gz.write(line.encode("utf-8") + b"\n")
            count += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(buffer.getvalue())
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trajectories.extract")
    parser.add_argument("paths", nargs="+", type=Path, help="tau-bench checkout, its "
                        "historical_trajectories directory, or gpt-4o-<domain>.json files")  # fmt: skip
    parser.add_argument("-o", "--output", type=Path, required=True, help="the .jsonl.gz to write")
    parser.add_argument("--tool-chars", type=int, default=TOOL_CHARS, help="cut results here")
    args = parser.parse_args(argv)
    files = inputs(args.paths)
    rows = (row for path, domain in files for row in records(path, domain, args.tool_chars))
    count = write(rows, args.output)
    names = ", ".join(f"{path.name} ({domain})" for path, domain in files)
    print(f"wrote {count} trajectories from {names} to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
