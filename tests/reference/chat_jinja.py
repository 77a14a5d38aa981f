"""Renders a chat template with jinja2 the way Hugging Face transformers'
apply_chat_template does (a sandboxed environment with trim_blocks and
lstrip_blocks, raise_exception): the reference looptune's chat templates are
checked against. Reads one JSON object on stdin (template, messages,
bos_token, eos_token, add_generation_prompt) and writes the rendering's
UTF-8 bytes to stdout. Exit 3: the template raised (it refuses the
conversation); exit 4: jinja2 is not installed."""

import json
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.stderr.write("jinja2 is not installed (scripts/deps.sh installs it)\n")
    sys.exit(4)


class Refused(Exception):
    pass


def raise_exception(message):
    raise Refused(message)


req = json.load(sys.stdin)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[jinja2.ext.loopcontrols])
env.globals["raise_exception"] = raise_exception
try:
    out = env.from_string(req["template"]).render(
        messages=req["messages"], bos_token=req["bos_token"], eos_token=req["eos_token"],
        add_generation_prompt=req["add_generation_prompt"])
except Refused as e:
    sys.stderr.write("refused: %s\n" % e)
    sys.exit(3)
sys.stdout.buffer.write(out.encode("utf-8"))
