#!/usr/bin/env python3
"""The import graph of a crate's top-level modules, and its circles.

Usage: scripts/module-graph.py CRATE_SRC [--max-circle N] [--max-back N] [--forbid A:B ...]

Each top-level module of the crate (a file `src/x.rs` or a folder `src/x/`) is one node; an
edge A -> B is any `crate::B...` path written in A's code (comments and strings left out),
or a name A imports from the crate root that B defines. It prints the modules by level
(a module's level is one more than the highest level among those it imports, over the
graph with each circle taken as one node), every circle (a strongly connected set of more
than one module), and the imports that run back up: the fewest edges that, taken out,
leave no circle, as a greedy order finds them (Eades, Lin and Smyth). The limits make it
exit 1 when exceeded; `--forbid collect:read` fails on any import of `read` by `collect`.
"""
import argparse
import pathlib
import re
import sys

PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
BRACE = re.compile(r"\buse\s+crate::\{([^}]*)\}", re.S)


def strip(text):
    """The code without comments, string and char literals (roughly: enough for paths)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    out = []
    for line in text.split("\n"):
        line = re.sub(r'r#*"[^"]*"#*', '""', line)
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        line = re.sub(r"'(\\.|[^'\\])'", "' '", line)
        out.append(line.split("//", 1)[0])
    return "\n".join(out)


def modules(src):
    found = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        top = rel.parts[0]
        if top in ("lib.rs", "main.rs"):
            continue
        name = top[:-3] if top.endswith(".rs") else top
        found.setdefault(name, []).append(path)
    return found


def root_names(src, mods):
    """Names the crate root re-exports, and the module each comes from."""
    lib = strip((src / "lib.rs").read_text())
    names = {}
    for m in re.finditer(r"pub(?:\([a-z]+\))?\s+use\s+([a-z_]+)::(\{[^}]*\}|[A-Za-z_0-9]+)", lib):
        module, items = m.group(1), m.group(2).strip("{}")
        if module not in mods:
            continue
        for item in items.split(","):
            item = item.strip().split(" as ")[-1].strip()
            if item:
                names[item] = module
    return names


def graph(src):
    mods = modules(src)
    names = root_names(src, mods)
    edges = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            code = strip(f.read_text())
            for target in PATH.findall(code):
                if target in mods and target != m:
                    edges[m].add(target)
                elif target in names and names[target] != m:
                    edges[m].add(names[target])
            for group in BRACE.findall(code):
                for item in re.split(r"[,\s]+", group):
                    item = item.split("::")[0]
                    if item in mods and item != m:
                        edges[m].add(item)
                    elif item in names and names[item] != m:
                        edges[m].add(names[item])
    return edges


def circles(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def back_edges(edges, comp):
    """A small set of edges whose removal breaks every circle inside `comp` (greedy order)."""
    nodes = set(comp)
    sub = {v: {w for w in edges[v] if w in nodes} for v in comp}
    order_left, order_right = [], []
    left = set(nodes)
    while left:
        changed = True
        while changed:
            changed = False
            for v in sorted(left):
                if not any(w in left for w in sub[v]):
                    order_right.insert(0, v)
                    left.discard(v)
                    changed = True
            for v in sorted(left):
                if not any(v in sub[u] for u in left):
                    order_left.append(v)
                    left.discard(v)
                    changed = True
        if left:
            best = max(sorted(left), key=lambda v: sum(w in left for w in sub[v]) - sum(v in sub[u] for u in left))
            order_left.append(best)
            left.discard(best)
    # Dependencies point down: a module comes after what it imports, so an edge to a later
    # module in this order runs back up.
    order = order_right[::-1] + order_left[::-1]
    pos = {v: i for i, v in enumerate(order)}
    return sorted((v, w) for v in comp for w in sub[v] if pos[w] > pos[v])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=pathlib.Path)
    ap.add_argument("--max-circle", type=int)
    ap.add_argument("--max-back", type=int)
    ap.add_argument("--forbid", action="append", default=[])
    a = ap.parse_args()
    edges = graph(a.src)
    comps = circles(edges)
    comp_of = {v: i for i, c in enumerate(comps) for v in c}
    level = {}

    def lev(i):
        if i not in level:
            level[i] = -1
            deps = {comp_of[w] for v in comps[i] for w in edges[v]} - {i}
            level[i] = 1 + max((lev(j) for j in deps), default=-1)
        return level[i]

    for i in range(len(comps)):
        lev(i)
    n_edges = sum(len(e) for e in edges.values())
    big = [c for c in comps if len(c) > 1]
    back = [e for c in big for e in back_edges(edges, c)]
    print(f"{a.src}: {len(edges)} modules on {1 + max(level.values(), default=0)} levels, {n_edges} imports, "
          f"{len(back)} running back up, {len(big)} circle(s)")
    for lv in range(max(level.values(), default=0) + 1):
        names = sorted(v for i, c in enumerate(comps) if level[i] == lv for v in c)
        print(f"  level {lv}: {' '.join(names)}")
    for c in big:
        print(f"  circle of {len(c)}: {' '.join(c)}")
    for v, w in back:
        print(f"  back up: {v} -> {w}")
    failed = False
    largest = max((len(c) for c in big), default=0)
    if a.max_circle is not None and largest > a.max_circle:
        print(f"error: a circle of {largest} modules (at most {a.max_circle})", file=sys.stderr)
        failed = True
    if a.max_back is not None and len(back) > a.max_back:
        print(f"error: {len(back)} imports run back up (at most {a.max_back})", file=sys.stderr)
        failed = True
    for rule in a.forbid:
        frm, to = rule.split(":")
        if to in edges.get(frm, set()):
            print(f"error: {frm} imports {to}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
