"""docs/FORMAT.md's table "Durability across the two devices" against the
sources it names: no build needed, only the tree.

Each row names, in its "through" column, a file and the one function that
makes the state change, and optionally after "at" the call or assignment
that is the change itself. Its "durable first" column names the flushes as
code: a call with arguments or a receiver (`wb_flush_dev(wb, WB_DEV_BACKING)`,
`cache.flush_or_throw()`) or a request flag (`REQ_FUA`). A flush followed
by "in `f()`" must be in the body of f (found in the sources by its name);
one followed by "(missing)" as well is the contract's known gap in the code,
and must still be missing (when it is there, drop the mark). Any other
flush must be in the body of the row's own function, and, when the row
names the change, before it. Comments and string literals do not count:
a mention is not a call."""
import re

import pytest

from conftest import ROOT

FORMAT_MD = ROOT / "docs" / "FORMAT.md"
SECTION = "## Durability across the two devices"
HEADER = ["state change", "durable first: device, writes, made durable by", "through",
          "a power cut if the order is broken"]
# Where a function named after "in" is looked for.
SOURCE_GLOBS = ("kmod/*.c", "kmod/*.h", "format/*.h", "lib/src/*/*.cpp", "lib/src/*/*.hpp", "lib/include/wbkit/*.hpp",
                "tools/*/*.cpp")
# The functions the table must keep naming as the one way to their state change
# (issue 56): a row that goes away fails here, not silently.
REQUIRED_FUNCTIONS = {"__wb_writeback_batch", "wb_forward_heads", "wb_write_sb_record", "wb_slot_free", "wb_rc_inject",
                      "wb_clean_copy_trusted", "wb_write_around_start", "drain_and_switch", "mark_cache_clean",
                      "wb_replay", "wb_flush_work"}

SPAN = re.compile(r"`([^`]+)`")
FUNC_REF = re.compile(r"^[A-Za-z_][\w:~]*\(\)$")
FLAG = re.compile(r"^REQ_[A-Z_]+$")
CALL = re.compile(r"^[A-Za-z_][\w:]*(?:(?:\.|->)[A-Za-z_]\w*)*\(.*\)$")
CONNECTOR = re.compile(r"^\s*(?:,|/|or|and|,\s*or|,\s*and)?\s*$")
NOT_A_TYPE = {"return", "else", "case", "new", "delete", "throw", "sizeof", "typeof", "do"}


# ---------------------------------------------------------------------------
# The table


def table_rows():
    text = FORMAT_MD.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    lines = [line for line in text[start:end if end >= 0 else None].splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert cells and cells[0] == HEADER, f"the table's header is {cells[0] if cells else None}, not {HEADER}"
    assert set(cells[1][0]) <= set("-:") and len(cells[1]) == len(HEADER), "no separator row under the header"
    rows = cells[2:]
    for row in rows:
        assert len(row) == len(HEADER), f"a row with {len(row)} cells (a | inside a cell?): {row}"
    return rows


def is_flush(code):
    """A flush as the table names it: a flag, or a call with arguments or a receiver."""
    if FLAG.match(code):
        return True
    return bool(CALL.match(code)) and not FUNC_REF.match(code)


def parse_flushes(cell):
    """The flushes of a "durable first" cell: (code, qualifier function or None, missing)."""
    spans = list(SPAN.finditer(cell))
    out, group = [], []
    prev_end, prev_kind = 0, None

    def close(qualifier=None, missing=False):
        out.extend((code, qualifier, missing) for code in group)
        group.clear()

    for m in spans:
        code, between = m.group(1), cell[prev_end:m.start()]
        if group and between == " in " and FUNC_REF.match(code):
            missing = cell[m.end():].startswith(" (missing)")
            close(code[:-2], missing)
            prev_kind = "qualifier"
        elif is_flush(code):
            if not (group and prev_kind == "flush" and CONNECTOR.match(between)):
                close()
            group.append(code)
            prev_kind = "flush"
        else:
            close()
            prev_kind = "other"
        prev_end = m.end()
    close()
    return out


def parse_through(cell):
    """(file, function, marker or None) of a "through" cell."""
    spans = SPAN.findall(cell)
    assert len(spans) >= 2, f"'through' names no file and function: {cell}"
    path, func = spans[0], spans[1]
    assert FUNC_REF.match(func), f"'through' names no function as `name()`: {cell}"
    marker = None
    m = re.search(r"`" + re.escape(func) + r"` at `([^`]+)`", cell)
    if m:
        marker = m.group(1)
    return path, func[:-2], marker


def rows_with_ids():
    rows = table_rows()
    return [pytest.param(row, id=parse_through(row[2])[1]) for row in rows]


# ---------------------------------------------------------------------------
# The sources


def strip_code(text):
    """Comments and string/char literals blanked (same length, newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            close = ")" + m.group(1) + '"'
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, open_at, open_char, close_char):
    """The index just past the bracket that closes text[open_at]."""
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == open_char:
            depth += 1
        elif text[k] == close_char:
            depth -= 1
            if depth == 0:
                return k + 1
    return -1


def definitions(code, name):
    """The bodies (text between the braces) of every definition of name in code."""
    bodies = []
    for m in re.finditer(r"(?<![\w.>:~])" + re.escape(name) + r"\s*\(", code):
        # A definition's name follows a type: an identifier, *, &, > or ::, not an operator or a keyword.
        before = code[:m.start()].rstrip()
        word = re.search(r"(\w+)$", before)
        if not before or not (before[-1].isalnum() or before[-1] in "_*&>:") or (word and word.group(1) in NOT_A_TYPE):
            continue
        close = matching(code, m.end() - 1, "(", ")")
        if close < 0:
            continue
        tail = re.match(r"(?:\s|const\b|noexcept\b|override\b|final\b|->\s*[\w:<>,\s*&]+?(?=\{))*\{", code[close:])
        if not tail:
            continue
        open_brace = close + tail.end() - 1
        end = matching(code, open_brace, "{", "}")
        if end > 0:
            bodies.append(code[open_brace + 1:end - 1])
    return bodies


def class_body(code, cls):
    m = re.search(r"\b(?:class|struct)\s+" + re.escape(cls) + r"\b[^;{]*\{", code)
    if not m:
        return None
    end = matching(code, m.end() - 1, "{", "}")
    return code[m.end():end - 1] if end > 0 else None


def bodies_in(code, name):
    """Definitions of name (`f` or `Class::f`) in code: out of line, or inside the class."""
    found = definitions(code, name)
    if "::" in name and not found:
        cls, _, method = name.rpartition("::")
        body = class_body(code, cls.rpartition("::")[2])
        if body is not None:
            found = definitions(body, method)
    return found


_SOURCES = {}


def source(path):
    if path not in _SOURCES:
        _SOURCES[path] = strip_code((ROOT / path).read_text(errors="replace"))
    return _SOURCES[path]


def all_sources():
    paths = sorted({p.relative_to(ROOT).as_posix() for g in SOURCE_GLOBS for p in ROOT.glob(g)})
    return {p: source(p) for p in paths}


def body_of(path, name):
    bodies = bodies_in(source(path), name)
    assert bodies, f"{path} holds no definition of {name}() (a declaration or a mention is not one)"
    assert len(bodies) == 1, f"{path} defines {name}() {len(bodies)} times: name it as Class::{name}()"
    return bodies[0]


def body_anywhere(name):
    found = [(p, b) for p, code in all_sources().items() for b in bodies_in(code, name)]
    assert found, f"no definition of {name}() in {', '.join(SOURCE_GLOBS)}"
    assert len(found) == 1, f"{name}() is defined in {len(found)} places ({[p for p, _ in found]}): qualify it"
    return found[0]


def squeeze(text):
    return re.sub(r"\s+", "", text)


def positions(body, code):
    """Where code occurs in body (whitespace ignored), as offsets in the squeezed body."""
    flat = squeeze(body)
    if FLAG.match(code):
        return [m.start() for m in re.finditer(r"\b" + code + r"\b", flat)]
    pattern = re.escape(squeeze(code))
    return [m.start() for m in re.finditer(r"(?<![\w.>])" + pattern, flat)]


# ---------------------------------------------------------------------------
# The checks


def test_the_table_names_every_state_change():
    rows = table_rows()
    named = {parse_through(row[2])[1] for row in rows}
    assert REQUIRED_FUNCTIONS <= named, f"rows missing for {sorted(REQUIRED_FUNCTIONS - named)}"
    for row in rows:
        assert parse_flushes(row[1]), f"a row names no flush as code: {row[0]}"
        assert row[3], f"a row says nothing of a power cut: {row[0]}"


@pytest.mark.parametrize("row", rows_with_ids())
def test_row_function_exists_and_flushes_first(row):
    path, func, marker = parse_through(row[2])
    assert (ROOT / path).is_file(), f"{path} does not exist"
    body = body_of(path, func)
    change = None
    if marker:
        where = positions(body, marker)
        assert where, f"{func}() in {path} has no `{marker}`"
        change = where[-1]
    problems = []
    for code, qualifier, missing in parse_flushes(row[1]):
        if qualifier:
            where_path, where_body = body_anywhere(qualifier)
            found = positions(where_body, code)
            if missing and found:
                problems.append(f"`{code}` is in {qualifier}() ({where_path}) now: drop '(missing)' from the row")
            elif not missing and not found:
                problems.append(f"`{code}` is not called in {qualifier}() ({where_path})")
            continue
        found = positions(body, code)
        if not found:
            problems.append(f"`{code}` is not called in {func}() ({path})")
        elif change is not None and found[0] >= change:
            problems.append(f"`{code}` comes after `{marker}` in {func}() ({path})")
    assert not problems, f"{row[0]}:\n  " + "\n  ".join(problems)


def test_writeback_advances_only_where_the_table_says():
    """last_writeback_id moves forward only in the functions of the table: a
    second path to "written back" would bypass its flushes."""
    named = {parse_through(row[2])[1] for row in table_rows()}
    assign = re.compile(r"WRITE_ONCE\(wb->last_writeback_id,([^;]*)\)|wb->last_writeback_id=([^;=][^;]*)")
    stray = []
    for path, code in all_sources().items():
        if not path.startswith("kmod/"):
            continue
        for func in re.findall(r"^\w[^;{}()]*?\b(\w+)\s*\([^;{]*\)\s*\{", code, re.M):
            for body in definitions(code, func):
                for m in assign.finditer(squeeze(body)):
                    value = m.group(1) or m.group(2)
                    if value != "0" and func not in named:
                        stray.append(f"{path}: {func}() sets last_writeback_id to {value}")
    assert not stray, "\n".join(stray)


def test_every_mark_clean_follows_a_flushed_replay():
    """mark_cache_clean() is not given the backing device: each caller runs
    execute_replay() (which flushes the backing device) before it."""
    callers = []
    for path, code in all_sources().items():
        for func in set(re.findall(r"\b(\w+)\s*\([^;{()]*(?:\([^()]*\)[^;{()]*)*\)\s*(?:const\s*)?\{", code)):
            for body in definitions(code, func):
                calls = positions(body, "mark_cache_clean(")
                if not calls or func == "mark_cache_clean":
                    continue
                replay = positions(body, "execute_replay(")
                callers.append((path, func, bool(replay) and replay[0] < calls[0]))
    assert callers, "nothing calls mark_cache_clean()"
    bad = [f"{p}: {f}()" for p, f, ok in callers if not ok]
    assert not bad, "mark_cache_clean() without execute_replay() before it in: " + ", ".join(bad)
