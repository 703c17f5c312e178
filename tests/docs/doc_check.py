#!/usr/bin/env python3
"""tests/docs/doc_check.py: what keeps README.md and docs/ true. Each subcommand is one check;
tests/CMakeLists.txt runs them (the `docs.*` tests and the docs_snippets build).

  cpp OUT.cpp MD...          every ```cpp block of the pages as one C++ translation unit (the
                             build compiles it: a block that does not compile fails the build)
  console OPTRACE DEMO MD    runs every command of the ```console blocks of MD in a scratch copy
                             of the demo's output folder and compares what it prints
  help OPTRACE MD            every command and option of `optrace --help` and `optrace CMD --help`
                             is in MD, and every option MD names is in them
  headers INCLUDE MD...      every public header (include/optrace/, not detail/) is named in the pages
  links MD...                every relative link of the pages leads to a file that exists, and its
                             #anchor to a heading of that page (as GitHub makes anchors)
  members HPP...             every public member function of the headers' classes has a /// comment
                             (or is in a group whose first line has one; detail namespaces aside)

(The README's quick-start commands are run by .ci/run itself.)

C++ blocks. A block is complete code at namespace scope unless the line before its fence is
`<!-- snippet: fragment -->`: then it is a sequence of statements, compiled as a function body.
`<!-- snippet: libtorch 2.6 -->` (or `fragment, libtorch 2.6`): the block, and its #include
lines, are compiled only against libtorch >= 2.6 (optrace/aoti.hpp).
Each block gets its own namespace, in which the names of tests/docs/snippet_context.hpp are
visible (`model`, `inputs`, `net`, `traffic`, `x`, `y`, `mask`, `text`, `path`, `trace`); its
#include lines are moved to the top of the file. `#line` directives point errors at the page.

Console blocks. Each line that starts with `$ ` is a command (run with bash, stdout and stderr
together); the lines after it, up to the next command, are what it prints. In the expected
text, `...` inside a line matches any text, and a line that is only `...` matches any number
of lines.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^( *)```(\S*)\s*$")  # list items indent their blocks
MARKER = re.compile(r"^<!--\s*snippet:\s*(.*?)\s*-->$")
CPP_NAMES = {"cpp"}
# libtorch's C++ frontend, which only <torch/torch.h> brings (snippet_context.hpp includes it for
# its own declarations, so a compile alone would not see the include missing).
TORCH_API_NEEDS_ALL = re.compile(r"torch::(nn|optim|data)::\w+")
# Fences that look like C++ but would escape the check.
CPP_ALIASES = {"c++", "cxx", "cc", "C++", "hpp", "h"}
MARKERS = {"fragment", "libtorch 2.6"}


class DocError(Exception):
    pass


def blocks(path):
    """(language, marker, first line number of the body, body lines) of each fenced block."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        marker = None
        mm = MARKER.match(lines[i - 1].strip()) if i > 0 else None
        if mm:
            marker = mm.group(1)
            if not all(part.strip() in MARKERS for part in marker.split(",")):
                raise DocError("%s:%d: unknown snippet marker '%s' (known: %s)"
                               % (path, i, marker, ", ".join(sorted(MARKERS))))
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise DocError("%s:%d: a ```%s block is not closed" % (path, i + 1, lang))
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:j]]
        out.append((lang, marker, i + 2, body))
        i = j + 1
    return out


# ---- cpp --------------------------------------------------------------------------------------

def cpp(out_path, pages):
    includes = []
    new_torch_includes = []  # from blocks marked libtorch 2.6
    bodies = []
    count = 0
    for page in pages:
        page_abs = os.path.abspath(page)
        for lang, marker, first, body in blocks(page):
            if lang in CPP_ALIASES:
                raise DocError("%s:%d: write ```cpp, not ```%s: C++ blocks are compiled by a test"
                               % (page, first - 1, lang))
            if lang not in CPP_NAMES:
                if marker:
                    raise DocError("%s:%d: a snippet marker before a ```%s block" % (page, first - 1, lang))
                continue
            count += 1
            parts = {part.strip() for part in marker.split(",")} if marker else set()
            new_torch = "libtorch 2.6" in parts
            kept = []
            for n, line in enumerate(body):
                if line.startswith("#include"):
                    target = new_torch_includes if new_torch else includes
                    if line not in target:
                        target.append(line)
                    kept.append((first + n, ""))
                else:
                    kept.append((first + n, line))
            uses = TORCH_API_NEEDS_ALL.search("\n".join(line for _, line in kept))
            if uses and not any(line.startswith("#include <torch/torch.h>") for line in body):
                raise DocError("%s:%d: this block uses %s, which no optrace header brings: add #include "
                               "<torch/torch.h>, as a program copying it needs" % (page, first - 1, uses.group(0)))
            name = "doc_snippet_%d" % count
            text = ["#if OPTRACE_DOC_LIBTORCH_2_6"] if new_torch else []
            text += ["namespace %s {  // %s:%d%s" % (name, page, first - 1, " (%s)" % marker if marker else ""),
                     "using namespace optrace_doc_context;"]
            if "fragment" in parts:
                text.append("[[maybe_unused]] void fragment() {")
            text.append('#line %d "%s"' % (first, page_abs))
            text.extend(line for _, line in kept)
            if "fragment" in parts:
                text.append("}")
            text.append("}  // namespace %s" % name)
            if new_torch:
                text.append("#endif")
            bodies.append("\n".join(text))
    if count == 0:
        raise DocError("no ```cpp block in %s" % ", ".join(pages))
    head = ["// generated by tests/docs/doc_check.py from %s: every ```cpp block, one namespace each" %
            ", ".join(os.path.basename(p) for p in pages),
            '#include "snippet_context.hpp"'] + includes + [
            "#include <torch/version.h>",
            "#define OPTRACE_DOC_LIBTORCH_2_6 (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6))",
            "#if OPTRACE_DOC_LIBTORCH_2_6"] + new_torch_includes + ["#endif"]
    content = "\n".join(head) + "\n\n" + "\n\n".join(bodies) + "\n"
    old = None
    if os.path.exists(out_path):
        with open(out_path, encoding="utf-8") as f:
            old = f.read()
    if old != content:  # unchanged text keeps its time stamp: no rebuild
        with open(out_path, "w", encoding="utf-8") as f:
            f.write(content)
    print("%d C++ blocks from %d pages" % (count, len(pages)))


# ---- console ----------------------------------------------------------------------------------

def console_commands(page):
    """(line number, command, expected lines) of every command of the ```console blocks."""
    out = []
    for lang, _, first, body in blocks(page):
        if lang != "console":
            continue
        current = None
        for n, line in enumerate(body):
            if line.startswith("$ "):
                current = (first + n, line[2:], [])
                out.append(current)
            elif current is None:
                raise DocError("%s:%d: a console block starts with output, not with a '$ ' command"
                               % (page, first + n))
            else:
                current[2].append(line)
    return out


def line_matches(pattern, line):
    parts = pattern.split("...")
    regex = ".*".join(re.escape(p) for p in parts)
    return re.fullmatch(regex, line) is not None


def output_matches(expected, got):
    """doctest's ELLIPSIS over lines: '...' alone matches any number of lines."""
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            result = j == len(got)
        elif expected[i] == "...":
            result = any(match(i + 1, k) for k in range(j, len(got) + 1))
        else:
            result = j < len(got) and line_matches(expected[i], got[j]) and match(i + 1, j + 1)
        memo[(i, j)] = result
        return result

    return match(0, 0)


def console(optrace, demo, page):
    commands = console_commands(page)
    if not commands:
        raise DocError("%s has no ```console block" % page)
    work = tempfile.mkdtemp(prefix="optrace-docs-")
    try:
        folder = os.path.join(work, "demo")
        shutil.copytree(demo, folder)
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(os.path.abspath(optrace)) + os.pathsep + env.get("PATH", "")
        env.pop("COLUMNS", None)
        failed = 0
        for line_no, command, expected in commands:
            run = subprocess.run(["bash", "-c", command], cwd=folder, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=300)
            got = run.stdout.decode("utf-8", "replace").split("\n")
            if got and got[-1] == "":
                got.pop()
            while expected and expected[-1] == "":
                expected = expected[:-1]
            if output_matches(expected, got):
                print("ok   %s:%d: $ %s" % (page, line_no, command))
            else:
                failed += 1
                print("FAIL %s:%d: $ %s (exit %d)\n--- the page says:\n%s\n--- it printed:\n%s\n---"
                      % (page, line_no, command, run.returncode, "\n".join(expected), "\n".join(got)))
        print("%d commands, %d failed" % (len(commands), failed))
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- help -------------------------------------------------------------------------------------

OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def help_text(optrace, *args):
    run = subprocess.run([optrace, *args, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if run.returncode != 0:
        raise DocError("'%s %s --help' exited %d" % (optrace, " ".join(args), run.returncode))
    return run.stdout.decode()


def help_check(optrace, page):
    top = help_text(optrace)
    commands = sorted(set(re.findall(r"^\s*optrace ([a-z]+) ", top, re.M)))
    if not commands:
        raise DocError("found no command in 'optrace --help'")
    options = set(OPTION.findall(top))
    for command in commands:
        options |= set(OPTION.findall(help_text(optrace, command)))
    options.discard("--help")
    with open(page, encoding="utf-8") as f:
        doc = f.read()
    problems = []
    for command in commands:
        if not re.search(r"^#+ .*\b%s\b" % command, doc, re.M):
            problems.append("command '%s' has no section (a heading naming it)" % command)
    for option in sorted(options):
        if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(option), doc):
            problems.append("option %s (in --help) is not in %s" % (option, page))
    for option in sorted(set(OPTION.findall(doc)) - options - {"--help"}):
        problems.append("%s names %s, which no --help lists" % (page, option))
    for p in problems:
        print(p)
    print("%d commands, %d options in --help; %d problems" % (len(commands), len(options), len(problems)))
    return 1 if problems else 0


# ---- headers ----------------------------------------------------------------------------------

def headers(include_dir, pages):
    public = []
    for root, dirs, files in os.walk(include_dir):
        dirs[:] = [d for d in dirs if d != "detail"]
        for f in files:
            if f.endswith(".hpp"):
                public.append(os.path.relpath(os.path.join(root, f), os.path.dirname(include_dir)))
    text = ""
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text += f.read()
    missing = sorted(h for h in public if h not in text)
    for h in missing:
        print("%s is named on no page (%s)" % (h, ", ".join(os.path.basename(p) for p in pages)))
    print("%d public headers, %d named on no page" % (len(public), len(missing)))
    return 1 if missing else 0


# ---- members ----------------------------------------------------------------------------------

CLASS = re.compile(r"^( *)(class|struct) (\w+)\b[^;()]*\{\s*$")


def undocumented(path):
    """The public member functions of a header's classes that no `///` comment documents: the
    line above a declaration (past its `template <...>` lines) is a `///` comment, or another
    declaration of the same group (consecutive lines, the first one documented: overloads, the
    getters of a builder's setters). Members of classes in `detail` namespaces, of private nested
    classes and data members with a `///<` comment are not asked for."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    scopes = []  # (indent, public now, public where declared)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("namespace ") and "detail" in stripped:
            scopes.append((-1, False, False))  # a detail namespace: nothing in it is asked for
            continue
        m = CLASS.match(line)
        if m and not stripped.startswith("//"):
            visible = all(s[1] for s in scopes)
            scopes.append((len(m.group(1)), m.group(2) == "struct", visible))
            continue
        if not scopes:
            continue
        indent, public, visible = scopes[-1]
        if indent < 0:
            if re.match(r"^}\s*//\s*namespace", line):
                scopes.pop()
            continue
        if re.match(r"^ {%d}\};" % indent, line):
            scopes.pop()
            continue
        a = re.match(r"^ {%d,%d}(public|private|protected):" % (indent, indent + 1), line)
        if a:
            scopes[-1] = (indent, a.group(1) == "public", visible)
            continue
        if not (public and visible) or not re.match(r"^ {%d}[A-Za-z~]" % (indent + 2), line) or "(" not in line:
            continue
        if re.match(r"(return|using|friend|static_assert|if|for|while|switch|case)\b", stripped) or "///<" in line:
            continue
        j = i - 1
        while j >= 0:
            above = lines[j].strip()
            if above.startswith("template"):
                j -= 1
                continue
            if above.startswith("///"):
                break
            # the line above is a one-line declaration of the same group: look above it
            if re.match(r"^ {%d}[A-Za-z~]" % (indent + 2), lines[j]) and "(" in above and above.endswith(("}", ";")):
                j -= 1
                continue
            found.append("%s:%d: %s" % (path, i + 1, stripped[:100]))
            break
    return found


def members(headers):
    problems = []
    for h in headers:
        problems += undocumented(h)
    for p in problems:
        print(p)
    print("%d headers, %d public member functions without a /// comment" % (len(headers), len(problems)))
    return 1 if problems else 0


# ---- links ------------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to '-'."""
    seen = {}
    out = set()
    in_block = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line.rstrip("\n")) or line.strip() == "```":
                in_block = not in_block
                continue
            m = re.match(r"^#+\s+(.*?)\s*#*\s*$", line)
            if in_block or not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else "%s-%d" % (slug, n))
    return out


def links(pages):
    problems = 0
    count = 0
    for page in pages:
        in_block = False
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for n, line in enumerate(text.split("\n"), 1):
            if FENCE.match(line) or line.strip() == "```":
                in_block = not in_block
                continue
            if in_block:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):  # https:, mailto:
                    continue
                count += 1
                file_part, _, anchor = target.partition("#")
                path = os.path.normpath(os.path.join(os.path.dirname(page), file_part)) if file_part else page
                if not os.path.exists(path):
                    print("%s:%d: %s: no such file" % (page, n, target))
                    problems += 1
                elif anchor and path.endswith(".md") and anchor not in anchors(path):
                    print("%s:%d: %s: %s has no heading with that anchor" % (page, n, target, path))
                    problems += 1
    print("%d links, %d broken" % (count, problems))
    return 1 if problems else 0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    what, args = argv[1], argv[2:]
    try:
        if what == "cpp" and len(args) >= 2:
            cpp(args[0], args[1:])
            return 0
        if what == "console" and len(args) == 3:
            return console(*args)
        if what == "help" and len(args) == 2:
            return help_check(*args)
        if what == "headers" and len(args) >= 2:
            return headers(args[0], args[1:])
        if what == "members" and args:
            return members(args)
        if what == "links" and args:
            return links(args)
    except DocError as e:
        print("doc_check: %s" % e, file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
