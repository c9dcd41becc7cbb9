"""``vgpu inspect``: decode what the plugin, the scheduler and HAMi-core write, for humans or ``--json``.

The command owns only the dispatch.  Each *form* (``cache PATH``, ``node NAME``,
``pod NS/NAME``, or the default form: a literal annotation VALUE / ``-f FILE``) lives next to
the code that owns its format, in a module listed in ``_FORM_MODULES`` that exposes
``FORMS: list[InspectForm]``.  The first operand picks a form by keyword; anything else goes
to the default form (``keyword=None``), if one is registered.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class InspectForm:
    keyword: str | None   # first operand that selects the form; None = the default form
    usage: str            # e.g. "cache PATH"
    summary: str
    nargs: int            # number of operands after the keyword (default form: after nothing)
    run: Callable[[list[str], argparse.Namespace], int]  # returns the exit status


# module path -> exposes FORMS (list[InspectForm]); add a module to add forms.
_FORM_MODULES: list[str] = [
    "vgpu.hamicore.cache_report",
    "vgpu.kube.reports",
]


def load_forms() -> dict[str | None, InspectForm]:
    forms: dict[str | None, InspectForm] = {}
    for module in _FORM_MODULES:
        for form in importlib.import_module(module).FORMS:
            if form.keyword in forms:
                raise RuntimeError(f"inspect form {form.keyword!r} is registered twice")
            forms[form.keyword] = form
    return forms


def register(subparsers: argparse._SubParsersAction) -> None:
    forms = load_forms()
    lines = "\n".join(f"  vgpu inspect [--json] {f.usage:<22} {f.summary}"
                      for f in sorted(forms.values(), key=lambda f: f.keyword or ""))
    parser = subparsers.add_parser(
        "inspect", help="decode annotations and HAMi-core shared-region files",
        description="Decode what vgpu, the Volcano scheduler and HAMi-core write.\n\nforms:\n" + lines,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("-f", "--file", metavar="FILE", help="read the input from FILE ('-' = stdin)")
    parser.add_argument("--kubeconfig", metavar="PATH", default=None,
                        help="for node/pod: kubeconfig of the cluster (default: $KUBECONFIG, else in-cluster)")
    parser.add_argument("operands", nargs="*", metavar="FORM", help="e.g. cache PATH")
    parser.set_defaults(func=run, _inspect_parser=parser)


def run(args: argparse.Namespace) -> int:
    forms = load_forms()
    operands: list[str] = list(args.operands)
    if operands and operands[0] in forms:
        form = forms[operands[0]]
        rest = operands[1:]
    elif None in forms:
        form, rest = forms[None], operands
    else:
        what = operands[0] if operands else (f"-f {args.file}" if args.file else "nothing")
        known = ", ".join(f.usage for f in forms.values())
        print(f"vgpu inspect: no decoder for {what!r} (available: {known})", file=sys.stderr)
        return 2
    if form.keyword is not None and len(rest) != form.nargs:
        print(f"vgpu inspect: usage: vgpu inspect [--json] {form.usage}", file=sys.stderr)
        return 2
    return form.run(rest, args)
