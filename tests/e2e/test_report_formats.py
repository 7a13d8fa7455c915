#!/usr/bin/env python3
"""pcc-report's graph formats end to end: `--format dot` of compiled plans is
read by Graphviz's `dot` (a missing `dot` fails this test: tools/setup.sh
installs it), has one node per reference kernel, colours the split nodes of a
tensor-parallel plan as split and is the same bytes every time; `--format
html` is one well-formed page with the graph as inline SVG, a row per
alternative of report.json, nothing loaded from elsewhere, every name from
the model escaped, and without `dot` it still exits 0 with the dot source and
a one-line warning.
"""

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper as H, numpy_helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

GPT2 = e2e.model_path("gpt2_tiny.onnx")
CNN = e2e.model_path("cnn_small.onnx")
MLP = e2e.model_path("mlp.onnx")

NODE = re.compile(r"^\s*(k\d+|c\d+|in\d+|out\d+) \[(.*)\];$", re.M)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class StrictParser(html.parser.HTMLParser):
    """Collects what makes a page ill-formed: end tags that close nothing or
    the wrong element, elements left open; counts the rows of each table by
    its class."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.errors = []
        self.tags = []
        self.rows = {}
        self.table = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.table.append(dict(attrs).get("class", ""))
        if tag == "tr" and self.table:
            self.rows[self.table[-1]] = self.rows.get(self.table[-1], 0) + 1
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'} "
                               f"at line {self.getpos()[0]}")
            return
        self.stack.pop()
        if tag == "table":
            self.table.pop()

    def close(self):
        super().close()
        if self.stack:
            self.errors.append(f"left open: {self.stack}")


def dot_nodes(dot):
    """\returns {node id: attribute text} of a dot file written by pcc-report."""
    return {m.group(1): m.group(2) for m in NODE.finditer(dot)}


def script_model(path):
    """A Megatron MLP whose node, value and weight names hold markup, quotes
    and backslashes."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1 <i>")
    w2 = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w2\"")
    nodes = [
        H.make_node("MatMul", ["x", "w1 <i>"], ["h<script>"], name="<script>alert('fc1')</script>"),
        H.make_node("Relu", ["h<script>"], ["a&amp;"], name="relu \"q\" \\ <b>bold</b>"),
        H.make_node("MatMul", ["a&amp;", "w2\""], ["y"], name="</script><script>alert(2)//"),
    ]
    g = H.make_graph(nodes, "<script>graph</script>",
                     [H.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 8])],
                     [H.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 8])], [w1, w2])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), path)


class ReportFormatTests:
    def __init__(self, suite, tools):
        self.suite = suite
        self.tools = tools
        self.work = suite.tempdir("report-formats")
        self.dot_bin = shutil.which("dot")

    def compile(self, name, model, args):
        out = os.path.join(self.work, name + ".pcc")
        r = self.tools.run("pcc", [model, "--quiet", "-o", out] + args)
        if not self.suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
            return None
        with open(os.path.join(out, "report.json")) as f:
            return out, json.load(f)

    def graphviz_present(self):
        self.suite.check("Graphviz's dot is installed (tools/setup.sh installs graphviz)", self.dot_bin is not None,
                         f"  no dot on PATH={os.environ.get('PATH')}")

    def check_dot(self, name, plan, report):
        """Checks the dot of `plan`; \returns its nodes, or None."""
        r = self.tools.run("pcc-report", [plan, "--format", "dot"])
        if not self.suite.check(f"{name}: --format dot exits 0", r.returncode == 0 and r.stderr == "", r.describe()):
            return None
        dot = r.stdout
        again = self.tools.run("pcc-report", [plan, "--format", "dot"])
        self.suite.check(f"{name}: the dot is the same bytes every time", again.stdout == dot)
        if self.dot_bin:
            p = subprocess.run([self.dot_bin, "-Tsvg"], input=dot.encode(), capture_output=True, timeout=300)
            self.suite.check(f"{name}: dot -Tsvg reads it", p.returncode == 0 and b"<svg" in p.stdout
                             and not p.stderr.strip(), f"  exit {p.returncode}: {p.stderr.decode(errors='replace')}")
        nodes = dot_nodes(dot)
        kernels = sorted(int(k[1:]) for k in nodes if k.startswith("k"))
        want = sum(report["reference"]["ops"].values())
        self.suite.check(f"{name}: one node per reference kernel", kernels == list(range(want)),
                         f"  {len(kernels)} kernel nodes, the reference has {want} kernels")
        self.suite.check(f"{name}: a node per model input and output",
                         sum(k.startswith("in") for k in nodes) >= 1 and sum(k.startswith("out") for k in nodes) >= 1)
        return nodes

    def node_named(self, nodes, node_name):
        """\returns the attributes of the kernel node whose label names `node_name`."""
        needle = "\\n" + node_name.replace("\\", "\\\\").replace('"', '\\"') + "\\n"
        hits = [a for k, a in nodes.items() if k.startswith("k") and needle in a]
        return hits[0] if len(hits) == 1 else None

    def tensor_parallel(self):
        for name, args, column_class in (("gpt2-tp2", ["--gpus", 2, "--strategy", "tp=2"], "layout-tp"),
                                         ("gpt2-dp2tp2", ["--gpus", 4, "--strategy", "dp=2,tp=2"], "layout-dp-tp")):
            compiled = self.compile(name, GPT2, ["--batch", 8] + args)
            if not compiled:
                continue
            plan, report = compiled
            nodes = self.check_dot(name, plan, report)
            if nodes is None:
                continue
            entries = [re.match(r"\S+ '(.*)': (split dim \d+|split contraction \(partial sum\))$", t)
                       for t in report["tensor_parallel"]]
            self.suite.check(f"{name}: every tensor-parallel line names a node and its split",
                             entries and all(entries), f"  {report['tensor_parallel']}")
            entries = [e.groups() for e in entries if e]
            self.suite.check(f"{name}: the plan splits nodes over tp", len(entries) >= 2, f"  {entries}")
            tp_fill = None
            for node, how in entries:
                attrs = self.node_named(nodes, node)
                if attrs is None:
                    continue  # fused into a kernel named after its first node
                if how.startswith("split dim"):
                    ok = f'class="{column_class}"' in attrs and "over tp" in attrs
                    self.suite.check(f"{name}: {node} ({how}) is coloured split over tp ({column_class})", ok,
                                     f"  {attrs}")
                    fill = re.search(r'fillcolor="(#[0-9a-f]{6})"', attrs)
                    tp_fill = tp_fill or (fill.group(1) if fill else None)
                else:
                    want = "layout-replicated" if column_class == "layout-tp" else "layout-dp"
                    self.suite.check(f"{name}: {node} (partial sums, full shape) is {want}",
                                     f'class="{want}"' in attrs, f"  {attrs}")
            colours = {re.search(r'fillcolor="(#[0-9a-f]{6})"', a).group(1) for k, a in nodes.items()
                       if k.startswith("k") and 'class="layout-replicated"' in a}
            if column_class == "layout-tp":
                self.suite.check(f"{name}: split and replicated nodes differ in colour",
                                 tp_fill is not None and colours and tp_fill not in colours, f"  {tp_fill} {colours}")
            collectives = [a for k, a in nodes.items() if k.startswith("c")]
            self.suite.check(f"{name}: the collectives are nodes of their own, named with their axis",
                             collectives and all(re.search(r"all_reduce|all_gather|reduce_scatter|all_to_all", a) and "over tp" in a
                                                 for a in collectives), f"  {collectives}")
            self.check_html(name, plan, report)

    def data_parallel(self):
        for name, model, args in (("gpt2-auto8", GPT2, ["--batch", 8, "--gpus", 8]),
                                  ("cnn-auto4", CNN, ["--batch", 8, "--gpus", 4]),
                                  ("mlp-1", MLP, ["--batch", 4, "--gpus", 1])):
            compiled = self.compile(name, model, args)
            if not compiled:
                continue
            plan, report = compiled
            nodes = self.check_dot(name, plan, report)
            if nodes is None:
                continue
            classes = [re.search(r'class="([^"]*)"', a).group(1) for k, a in nodes.items() if k.startswith("k")]
            mesh = report["mesh"]
            if mesh["tp"] == 1 and mesh["dp"] > 1:
                self.suite.check(f"{name}: a dp-only plan splits nodes over dp and none over tp",
                                 "layout-dp" in classes and not any("tp" in c for c in classes), f"  {set(classes)}")
            if report["world_size"] == 1:
                self.suite.check(f"{name}: one rank: nothing is split", all(c in ("layout-replicated", "layout-absent")
                                                                           for c in classes), f"  {set(classes)}")
            self.check_html(name, plan, report)

    def check_html(self, name, plan, report):
        """Checks the HTML page of `plan`; \returns its text, or None."""
        out = os.path.join(self.work, name + ".html")
        r = self.tools.run("pcc-report", [plan, "--format", "html", "-o", out])
        if not self.suite.check(f"{name}: --format html exits 0 quietly", r.returncode == 0 and r.stderr == "",
                                r.describe()):
            return None
        with open(out, encoding="utf-8") as f:
            page = f.read()
        parser = StrictParser()
        parser.feed(page)
        parser.close()
        self.suite.check(f"{name}: the page is well-formed", not parser.errors, "  " + "\n  ".join(parser.errors[:5]))
        self.suite.check(f"{name}: the graph is inline SVG", any(t == "svg" for t, _ in parser.tags))
        alternatives = len(report.get("alternatives", []))
        self.suite.check(f"{name}: one row per alternative of report.json",
                         alternatives >= 1 and parser.rows.get("alternatives", 0) == alternatives + 1,
                         f"  {parser.rows.get('alternatives')} rows (header included), {alternatives} alternatives")
        collectives = len(report["collectives"])
        self.suite.check(f"{name}: one row per collective of report.json",
                         parser.rows.get("collectives", 0) == (collectives + 1 if collectives else 0),
                         f"  {parser.rows.get('collectives')} rows, {collectives} collectives")
        external = [(t, a) for t, a in parser.tags for k in ("src", "href", "xlink:href")
                    if re.match(r"\s*(https?:)?//", a.get(k) or "")]
        self.suite.check(f"{name}: nothing is loaded from elsewhere",
                         not external and not re.search(r"<(script|link|img|iframe)\b|@import|url\(", page, re.I),
                         f"  {external[:3]}")
        return page

    def escaping(self):
        # A folder "<script>alert(0)<" makes the path hold a whole element.
        folder = os.path.join(self.work, "<script>alert(0)<")
        os.makedirs(folder, exist_ok=True)
        model = os.path.join(folder, "script>.onnx")
        script_model(model)
        compiled = self.compile("script names", model, ["--batch", 4, "--gpus", 2, "--strategy", "tp=2"])
        if not compiled:
            return
        plan, report = compiled
        self.suite.check("script names: the plan keeps the names",
                         any("<script>" in t for t in report["tensor_parallel"]), f"  {report}")
        nodes = self.check_dot("script names", plan, report)
        if nodes is not None:
            fc1 = self.node_named(nodes, "<script>alert('fc1')</script>") or ""
            split = any(t.startswith("MatMul '<script>alert('fc1')</script>': split dim") for t in report["tensor_parallel"])
            self.suite.check("script names: the MatMul named <script> is drawn with its tp layout",
                             f'class="{"layout-tp" if split else "layout-replicated"}"' in fc1, f"  {fc1}\n  {nodes}")
            relu = self.node_named(nodes, 'relu "q" \\ <b>bold</b>')
            self.suite.check("script names: quotes and backslashes are escaped in dot", relu is not None, f"  {nodes}")
        page = self.check_html("script names", plan, report)
        if page is not None:
            self.suite.check("script names: no name reaches the page as markup",
                             not re.search(r"<\s*/?\s*(script|b|i)\b", page, re.I)
                             and "&lt;script&gt;alert(&#39;fc1&#39;)&lt;/script&gt;" in page
                             and "&lt;script&gt;alert(0)&lt;/script&gt;.onnx" in page,
                             "  " + "\n  ".join(ln for ln in page.splitlines() if "script" in ln.lower())[:2000])

    def without_graphviz(self):
        compiled = self.compile("no-dot", MLP, ["--batch", 4, "--gpus", 2])
        if not compiled:
            return
        plan, report = compiled
        out = os.path.join(self.work, "no-dot.html")
        empty = os.path.join(self.work, "empty-bin")
        os.makedirs(empty, exist_ok=True)
        cmd = [self.tools.path("pcc-report"), plan, "--format", "html", "-o", out]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PATH=empty), timeout=300)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        self.suite.check("without dot: exit 0 and a one-line warning",
                         p.returncode == 0 and len(lines) == 1 and "warning" in lines[0] and "dot" in lines[0],
                         f"  exit {p.returncode}\n  stderr: {p.stderr}")
        if p.returncode != 0:
            return
        with open(out, encoding="utf-8") as f:
            page = f.read()
        parser = StrictParser()
        parser.feed(page)
        parser.close()
        self.suite.check("without dot: the page says so and carries the dot source",
                         "could not be drawn" in page and '<pre class="dot">digraph plan {' in page
                         and "<svg" not in page and not parser.errors, f"  {parser.errors}")


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_report_formats", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-report")):
        t = ReportFormatTests(suite, tools)
        suite.run_case("graphviz present", t.graphviz_present)
        suite.run_case("tensor parallel", t.tensor_parallel)
        suite.run_case("data parallel", t.data_parallel)
        suite.run_case("escaping", t.escaping)
        suite.run_case("without graphviz", t.without_graphviz)
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
