#!/usr/bin/env python3
"""Checks of report.html (ux.report_data, ux.report_render, ux.runs_*), standard library only.

  report_check.py data PAGE METRICS_CSV
      the page's embedded data equals metrics.csv: same columns, same rows, same values
      (empty cell = null, nan/inf as strings); and the page is self-contained.
  report_check.py render PAGE PNG CHROMIUM
      renders PAGE in headless Chromium once (DOM dump, console log, screenshot): no
      console error, the script drew without error, one SVG <path class="curve"> per
      curve (run x metric) with as many points as the data has finite values of it, and
      a PNG of the page.
  report_check.py runs PAGE N
      a comparison page: N runs in its data, each with its label.
Exit 0 ok, 1 a check failed, 77 skipped (Chromium absent, render only).
"""
import csv
import html.parser
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

DATA_OPEN = '<script type="application/json" id="fulgur-report-data">'
SVG_NS = 'http://www.w3.org/2000/svg'
NOT_CHARTED = re.compile(r'^(epoch|step)$|^(time|memory|test)/')
failures = []


def fail(msg):
    failures.append(msg)
    print('FAIL: ' + msg, file=sys.stderr)


ROWS_OPEN = '<script type="application/json" class="fulgur-report-rows">'


def embedded(page_text):
    start = page_text.find(DATA_OPEN)
    if start < 0:
        raise ValueError('no data block')
    data_at = start
    start += len(DATA_OPEN)
    end = page_text.find('</script>', start)
    doc = json.loads(page_text[start:end])
    runs = doc.get('runs') or []
    if len(runs) == 1 and runs[0].get('row_blocks') is True:
        # a run page kept in place: its rows are the blocks before the data block
        rows, at = [], 0
        while True:
            at = page_text.find(ROWS_OPEN, at, data_at)
            if at < 0:
                break
            at += len(ROWS_OPEN)
            close = page_text.find('</script>', at)
            rows.extend(json.loads(page_text[at:close]))
        width = len(runs[0].get('columns') or [])
        runs[0]['rows'] = [r + [None] * (width - len(r)) for r in rows]
    return doc


def cell_equal(csv_text, value):
    if csv_text == '':
        return value is None
    if csv_text in ('nan', 'inf', '-inf'):
        return value == csv_text
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(csv_text) == float(value)


def check_self_contained(text):
    for pattern, what in [(r'<link\b', 'a <link> element'), (r'\ssrc\s*=', 'a src attribute'),
                          (r'@import', 'a CSS @import'), (r'url\(', 'a CSS url()'),
                          (r'@font-face', 'a web font')]:
        if re.search(pattern, text, re.I):
            fail('the page is not self-contained: ' + what)
    for m in re.finditer(r'https?://[^\s"\'<>)]+', text):
        if m.group(0) != SVG_NS:
            fail('the page names a network address: ' + m.group(0))


def check_data(page, metrics_csv):
    text = open(page, encoding='utf-8').read()
    check_self_contained(text)
    doc = embedded(text)
    if doc.get('format') != 'fulgur-report' or doc.get('version') != 1 or len(doc.get('runs', [])) != 1:
        fail('data header: format %r version %r runs %r' % (doc.get('format'), doc.get('version'), len(doc.get('runs', []))))
        return
    run = doc['runs'][0]
    with open(metrics_csv, newline='') as f:
        table = list(csv.reader(f))
    header, rows = table[0], table[1:]
    if run['columns'] != header:
        fail('columns differ:\n  page %s\n  csv  %s' % (run['columns'], header))
        return
    if len(run['rows']) != len(rows):
        fail('%d rows in the page, %d in metrics.csv' % (len(run['rows']), len(rows)))
    for i, (got, want) in enumerate(zip(run['rows'], rows)):
        if len(got) != len(want):
            fail('row %d: %d cells in the page, %d in metrics.csv' % (i + 1, len(got), len(want)))
            continue
        for j, (g, w) in enumerate(zip(got, want)):
            if not cell_equal(w, g):
                fail('row %d, %s: page %r, metrics.csv %r' % (i + 1, header[j], g, w))
    cfg = {(s, k): v for s, k, v in run['config']}
    if cfg.get(('trainer', 'max_epochs')) is None:
        fail('the page holds no resolved configuration')
    plugins = (run.get('status') or {}).get('plugins') or []
    if not any(p.get('kind') == 'backend' and p.get('version') for p in plugins):
        fail('the page holds no plugin versions (status.json)')
    if run.get('state') != 'finished':
        fail('state %r, want finished' % run.get('state'))
    if not rows:
        fail('metrics.csv has no rows: nothing was compared')
    print('data: %d columns, %d rows equal to metrics.csv' % (len(header), len(rows)))


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.curves, self.error_text, self._in_error = [], '', False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'path' and 'curve' in (a.get('class') or '').split():
            self.curves.append(a)
        self._in_error = tag == 'div' and a.get('id') == 'error'

    def handle_endtag(self, tag):
        self._in_error = False

    def handle_data(self, data):
        if self._in_error:
            self.error_text += data


def expected_curves(doc):
    want = {}
    for r, run in enumerate(doc['runs']):
        cols, rows = run['columns'], run['rows']
        for j, name in enumerate(cols):
            if NOT_CHARTED.search(name):
                continue
            n = sum(1 for row in rows if isinstance(row[j], (int, float)) and not isinstance(row[j], bool)
                    and math.isfinite(row[j]))
            if n:
                want[(str(r), name)] = n
    return want


def png_size(path):
    with open(path, 'rb') as f:
        head = f.read(24)
    if head[:8] != b'\x89PNG\r\n\x1a\n':
        return None
    return struct.unpack('>II', head[16:24])


def render(page, png, chromium):
    exe = shutil.which(chromium) or (chromium if os.access(chromium, os.X_OK) else None)
    if not exe:
        print('SKIP: %s is not installed' % chromium)
        sys.exit(77)
    doc = embedded(open(page, encoding='utf-8').read())
    with tempfile.TemporaryDirectory() as profile:
        cmd = [exe, '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
               '--user-data-dir=' + profile, '--enable-logging=stderr', '--v=0',
               '--window-size=1200,900', '--screenshot=' + os.path.abspath(png), '--dump-dom',
               'file://' + os.path.abspath(page)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240,
                           cwd=profile)
    log = p.stderr.decode('utf-8', 'replace')
    if p.returncode != 0:
        fail('chromium exited %d:\n%s' % (p.returncode, log[-2000:]))
    for line in log.splitlines():
        if ':CONSOLE' in line or 'Uncaught' in line:
            fail('console: ' + line)
    dom = Dom()
    dom.feed(p.stdout.decode('utf-8', 'replace'))
    if dom.error_text.strip():
        fail('the page says: ' + dom.error_text.strip())
    want = expected_curves(doc)
    got = {}
    for c in dom.curves:
        key = (c.get('data-run'), c.get('data-series'))
        points = len(re.findall(r'[ML]', c.get('d', '')))
        if key in got:
            fail('two paths for the curve %s of run %s' % (key[1], key[0]))
        got[key] = points
        if str(points) != c.get('data-points'):
            fail('%s: %d points drawn, data-points says %s' % (key, points, c.get('data-points')))
    for key, n in sorted(want.items()):
        if key not in got:
            fail('no path for %s of run %s (%d values)' % (key[1], key[0], n))
        elif got[key] != n:
            fail('%s of run %s: %d points drawn, %d logged' % (key[1], key[0], got[key], n))
    for key in sorted(set(got) - set(want)):
        fail('a path for %s of run %s, which has no values' % (key[1], key[0]))
    size = png_size(png) if os.path.exists(png) else None
    if size != (1200, 900):
        fail('screenshot %s: %s, want a 1200x900 PNG' % (png, size))
    print('render: %d curves, %s' % (len(got), ', '.join('%s[%s]=%d' % (k[1], k[0], v) for k, v in sorted(got.items()))))


def check_runs(page, n):
    text = open(page, encoding='utf-8').read()
    check_self_contained(text)
    doc = embedded(text)
    labels = [r.get('label') for r in doc.get('runs', [])]
    if len(labels) != n:
        fail('%d runs in the comparison, want %d' % (len(labels), n))
    print('runs: %s' % ', '.join(str(l) for l in labels))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    what = sys.argv[1]
    if what == 'data':
        check_data(sys.argv[2], sys.argv[3])
    elif what == 'render':
        render(sys.argv[2], sys.argv[3], sys.argv[4])
    elif what == 'runs':
        check_runs(sys.argv[2], int(sys.argv[3]))
    else:
        print(__doc__)
        return 2
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
