"""Renders a chat template with jinja2 the way Hugging Face transformers'
apply_chat_template does (a sandboxed environment with trim_blocks and
lstrip_blocks, raise_exception): the reference looptune's chat templates are
checked against. Reads one JSON object on stdin (template, messages,
bos_token, eos_token, add_generation_prompt) and writes the rendering's
UTF-8 bytes to stdout. Exit 3: the template raised (it refuses the
conversation); exit 4: jinja2 is not installed.

With --serve it renders many: one JSON object per line on stdin, and for
each a line "STATUS LENGTH" (the exit status above, the rendering's length
in bytes) then those bytes on stdout, until stdin ends; one Python start for
a test's hundreds of renderings."""

import json
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    jinja2 = None


class Refused(Exception):
    pass


def raise_exception(message):
    raise Refused(message)


def render(req):
    """(status, UTF-8 bytes) of one request."""
    if jinja2 is None:
        return 4, b""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    try:
        out = env.from_string(req["template"]).render(
            messages=req["messages"], bos_token=req["bos_token"], eos_token=req["eos_token"],
            add_generation_prompt=req["add_generation_prompt"])
    except Refused as e:
        sys.stderr.write("refused: %s\n" % e)
        return 3, b""
    return 0, out.encode("utf-8")


if len(sys.argv) > 1 and sys.argv[1] == "--serve":
    for line in sys.stdin:
        status, out = render(json.loads(line))
        sys.stdout.buffer.write(b"%d %d\n" % (status, len(out)) + out)
        sys.stdout.buffer.flush()
    sys.exit(0)
status, out = render(json.load(sys.stdin))
if status == 4:
    sys.stderr.write("jinja2 is not installed (scripts/deps.sh installs it)\n")
sys.stdout.buffer.write(out)
sys.exit(status)
