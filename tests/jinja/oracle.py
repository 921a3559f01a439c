#!/usr/bin/env python3
"""Python jinja2 configured as transformers configures it: the oracle for ckpt's engine.

JSON lines in:  {"id", "template", "context", "trim_blocks"?, "lstrip_blocks"?}
JSON lines out: {"id", "ok", "output"} or {"id", "ok": false, "phase", "error_type", "error", "lineno"}

Environment (transformers/utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
`generation` tag (AssistantTracker's parse shape) and jinja2.ext.loopcontrols; `tojson`
= json.dumps(ensure_ascii=False, indent=None, separators=None, sort_keys=False) with
those keywords accepted; globals raise_exception and strftime_now. strftime_now is
pinned to 2024-07-26 12:00:00 so outputs are reproducible (ckpt's tests pin the same
instant). Compiled templates are cached by text: one process serves a whole test run.
"""
import json
import sys
import traceback
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

PINNED_NOW = datetime(2024, 7, 26, 12, 0, 0)


class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _render_body(self, context, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return PINNED_NOW.strftime(fmt)


def environment(trim, lstrip):
    env = ImmutableSandboxedEnvironment(trim_blocks=trim, lstrip_blocks=lstrip,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def lineno_of(exc):
    if getattr(exc, "lineno", None):
        return exc.lineno
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == "<template>":
            found = frame.lineno
    return found


def main():
    envs, compiled = {}, {}
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        res = {"id": req["id"]}
        key = (req.get("trim_blocks", True), req.get("lstrip_blocks", True))
        env = envs.get(key) or envs.setdefault(key, environment(*key))
        ck = (key, req["template"])
        try:
            tmpl = compiled.get(ck) or compiled.setdefault(ck, env.from_string(req["template"]))
        except Exception as e:  # noqa: BLE001
            res.update(ok=False, phase="parse", error_type=type(e).__name__, error=str(e), lineno=lineno_of(e))
            print(json.dumps(res, ensure_ascii=False), flush=False)
            continue
        try:
            res.update(ok=True, output=tmpl.render(**req["context"]))
        except Exception as e:  # noqa: BLE001
            res.update(ok=False, phase="render", error_type=type(e).__name__, error=str(e), lineno=lineno_of(e))
        print(json.dumps(res, ensure_ascii=False), flush=False)
    sys.stdout.flush()


if __name__ == "__main__":
    sys.stderr.write(f"jinja2 {jinja2.__version__}\n")
    main()
