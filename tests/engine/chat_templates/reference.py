#!/usr/bin/env python3
"""Renders the chat-template fixtures the way transformers' apply_chat_template
does (Jinja2's ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension, the {% generation %} tag, and
transformers' own tojson, raise_exception and strftime_now), to make or
check the expected outputs that evald's renderer is compared with.

    reference.py write    rewrites expected/<template>.json
    reference.py check    compares expected/ with a fresh rendering (exit 1 on any difference)

Needs jinja2 (Debian's python3-jinja2, or the reference virtual environment
of scripts/reference-env.sh). Every conversation gets date_string, and
strftime_now reads the clock pinned at NOW (EVALD_TEMPLATE_NOW, as evald's
renderer does), so that templates that print today's date render the same
on any day.
"""
import json
import os
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: jinja2 is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
DATE = "26 Jul 2024"
# the instant the expected outputs were rendered at (2026-12-03 12:00 UTC)
NOW = 1796299200


class Generation(Extension):
    """transformers' {% generation %} tag: the body is rendered as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def strftime_now(fmt):
    """The clock pinned at NOW (EVALD_TEMPLATE_NOW), as evald's renderer pins it."""
    return datetime.fromtimestamp(int(os.environ.get("EVALD_TEMPLATE_NOW", NOW))).strftime(fmt)


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def compiler():
    """transformers' own compiled environment when transformers is installed
    (the reference environment), else the same settings rebuilt here."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
        import transformers
        return _compile_jinja_template, "transformers %s" % transformers.__version__
    except Exception:
        env = environment()
        return env.from_string, "jinja2 with transformers' settings"


def render_all():
    with open(os.path.join(HERE, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    tools = {}
    compile_template, _ = compiler()
    out = {}
    for name, specials in templates.items():
        with open(os.path.join(HERE, "templates", name + ".jinja"), encoding="utf-8") as f:
            compiled = compile_template(f.read())
        results = {}
        for conv in conversations:
            tl = None
            if "tools" in conv:
                if conv["tools"] not in tools:
                    with open(os.path.join(HERE, "tools_" + conv["tools"] + ".json"), encoding="utf-8") as f:
                        tools[conv["tools"]] = json.load(f)
                tl = tools[conv["tools"]]
            kwargs = dict(specials)
            kwargs["date_string"] = DATE
            # transformers' environment reads the real clock: the render's own
            # variable shadows its global, so every path sees the pinned one
            kwargs["strftime_now"] = strftime_now
            kwargs.update(conv.get("vars", {}))
            try:
                text = compiled.render(messages=conv["messages"], tools=tl, documents=None,
                                       add_generation_prompt=conv.get("add_generation_prompt", True), **kwargs)
                results[conv["name"]] = {"prompt": text}
            except Exception as e:  # the template refused the conversation
                results[conv["name"]] = {"error": str(e)}
        out[name] = results
    return out


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    fresh = render_all()
    exp_dir = os.path.join(HERE, "expected")
    if mode == "write":
        os.makedirs(exp_dir, exist_ok=True)
        for name, results in fresh.items():
            with open(os.path.join(exp_dir, name + ".json"), "w", encoding="utf-8") as f:
                json.dump(results, f, ensure_ascii=False, indent=1, sort_keys=True)
                f.write("\n")
        return 0
    bad = 0
    for name, results in fresh.items():
        with open(os.path.join(exp_dir, name + ".json"), encoding="utf-8") as f:
            saved = json.load(f)
        for conv, r in results.items():
            if saved.get(conv) != r:
                print("differs: %s / %s" % (name, conv))
                bad += 1
    total = sum(len(r) for r in fresh.values())
    print("expected outputs equal to a fresh rendering: %d/%d (%s, jinja2 %s)" % (total - bad, total, compiler()[1], jinja2.__version__))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
