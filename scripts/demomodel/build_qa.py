"""Build the demo model's question/answer set from the Python standard library's public API.

Each entry asks about a public name as a person imports it (os.path.join, json.dumps, collections.Counter,
str.split, len) and answers with the first paragraph of that object's docstring. The result, qa.jsonl, is
committed: training (train_demo.py) and the quality test read it, so the answers do not depend on the Python
that trains the model.

Usage: python3 build_qa.py > qa.jsonl   (any CPython 3.11+; no third-party packages)
"""
import builtins
import importlib
import inspect
import json
import re
import sys

# The modules a person asks about, by the name they import. Submodules are named as imported (os.path).
MODULES = """
abc argparse array ast asyncio base64 binascii bisect builtins bz2 calendar cmath codecs collections
collections.abc colorsys concurrent.futures configparser contextlib copy csv dataclasses datetime decimal difflib
dis email email.message email.utils enum errno filecmp fnmatch fractions functools gc getopt getpass gettext glob
graphlib gzip hashlib heapq hmac html html.parser http http.client http.cookies http.server imaplib importlib
importlib.resources inspect io ipaddress itertools json keyword linecache locale logging logging.handlers lzma
math mimetypes multiprocessing numbers operator os os.path pathlib pickle pkgutil platform plistlib pprint
queue quopri random re reprlib sched secrets select selectors shelve shlex shutil signal smtplib socket
socketserver sqlite3 ssl stat statistics string struct subprocess sys sysconfig tarfile tempfile textwrap
threading time timeit token tokenize tomllib traceback types typing unicodedata unittest unittest.mock urllib.error
urllib.parse urllib.request uuid venv warnings weakref webbrowser xml.dom.minidom xml.etree.ElementTree zipfile
zlib zoneinfo
""".split()

# Builtin types whose methods people ask about (str.split, list.append, dict.get).
METHOD_TYPES = [str, bytes, list, dict, set, frozenset, tuple, int, float]

# Classes whose public methods people ask about by their dotted name (pathlib.Path.exists).
METHOD_CLASSES = {
    "pathlib.Path": None, "datetime.datetime": None, "datetime.date": None, "datetime.timedelta": None,
    "collections.Counter": None, "collections.deque": None, "collections.OrderedDict": None,
    "collections.defaultdict": None, "re.Pattern": None, "re.Match": None, "threading.Thread": None,
    "threading.Lock": None, "threading.Event": None, "logging.Logger": None, "argparse.ArgumentParser": None,
    "queue.Queue": None, "io.StringIO": None, "io.BytesIO": None, "decimal.Decimal": None,
    "fractions.Fraction": None, "subprocess.Popen": None, "socket.socket": None, "zipfile.ZipFile": None,
    "tarfile.TarFile": None, "sqlite3.Connection": None, "sqlite3.Cursor": None, "csv.DictReader": None,
    "asyncio.Queue": None, "asyncio.Event": None, "string.Template": None, "random.Random": None,
    "unittest.TestCase": None, "hashlib.sha256": None,
}

# Names the site module adds to builtins for the interactive prompt.
SITE_BUILTINS = {"copyright", "credits", "license", "help", "exit", "quit"}

SIGNATURE = re.compile(r"^[\w.]+\(.*\)(\s*->\s*.*)?$")
# "csv_reader = reader(iterable [, dialect='excel'] ...)": a usage line, not prose.
ASSIGNMENT = re.compile(r"^\w+ = [\w.]+\(")
# "zip(*iterables, strict=False) --> Yield tuples ..." or "partial(func, ...) - new function ...": a signature
# followed by prose on the same line.
SIGNATURE_PREFIX = re.compile(r"^[\w.]+\(.*?\)\s*(?:-->|->|--|-)\s*")
MAX_ANSWER = 420


def first_paragraph(obj):
    """The docstring's first paragraph that is prose, not a signature line; None when there is none."""
    doc = inspect.getdoc(obj)
    if not doc:
        return None
    for para in re.split(r"\n\s*\n", doc.strip()):
        if ASSIGNMENT.match(para.strip()):
            continue  # a usage example spread over several lines
        lines = []
        for l in (l.strip() for l in para.strip().splitlines()):
            m = SIGNATURE_PREFIX.match(l)
            if m:
                l = l[m.end():]
                if len(l.split()) < 4:
                    continue
            elif SIGNATURE.match(l) or l == "--":
                continue
            if l:
                lines.append(l)
        if not lines:
            continue
        text = re.sub(r"\s+", " ", " ".join(lines)).strip()
        if len(text) < 12 or not re.search(r"[a-z]", text):
            continue
        if len(text) > MAX_ANSWER:
            # cut at the last sentence end that keeps the answer short
            cut = text.rfind(". ", 0, MAX_ANSWER)
            if cut < 40:
                return None
            text = text[:cut + 1]
        return text
    return None


def kind_of(obj):
    if inspect.isclass(obj):
        return "class"
    if inspect.ismethoddescriptor(obj) or inspect.ismethod(obj) or type(obj).__name__ in ("method_descriptor", "classmethod_descriptor"):
        return "method"
    if callable(obj):
        return "function"
    return None


def belongs(modname, obj):
    """True when obj is defined by this module (or its private implementation module), not re-exported."""
    owner = getattr(obj, "__module__", None) or ""
    top = modname.split(".")[0]
    if modname == "os.path":
        return owner in ("posixpath", "genericpath", "os.path")
    if modname == "builtins":
        return True
    if modname == "os" and owner in ("posix", "nt"):
        return True
    return owner == modname or owner.startswith(modname + ".") or owner.lstrip("_").startswith(top) \
        or owner in ("_" + modname.split(".")[-1],)


def public_names(mod, modname):
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in dir(mod) if not n.startswith("_")]
    return sorted(set(n for n in names if not n.startswith("_")))


def entries():
    seen = {}
    for modname in MODULES:
        try:
            mod = importlib.import_module(modname)
        except Exception:
            continue
        for name in public_names(mod, modname):
            obj = getattr(mod, name, None)
            if obj is None or inspect.ismodule(obj):
                continue
            kind = kind_of(obj)
            if kind is None or not belongs(modname, obj):
                continue
            if modname == "builtins" and name in SITE_BUILTINS:
                continue
            if modname == "ast" and kind == "class":
                continue  # AST node classes document their fields, not a meaning
            full = name if modname == "builtins" else f"{modname}.{name}"
            ans = first_paragraph(obj)
            if ans and full not in seen:
                seen[full] = {"name": full, "kind": kind, "answer": ans}
    for t in METHOD_TYPES:
        for name, obj in sorted(vars(t).items()):
            if name.startswith("_"):
                continue
            ans = first_paragraph(obj)
            full = f"{t.__name__}.{name}"
            if ans and full not in seen:
                seen[full] = {"name": full, "kind": "method", "answer": ans}
    for dotted in METHOD_CLASSES:
        modname, cls = dotted.rsplit(".", 1)
        try:
            klass = getattr(importlib.import_module(modname), cls)
        except Exception:
            continue
        if not inspect.isclass(klass):
            continue
        for name, obj in sorted(vars(klass).items()):
            if name.startswith("_") or not callable(getattr(klass, name, None)):
                continue
            ans = first_paragraph(getattr(klass, name))
            full = f"{dotted}.{name}"
            if ans and full not in seen:
                seen[full] = {"name": full, "kind": "method", "answer": ans}
    return list(seen.values())


if __name__ == "__main__":
    out = entries()
    for e in out:
        e["python"] = "%d.%d" % sys.version_info[:2]
        print(json.dumps(e, ensure_ascii=False))
    print(f"{len(out)} entries", file=sys.stderr)
