"""What the benchmark scripts share: the test broker they start when given
none (scripts/kafka/broker.sh), and the machine line they print beside
their figures."""
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_SH = os.path.join(ROOT, "scripts", "kafka", "broker.sh")


def start_broker(run_dir, who="bench"):
    """Starts the test broker with its files in run_dir; its bootstrap address."""
    r = subprocess.run([BROKER_SH, "start", "--dir", run_dir], capture_output=True, text=True,
                       timeout=900)
    m = re.search(r"BOOTSTRAP=(\S+)", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"{who}: cannot start the test broker: {r.stderr.strip()}")
    return m.group(1)


def stop_broker(run_dir):
    subprocess.run([BROKER_SH, "stop", "--dir", run_dir], capture_output=True, timeout=120)


def machine():
    """The CPU as lscpu names it, its count, and the hypervisor if any."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    f = dict(re.findall(r"^([^:]+):\s*(.*)$", out, re.M))
    return (f"{f.get('Model name', '?')}, {f.get('CPU(s)', os.cpu_count())} CPUs"
            f"{', ' + f['Hypervisor vendor'] + ' guest' if 'Hypervisor vendor' in f else ''}")


def loadavg():
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def stat(xs):
    """min / median / max of xs."""
    return "%.3g / %.3g / %.3g" % (min(xs), statistics.median(xs), max(xs))


def agg(stats):
    """Over summaries (dicts of min, median, max): the min of the minima, the median of the
    medians, the max of the maxima."""
    return "%.3g / %.3g / %.3g" % (min(s["min"] for s in stats),
                                   statistics.median(s["median"] for s in stats),
                                   max(s["max"] for s in stats))
