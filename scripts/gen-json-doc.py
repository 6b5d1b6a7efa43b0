#!/usr/bin/env python3
"""Writes docs/json.md: every field of the JSON report (`iopath.report/1`), from the doc comments
of the Rust structs that serialize it (src/report/mod.rs `Report` and the types it holds), so the
page cannot drift from the code: tests/docs.rs checks every key of a recorded report is on it.

    python3 scripts/gen-json-doc.py > docs/json.md
"""
import glob
import re

SRC = {p: open(p).read() for p in glob.glob('src/**/*.rs', recursive=True)}


def struct(name):
    for text in SRC.values():
        m = re.search(r'pub struct ' + re.escape(name) + r'\s*\{(.*?)\n\}', text, re.S)
        if m:
            return m.group(1)
    return None


def fields(body):
    doc, attrs = [], []
    for line in body.split('\n'):
        s = line.strip()
        if s.startswith('///'):
            doc.append(s[3:].strip())
        elif s.startswith('#['):
            attrs.append(s)
        elif s.startswith('pub ') and ':' in s:
            name, ty = s[4:].split(':', 1)
            yield name.strip(), ty.strip().rstrip(','), ' '.join(doc), ' '.join(attrs)
            doc, attrs = [], []
        elif s and not s.startswith('//'):
            doc, attrs = [], []


def inner(ty):
    """The crate type a field holds (through Option, Vec, paths), or None."""
    t = re.sub(r'^(Option|Vec|Box)<(.*)>$', r'\2', ty)
    t = re.sub(r'^(Option|Vec)<(.*)>$', r'\2', t)
    t = t.split('::')[-1].strip('<> ')
    if re.match(r'^[A-Z]\w*$', t) and t not in ('String', 'PathBuf', 'BTreeMap', 'HashMap') and struct(t):
        return t
    return None


# Fields whose name says what they are, for those without a doc comment of their own.
KNOWN = {
    'schema': ('', 'The format and its version, e.g. `iopath.report/1`.'),
    'tool': ('', 'The program that wrote it and its version.'),
    'system': ('', 'The machine: kernel release and CPU count.'),
    'target': ('', 'The file or device the generator ran on.'),
    'warnings': ('', 'What the run measured that is not what was asked (each with the fix).'),
    'ios': ('I/Os', 'I/Os completed.'),
    'reads': ('I/Os', 'Of them, reads.'),
    'writes': ('I/Os', 'Of them, writes.'),
    'runtime_ns': ('ns', 'How long the I/O ran.'),
    'iops': ('I/Os per s', 'I/Os completed per second of the run.'),
    'bw_bytes': ('bytes per s', 'Bytes moved per second of the run.'),
    'cpu': ('', 'The generator\'s CPU time, user and system, and per I/O.'),
    'ctx_switches': ('', 'Context switches of the I/O threads.'),
    'count': ('', 'How many values the summary holds.'),
    'min': ('ns', 'Smallest.'), 'max': ('ns', 'Largest.'), 'mean': ('ns', 'Mean.'),
    'p50': ('ns', 'Median.'), 'p90': ('ns', '90th percentile.'), 'p99': ('ns', '99th percentile.'),
    'p999': ('ns', '99.9th percentile.'),
    'mean_ns': ('ns', 'Mean.'), 'p50_ns': ('ns', 'Median.'), 'p90_ns': ('ns', '90th percentile.'),
    'p99_ns': ('ns', '99th percentile.'), 'p999_ns': ('ns', '99.9th percentile.'),
    'max_ns': ('ns', 'Largest.'), 'min_ns': ('ns', 'Smallest.'),
    'total': ('', 'The count over the whole run.'),
    'per_io': ('per I/O', 'The count divided by the I/Os it applies to.'),
    'name': ('', 'What this entry is (a hook, a route, a syscall, a file).'),
    'attached': ('', 'Whether the program attached on this kernel.'),
    'error': ('', 'Why it did not (libbpf\'s or the kernel\'s words).'),
    'feature': ('', 'A feature of the probe set (`iopath doctor` names them).'),
    'why': ('', 'Why it is off here: the kernel\'s reason.'),
}


def unit(name):
    if name in KNOWN and KNOWN[name][0]:
        return KNOWN[name][0]
    for suf, u in (('_ns', 'ns'), ('_us', 'us'), ('_bytes', 'bytes'), ('_s', 's'), ('_pct', '%')):
        if name.endswith(suf):
            return u
    return ''


def rows(name, prefix, seen, out):
    body = struct(name)
    if body is None or name in seen:
        return
    seen.add(name)
    nested = []
    for f, ty, doc, attrs in fields(body):
        if 'skip_serializing)' in attrs or 'serde(skip)' in attrs:
            continue
        m = re.search(r'rename\s*=\s*"([^"]+)"', attrs)
        key = m.group(1) if m else f
        t = inner(ty)
        if 'flatten' in attrs and t:
            rows(t, prefix, seen, out)
            continue
        null = 'yes' if ty.startswith('Option<') else ''
        if 'skip_serializing_if' in attrs:
            null = (null + ', or absent').lstrip(', ') if null else 'absent when empty'
        path = prefix + key
        if not doc and key in KNOWN:
            doc = KNOWN[key][1]
        out.append(f'| `{path}` | `{ty}` | {unit(key)} | {null} | {doc} |')
        if t:
            nested.append((t, path + ('[]' if ty.startswith('Vec<') else '') + '.'))
    for t, p in nested:
        rows(t, p, seen, out)


out = []
rows('Report', '', set(), out)
print('# The JSON report\n')
print('Every field of `iopath trace --json` / `iopath run --json` (schema `iopath.report/1`), its type,')
print('its unit and when it is null, generated from the structs that write it (`scripts/gen-json-doc.py`).\n')
print('## Contents\n\n- [Fields](#fields)\n- [Conventions](#conventions)\n')
print('## Conventions\n')
print('Times are nanoseconds (`_ns`), sizes bytes. A field iopath could not measure is `null` or absent,')
print('never 0: a report says what it did not follow (`features_off`, `lost_events`) instead. Later')
print('versions add keys; existing keys keep their meaning. A type shown once is not repeated under')
print('every field that holds it.\n')
print('## Fields\n')
print('| key | type | unit | null | what |')
print('|---|---|---|---|---|')
print('\n'.join(out))
