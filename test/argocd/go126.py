#!/usr/bin/env python3
"""go126.py DIR: rewrite the Go 1.27 composite literals of Argo CD v3.6 under
DIR for Go 1.26. Go 1.27 lets a struct literal name the fields of an embedded
struct (corev1.Secret{Name: n}); Go 1.26 wants them spelt out
(corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n}}). Only literals of
Kubernetes objects (types embedding metav1.ObjectMeta / TypeMeta) whose keys
are all single-line are rewritten; anything else is left for the compiler to
report. Prints each rewrite."""
import os, re, sys

META = {'Name', 'GenerateName', 'Namespace', 'UID', 'ResourceVersion', 'Generation',
        'CreationTimestamp', 'DeletionTimestamp', 'Labels', 'Annotations',
        'OwnerReferences', 'Finalizers', 'ManagedFields'}
TYPE = {'Kind', 'APIVersion'}
OBJECTS = {'Secret', 'ConfigMap', 'Event', 'Application', 'AppProject', 'ApplicationSet',
           'Namespace', 'Pod', 'Service', 'Deployment', 'ServiceAccount', 'Role', 'RoleBinding',
           'ClusterRole', 'ClusterRoleBinding', 'Job', 'CronJob', 'Lease', 'Endpoints'}
OPEN = re.compile(r'(\b[a-zA-Z0-9]+\.)?([A-Z]\w*)\{$')
KEY = re.compile(r'(\s*)(\w+):\s')


def meta_alias(lines):
    """The file's name for metav1, importing it when it has none."""
    for l in lines:
        m = re.match(r'^\s*(\w+)?\s*"k8s.io/apimachinery/pkg/apis/meta/v1"$', l)
        if m:
            return m.group(1) or 'v1'
    for n, l in enumerate(lines):
        if l.startswith('import ('):
            lines.insert(n + 1, '\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"')
            return 'metav1'
    raise SystemExit('go126: no import block')


def entries(lines, i):
    """The first-level entries of the literal opened on line i: (key, lines), and
    the index of its closing line; None if an entry is not `Key: value,`."""
    out, j = [], i + 1
    while j < len(lines) and lines[j].strip() not in ('}', '},', '})', '}}'):
        k = KEY.match(lines[j])
        if not k:
            return None, j
        depth, block = 0, []
        while True:
            block.append(lines[j])
            depth += lines[j].count('{') - lines[j].count('}') + lines[j].count('(') - lines[j].count(')')
            j += 1
            if depth == 0:
                break
            if j >= len(lines):
                return None, j
        if not block[-1].rstrip().endswith(','):
            return None, j
        out.append((k.group(2), block))
    return out, j


def candidate(lines, i):
    m = OPEN.search(lines[i])
    es, j = entries(lines, i) if m and m.group(2) in OBJECTS else (None, i)
    names = {k for k, _ in es or []}
    if not es or not (names & (META | TYPE)) or names & {'ObjectMeta', 'TypeMeta'}:
        return None
    return m, es, j, names


def rewrite(path):
    lines = open(path).read().split('\n')
    if not any(candidate(lines, i) for i in range(len(lines))):
        return
    alias = meta_alias(lines)
    out, i = [], 0
    while i < len(lines):
        c = candidate(lines, i)
        if not c:
            out.append(lines[i])
            i += 1
            continue
        m, es, j, names = c
        ind = KEY.match(es[0][1][0]).group(1)
        out.append(lines[i])
        for group, fields in (('TypeMeta', TYPE), ('ObjectMeta', META)):
            mine = [l for k, b in es if k in fields for l in b]
            if mine:
                out.append(f'{ind}{group}: {alias}.{group}{{')
                out.extend('\t' + l for l in mine)
                out.append(f'{ind}}},')
        out.extend(l for k, b in es if k not in META | TYPE for l in b)
        print(f"go126: {os.path.relpath(path)}:{i+1}: {m.group(0)} {sorted(names & (META | TYPE))}")
        i = j
    open(path, 'w').write('\n'.join(out))


for root, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = [d for d in dirs if d not in ('test', 'hack', 'ui', 'docs', 'testdata', 'vendor')]
    for f in files:
        if f.endswith('.go') and not f.endswith('_test.go'):
            rewrite(os.path.join(root, f))
