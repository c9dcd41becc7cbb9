"""A small Dockerfile reader for structural tests (no Docker engine is available here).

Handles what deploy/Dockerfile uses: comments, the ``# syntax=`` directive, backslash line
continuations, JSON and shell forms, ``FROM … AS name`` stages, ``ARG`` with and without
defaults (global ARGs before the first FROM), ``COPY [--from=…] src… dest``.

``dockerignore_excludes`` follows the rules of Docker's .dockerignore (moby patternmatcher):
patterns are matched in order against the path and each of its parent directories, ``!``
re-includes, the last matching pattern wins, ``**`` matches any number of directories.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def words(self) -> list[str]:
        text = self.args.strip()
        if text.startswith("["):
            try:
                return list(json.loads(text))
            except ValueError:
                pass
        return shlex.split(text, posix=True)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def run_text(self) -> str:
        return "\n".join(i.args for i in self.of("RUN"))

    def args(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for i in self.of("ARG"):
            name, _, default = i.args.strip().partition("=")
            out[name] = default if _ else None
        return out


@dataclass
class Dockerfile:
    directives: dict[str, str]
    global_args: dict[str, str | None]
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        hits = [s for s in self.stages if s.name == name]
        assert len(hits) == 1, f"no single stage {name!r}"
        return hits[0]

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def parse(text: str) -> Dockerfile:
    directives: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    # Parser directives: leading `# key=value` comments before anything else.
    while i < len(lines) and (m := re.match(r"^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$", lines[i])):
        directives[m.group(1).lower()] = m.group(2)
        i += 1
    instructions: list[Instruction] = []
    buf, start = "", 0
    for n in range(i, len(lines)):
        raw = lines[n]
        if not buf and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if buf and raw.lstrip().startswith("#"):
            continue  # comment lines inside a continued instruction are dropped
        if not buf:
            start = n + 1
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        buf += raw
        keyword, _, rest = buf.strip().partition(" ")
        instructions.append(Instruction(keyword.upper(), rest.strip(), start))
        buf = ""
    assert not buf, "Dockerfile ends inside a continued line"
    global_args: dict[str, str | None] = {}
    stages: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.args.split()
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif not stages:
            assert ins.keyword == "ARG", f"line {ins.line}: only ARG may precede the first FROM"
            name, eq, default = ins.args.strip().partition("=")
            global_args[name] = default if eq else None
        else:
            stages[-1].instructions.append(ins)
    return Dockerfile(directives, global_args, stages)


def copy_parts(ins: Instruction) -> tuple[dict[str, str], list[str], str]:
    """(flags, sources, destination) of a COPY/ADD."""
    words = ins.words()
    flags = {}
    while words and words[0].startswith("--"):
        k, _, v = words.pop(0)[2:].partition("=")
        flags[k] = v
    return flags, words[:-1], words[-1]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c))
        i += 1
    return re.compile(f"^{out}$")


def dockerignore_excludes(patterns_text: str, path: str) -> bool:
    """True when ``path`` (relative, '/'-separated) is left out of the build context."""
    rules = []
    for line in patterns_text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pat = line[1:].strip() if negate else line
        pat = pat.strip("/")
        rules.append((negate, _pattern_regex(pat)))
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    excluded = False
    for negate, rx in rules:
        if any(rx.match(c) for c in candidates):
            excluded = not negate
    return excluded
