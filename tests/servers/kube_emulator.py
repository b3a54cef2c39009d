#!/usr/bin/env python3
"""A Kubernetes API server emulator for lockwarden's end-to-end tests.

    python kube_emulator.py --port 0 [--token T] [--fixture FILE.yaml|FILE.json ...]

prints `listening on 127.0.0.1:PORT` when it accepts connections. Plain HTTP.

Built on kmock 0.8 (PyPI): kmock.KubernetesScaffold provides the aiohttp server
(kmock.Server) and the discovery documents (/, /version, /api, /apis,
/apis/G, /apis/G/V, from `self.resources`). kmock's own object store
(KubernetesEmulator) is NOT used: the rest is implemented here, because of these
kmock gaps, which this file fills:
  - lists carry no kind/apiVersion and a placeholder metadata.resourceVersion;
    objects get no uid, creationTimestamp or real resourceVersion, so no
    optimistic concurrency (PUT with a stale resourceVersion is not a 409);
  - core discovery says groupVersion "/v1", guesses kinds ("Pods"), and gives
    no verbs and `namespaced: null`;
  - PUT is not routed at all (404); PATCH is a naive dict merge whatever the
    Content-Type; GET /api/v1/namespaces crashes its path parser (500);
  - watches ignore resourceVersion and timeoutSeconds, never send BOOKMARKs;
  - no label/field selectors, no limit/continue pagination;
  - Secrets keep stringData as given; error Status bodies carry tracebacks;
  - no authentication and no fault injection.
What this emulator does: discovery for core v1 and every group/version of its
resources (built-in table below, plus kinds met in fixtures or control calls);
get, list (kind XList, limit/continue, labelSelector incl. set-based,
fieldSelector =,==,!=), watch (ADDED/MODIFIED/DELETED from a resourceVersion,
BOOKMARKs, sendInitialEvents, timeoutSeconds, ERROR 410 when too old), create
(409 AlreadyExists, generateName, dryRun), update (409 Conflict on a stale
resourceVersion; custom resources require one), patch (merge, JSON patch;
strategic merge treated as a merge patch), delete (finalizers ->
deletionTimestamp; preconditions), deletecollection, the status subresource,
a global monotonically increasing resourceVersion, Secrets' stringData folded
into data, core/v1 and events.k8s.io/v1 Events as two views of one store, and
kind: Status errors shaped like the API server's. Control endpoints under
/_emulator/ (never authenticated, never logged): see `_control`.
Remaining gaps (not emulated): TLS and client certificates, RBAC (only the
403s injected with /_emulator/forbid), admission (no defaulting beyond the
few fields above, no webhooks, no quota, no schema validation of objects),
server-side apply (415), Table output only as a Name/Age table, protobuf,
namespace lifecycle (API creates need the namespace, fixtures and control calls
create it; deleting one leaves its objects), garbage collection and ownerReferences, graceful pod deletion (pods go at
once), list consistency across continue pages (pages are cut from the
current state), resourceVersion/resourceVersionMatch on lists (always the
latest), aggregated discovery, multiple versions of one resource.
"""
import argparse
import asyncio
import base64
import binascii
import collections
import copy
import datetime
import json
import random
import re
import sys
import time
import traceback
import uuid

import aiohttp.web
import jsonpatch
import kmock

# (apiVersion, plural, kind, namespaced, has status subresource, custom resource, short names)
BUILTIN = [
    ('v1', 'pods', 'Pod', True, True, False, ['po']),
    ('v1', 'secrets', 'Secret', True, False, False, []),
    ('v1', 'configmaps', 'ConfigMap', True, False, False, ['cm']),
    ('v1', 'events', 'Event', True, False, False, ['ev']),
    ('v1', 'namespaces', 'Namespace', False, True, False, ['ns']),
    ('v1', 'nodes', 'Node', False, True, False, ['no']),
    ('events.k8s.io/v1', 'events', 'Event', True, False, False, ['ev']),
    ('coordination.k8s.io/v1', 'leases', 'Lease', True, False, False, []),
    ('velero.io/v1', 'backuprepositories', 'BackupRepository', True, True, True, []),
    ('velero.io/v1', 'backupstoragelocations', 'BackupStorageLocation', True, True, True, ['bsl']),
    ('stash.appscode.com/v1alpha1', 'repositories', 'Repository', True, True, True, ['repo']),
    ('storage.kubestash.com/v1alpha1', 'repositories', 'Repository', True, True, True, []),
    ('storage.kubestash.com/v1alpha1', 'backupstorages', 'BackupStorage', True, True, True, []),
    ('k8up.io/v1', 'schedules', 'Schedule', True, True, True, []),
    ('k8up.io/v1', 'backups', 'Backup', True, True, True, []),
    ('volsync.backube/v1alpha1', 'replicationsources', 'ReplicationSource', True, True, True, []),
    ('volsync.backube/v1alpha1', 'replicationdestinations', 'ReplicationDestination', True, True, True, []),
]
VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']
# core/v1 Event field <-> events.k8s.io/v1 Event field (the others keep their names).
EVENT_FIELDS = [('involvedObject', 'regarding'), ('message', 'note'),
                ('reportingComponent', 'reportingController'), ('source', 'deprecatedSource'),
                ('firstTimestamp', 'deprecatedFirstTimestamp'), ('lastTimestamp', 'deprecatedLastTimestamp'),
                ('count', 'deprecatedCount')]
PATCH_TYPES = ['application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json']
NAME_RE = re.compile(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')
HISTORY = 10000  # watch events kept; older resourceVersions get 410 Gone


def now(micro=False):
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.strftime('%Y-%m-%dT%H:%M:%S.%fZ' if micro else '%Y-%m-%dT%H:%M:%SZ')


def age(stamp):
    try:
        t = datetime.datetime.strptime(stamp, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return '<unknown>'
    s = int((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())
    return f'{s}s' if s < 120 else f'{s // 60}m' if s < 7200 else f'{s // 3600}h' if s < 172800 else f'{s // 86400}d'


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details, self.headers = code, reason, message, details, headers

    def status(self):
        body = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure',
                'message': self.message, 'reason': self.reason, 'code': self.code}
        if self.details:
            body['details'] = self.details
        return body


def not_found_path():
    return ApiError(404, 'NotFound', 'the server could not find the requested resource', {})


class Res:
    """One served resource (group, version, plural) and how it is stored."""

    def __init__(self, api_version, plural, kind, namespaced, status, custom, short=()):
        self.api_version, self.plural, self.kind = api_version, plural, kind
        self.group, _, self.version = api_version.rpartition('/')
        self.namespaced, self.status, self.custom, self.short = namespaced, status, custom, list(short)
        self.storage = ('', 'v1', 'events') if self.group == 'events.k8s.io' else (self.group, self.version, plural)
        self.qualified = f'{plural}.{self.group}' if self.group else plural

    def details(self, name):
        d = {'name': name, 'kind': self.plural}
        if self.group:
            d['group'] = self.group
        return d

    def served(self, stored):
        obj = copy.deepcopy(stored)
        if self.group == 'events.k8s.io':
            for core, new in EVENT_FIELDS:
                if core in obj:
                    obj[new] = obj.pop(core)
        obj['apiVersion'], obj['kind'] = self.api_version, self.kind
        return obj

    def to_storage(self, obj):
        obj = copy.deepcopy(obj)
        if self.group == 'events.k8s.io':
            for core, new in EVENT_FIELDS:
                if new in obj:
                    obj[core] = obj.pop(new)
            obj['apiVersion'] = 'v1'
        else:
            obj['apiVersion'] = self.api_version
        obj['kind'] = self.kind
        return obj


def guess_plural(kind):
    k = kind.lower()
    if k.endswith(('s', 'x', 'ch', 'sh')):
        return k + 'es'
    if k.endswith('y') and k[-2:-1] not in 'aeiou':
        return k[:-1] + 'ies'
    return k + 's'


def split_terms(s):
    terms, depth, cur = [], 0, ''
    for c in s:
        depth += (c == '(') - (c == ')')
        if c == ',' and depth == 0:
            terms.append(cur)
            cur = ''
        else:
            cur += c
    terms.append(cur)
    return [t.strip() for t in terms if t.strip()]


def parse_label_selector(s):
    reqs = []
    for t in split_terms(s or ''):
        if m := re.fullmatch(r'([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)', t):
            reqs.append((m[1], m[2].replace('==', '='), {m[3]}))
        elif m := re.fullmatch(r'([\w./-]+)\s+(in|notin)\s*\(([^)]*)\)', t):
            reqs.append((m[1], m[2], {v.strip() for v in m[3].split(',') if v.strip()}))
        elif m := re.fullmatch(r'(!?)\s*([\w./-]+)', t):
            reqs.append((m[2], '!' if m[1] else 'exists', set()))
        else:
            raise ApiError(400, 'BadRequest', f'unable to parse requirement: {t!r}')
    return reqs


def labels_match(reqs, labels):
    for key, op, vals in reqs:
        v = labels.get(key)
        if (op == '=' and v not in vals) or (op == '!=' and v in vals) or (op == 'in' and v not in vals) \
                or (op == 'notin' and v in vals) or (op == 'exists' and v is None) or (op == '!' and v is not None):
            return False
    return True


def parse_field_selector(s, res):
    reqs = []
    for t in split_terms(s or ''):
        m = re.fullmatch(r'([\w.]+)\s*(==|=|!=)\s*(.*)', t)
        if not m:
            raise ApiError(400, 'BadRequest', f'invalid selector: {s!r}; can\'t understand {t!r}')
        if res.custom and m[1] not in ('metadata.name', 'metadata.namespace'):
            raise ApiError(400, 'BadRequest', f'field label not supported: {m[1]}')
        reqs.append((m[1].split('.'), m[2] != '!=', m[3]))
    return reqs


def fields_match(reqs, obj):
    for path, eq, want in reqs:
        v = obj
        for part in path:
            v = v.get(part) if isinstance(v, dict) else None
        v = '' if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        if (v == want) != eq:
            return False
    return True


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class Emulator(kmock.KubernetesScaffold):
    def __init__(self, token=None, bookmark_interval=10.0):
        super().__init__()
        self.token, self.bookmark_interval = token, bookmark_interval
        self.by_path, self.by_kind = {}, {}  # (group, version, plural) / (apiVersion, kind) -> Res
        self.store = collections.defaultdict(dict)  # storage key -> {(ns, name): stored object}
        self.history = collections.deque(maxlen=HISTORY)  # (rv, storage, type, obj, previous)
        self.floor = 0  # watches/continues from below this resourceVersion are 410 Gone
        self.rv = 0
        self.watchers = collections.defaultdict(set)  # storage key -> {asyncio.Queue}
        self.rules, self.log, self.fixtures = [], [], []
        for row in BUILTIN:
            self.register(Res(*row))

    # --- resources and discovery (kmock's scaffold serves /api, /apis, /apis/G from self.resources)
    def register(self, res):
        self.by_path[(res.group, res.version, res.plural)] = res
        self.by_kind.setdefault((res.api_version, res.kind), res)
        self.resources[kmock.resource(res.group, res.version, res.plural)] = kmock.ResourceInfo(
            kind=res.kind, namespaced=res.namespaced, singular=res.kind.lower(), verbs=VERBS,
            shortnames=res.short, subresources=['status'] if res.status else [])
        return res

    def res_for(self, obj, plural=None):
        api_version, kind = obj.get('apiVersion', ''), obj.get('kind', '')
        if plural:
            group, _, version = api_version.rpartition('/')
            res = self.by_path.get((group, version, plural))
            if res:
                return res
        if (api_version, kind) in self.by_kind:
            return self.by_kind[(api_version, kind)]
        if not api_version or not kind:
            raise ApiError(400, 'BadRequest', 'Object \'Kind\' or \'apiVersion\' is missing')
        namespaced = bool((obj.get('metadata') or {}).get('namespace'))
        group = api_version.rpartition('/')[0]
        return self.register(Res(api_version, plural or guess_plural(kind), kind, namespaced,
                                 True, group not in ('', 'events.k8s.io', 'coordination.k8s.io')))

    async def _serve_version(self, request):
        doc = await super()._serve_version(request)
        group, version = request.resource.group, request.resource.version
        if group == '' and version != 'v1':
            raise not_found_path()
        doc['groupVersion'] = f'{group}/{version}' if group else version
        for r in doc['resources']:
            r['verbs'] = sorted(r['verbs'])
            r['shortNames'] = sorted(r['shortNames'])
            if '/' in r['name']:
                r['verbs'], r['shortNames'], r['singularName'] = ['get', 'patch', 'update'], [], ''
        doc['resources'].sort(key=lambda r: r['name'])
        return doc

    async def _render_error(self, exc):
        err = exc if isinstance(exc, ApiError) else not_found_path() \
            if isinstance(exc, (kmock.KubernetesError, NotImplementedError)) else \
            ApiError(500, 'InternalError', f'Internal error occurred: {exc!r}')
        return aiohttp.web.json_response(err.status(), status=err.code, headers=err.headers)

    # --- the entry point
    async def __call__(self, raw):
        if raw.path.startswith('/_emulator/'):
            try:
                return await self._control(raw)
            except ApiError as e:
                return await self._render_error(e)
            except Exception as e:
                return await self._render_error(ApiError(400, 'BadRequest', f'bad control request: {e!r}'))
        entry = {'method': raw.method, 'path': raw.path, 'query': raw.query_string,
                 'authorization': 'yes' if raw.headers.get('Authorization') else 'no',
                 'user_agent': raw.headers.get('User-Agent', ''), 'status': None}
        self.log.append(entry)
        try:
            auth = raw.headers.get('Authorization', '')
            if self.token and auth != f'Bearer {self.token}' and raw.path not in ('/version', '/healthz', '/livez', '/readyz'):
                raise ApiError(401, 'Unauthorized', 'Unauthorized')
            parsed = self._parse_path(raw.path)
            if parsed is None:
                if raw.path in ('/healthz', '/livez', '/readyz'):
                    response = aiohttp.web.Response(text='ok')
                else:  # discovery and unknown paths: kmock's scaffold
                    response = await super().__call__(raw)
            else:
                response = await self._serve(raw, *parsed)
        except ApiError as e:
            response = await self._render_error(e)
        except Exception as e:
            traceback.print_exc()
            response = await self._render_error(e)
        entry['status'] = response.status
        return response

    def _parse_path(self, path):
        parts = [p for p in path.split('/') if p]
        if len(parts) >= 3 and parts[0] == 'api':
            group, version, rest = '', parts[1], parts[2:]
        elif len(parts) >= 4 and parts[0] == 'apis':
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        watch = bool(rest) and rest[0] == 'watch'
        rest = rest[1:] if watch else rest
        namespace = None
        if len(rest) >= 3 and rest[0] == 'namespaces' and (group, version, rest[2]) in self.by_path:
            namespace, rest = rest[1], rest[2:]
        if not rest or (group, version, rest[0]) not in self.by_path:
            raise not_found_path()
        res = self.by_path[(group, version, rest[0])]
        name = rest[1] if len(rest) > 1 else None
        sub = '/'.join(rest[2:]) or None
        if (namespace and not res.namespaced) or (sub and not (sub == 'status' and res.status)):
            raise not_found_path()
        return res, namespace, name, sub, watch

    async def _serve(self, raw, res, namespace, name, sub, watch_path):
        q = raw.query
        method = raw.method
        watch = watch_path or (method == 'GET' and q.get('watch', '').lower() in ('1', 'true'))
        verb = {('GET', True): 'watch', ('GET', False): 'get' if name else 'list', ('POST', False): 'create',
                ('PUT', False): 'update', ('PATCH', False): 'patch',
                ('DELETE', False): 'delete' if name else 'deletecollection'}.get((method, watch))
        if verb is None or (name is None and verb in ('update', 'patch')) or (name and verb == 'create'):
            raise ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource')
        self._check_rules(raw, verb, res, namespace, name)
        body = None
        if verb in ('create', 'update', 'patch', 'delete', 'deletecollection'):
            text = await raw.text()
            ctype = raw.headers.get('Content-Type', 'application/json').split(';')[0].strip()
            accepted = PATCH_TYPES if verb == 'patch' else ['application/json']
            if ctype not in accepted and (text.strip() or verb != 'delete'):
                raise ApiError(415, 'UnsupportedMediaType', 'the body of the request was in an unknown format - accepted '
                               f'media types include: {", ".join(accepted)} (this emulator reads JSON only: no protobuf, '
                               'no YAML, no server-side apply)')
            try:
                body = json.loads(text) if text.strip() else None
            except ValueError as e:
                raise ApiError(400, 'BadRequest', f'the body of the request could not be decoded: {e}')
            if verb in ('create', 'update') and not isinstance(body, dict):
                raise ApiError(400, 'BadRequest', 'the body of the request must be a JSON object')
        dry = q.get('dryRun') == 'All'
        if verb == 'watch':
            return await self._watch(raw, res, namespace, name)
        if verb == 'list':
            return self._list(raw, res, namespace)
        if verb == 'get':
            return aiohttp.web.json_response(res.served(self._get(res, namespace, name)))
        if verb == 'create':
            return aiohttp.web.json_response(self._create(res, namespace, body, dry), status=201)
        if verb == 'update':
            return aiohttp.web.json_response(self._update(res, namespace, name, sub, body, dry))
        if verb == 'patch':
            return aiohttp.web.json_response(self._patch(res, namespace, name, sub, body, ctype, dry))
        if verb == 'delete':
            return aiohttp.web.json_response(self._delete(res, namespace, name, body or {}, dry))
        items = self._select(res, namespace, q)
        deleted = [self._delete(res, o['metadata'].get('namespace'), o['metadata']['name'], body or {}, dry, True)
                   for o in items]
        return aiohttp.web.json_response({'kind': f'{res.kind}List', 'apiVersion': res.api_version,
                                          'metadata': {'resourceVersion': str(self.rv)}, 'items': deleted})

    def _check_rules(self, raw, verb, res, namespace, name):
        for rule in list(self.rules):
            if all(rule.get(k) in (None, '*', v) for k, v in
                   (('verb', verb), ('resource', res.plural), ('group', res.group),
                    ('namespace', namespace), ('name', name))):
                if rule.get('times') is not None:
                    rule['times'] -= 1
                    if rule['times'] <= 0:
                        self.rules.remove(rule)
                code = int(rule.get('code', 403))
                details = res.details(name)
                if not name:
                    del details['name']
                if code == 403:
                    user = rule.get('user', 'system:serviceaccount:lockwarden:lockwarden')
                    subject = f'{res.qualified} "{name}"' if name else res.qualified
                    where = f'in the namespace "{namespace}"' if namespace else 'at the cluster scope'
                    raise ApiError(403, 'Forbidden', rule.get('message') or (
                        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{res.plural}" '
                        f'in API group "{res.group}" {where}'), details)
                headers = {'Retry-After': str(rule['retryAfter'])} if 'retryAfter' in rule else None
                raise ApiError(code, rule.get('reason', 'InternalError'),
                               rule.get('message', f'injected failure ({code})'), details, headers)

    # --- the store
    def _bump(self, storage, kind, obj, prev=None):
        self.rv += 1
        obj['metadata']['resourceVersion'] = str(self.rv)
        snap = copy.deepcopy(obj)
        self.history.append((self.rv, storage, kind, snap, prev))
        for queue in self.watchers[storage]:
            queue.put_nowait((self.rv, kind, snap, prev))

    def _get(self, res, namespace, name):
        obj = self.store[res.storage].get((namespace or '', name))
        if obj is None:
            raise ApiError(404, 'NotFound', f'{res.qualified} "{name}" not found', res.details(name))
        return obj

    def _select(self, res, namespace, q):
        labels = parse_label_selector(q.get('labelSelector'))
        fields = parse_field_selector(q.get('fieldSelector'), res)
        out = []
        for (ns, _), stored in sorted(self.store[res.storage].items()):
            if namespace and ns != namespace:
                continue
            obj = res.served(stored)
            if labels_match(labels, obj['metadata'].get('labels') or {}) and fields_match(fields, obj):
                out.append(obj)
        return out

    def _list(self, raw, res, namespace):
        q = raw.query
        items = self._select(res, namespace, q)
        list_rv = self.rv
        if q.get('continue'):
            try:
                token = json.loads(base64.urlsafe_b64decode(q['continue'].encode()))
                start, list_rv = tuple(token['start']), int(token['rv'])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, 'BadRequest', 'continue key is not valid: incorrect encoded start resourceVersion')
            if list_rv < self.floor:
                raise ApiError(410, 'Expired', 'The provided continue parameter is too old to display a consistent '
                               'list result. You can start a new list without the continue parameter.')
            items = [o for o in items if (o['metadata'].get('namespace', ''), o['metadata']['name']) > start]
        meta = {'resourceVersion': str(list_rv)}
        limit = int(q.get('limit') or 0)
        if 0 < limit < len(items):
            last = items[limit - 1]['metadata']
            meta['continue'] = base64.urlsafe_b64encode(json.dumps(
                {'rv': list_rv, 'start': [last.get('namespace', ''), last['name']]}).encode()).decode()
            meta['remainingItemCount'] = len(items) - limit
            items = items[:limit]
        if 'as=Table' in raw.headers.get('Accept', ''):
            return aiohttp.web.json_response({
                'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1', 'metadata': meta,
                'columnDefinitions': [{'name': 'Name', 'type': 'string', 'format': 'name', 'description': 'Name', 'priority': 0},
                                      {'name': 'Age', 'type': 'date', 'format': '', 'description': 'Age', 'priority': 0}],
                'rows': [{'cells': [o['metadata']['name'], age(o['metadata'].get('creationTimestamp'))],
                          'object': {'kind': 'PartialObjectMetadata', 'apiVersion': 'meta.k8s.io/v1',
                                     'metadata': o['metadata']}} for o in items]})
        return aiohttp.web.json_response({'kind': f'{res.kind}List', 'apiVersion': res.api_version,
                                          'metadata': meta, 'items': items})

    def _invalid(self, res, name, causes):
        what = f'{res.kind}.{res.group}' if res.group else res.kind
        msg = f'{what} "{name}" is invalid: ' + ', '.join(f'{f}: {m}' for f, m in causes)
        details = dict(res.details(name), kind=res.kind,
                       causes=[{'reason': 'FieldValueInvalid', 'message': m, 'field': f} for f, m in causes])
        return ApiError(422, 'Invalid', msg, details)

    def _normalize(self, res, obj, old=None, validate=True):
        """Type-specific defaulting and validation of an object being written."""
        meta = obj['metadata']
        if res.kind == 'Secret' and res.group == '':
            data = obj.get('data') or {}
            for k, v in (obj.pop('stringData', None) or {}).items():
                data[k] = base64.b64encode(str(v).encode()).decode()
            for k, v in data.items():
                try:
                    base64.b64decode(v, validate=True)
                except (binascii.Error, TypeError):
                    raise ApiError(400, 'BadRequest', f'Secret in version "v1" cannot be handled as a Secret: '
                                   f'illegal base64 data in data[{k!r}]')
            if data:
                obj['data'] = data
            obj.setdefault('type', 'Opaque')
            if old and old.get('immutable') and (old.get('data') != obj.get('data') or not obj.get('immutable')):
                raise self._invalid(res, meta['name'], [('data', 'Forbidden: field is immutable when `immutable` is set')])
        if validate and res.kind == 'Event' and res.group in ('', 'events.k8s.io'):
            causes = []
            regarding = obj.get('regarding' if res.group else 'involvedObject') or {}
            if regarding.get('namespace') and regarding['namespace'] != meta.get('namespace'):
                causes.append(('regarding.namespace' if res.group else 'involvedObject.namespace',
                               'Invalid value: does not match event.namespace'))
            if res.group:
                for f in ('eventTime', 'reportingController', 'reportingInstance', 'action', 'reason'):
                    if not obj.get(f):
                        causes.append((f, 'Required value'))
                if obj.get('type') not in ('Normal', 'Warning'):
                    causes.append(('type', f'Unsupported value: {obj.get("type")!r}: supported values: "Normal", "Warning"'))
                if len(obj.get('note') or '') > 1024:
                    causes.append(('note', 'Too long: may not be longer than 1024'))
            if causes:
                raise self._invalid(res, meta['name'], causes)

    def _create(self, res, namespace, body, dry=False, control=False):
        obj = copy.deepcopy(body)
        if obj.get('apiVersion', res.api_version) != res.api_version or obj.get('kind', res.kind) != res.kind:
            raise ApiError(400, 'BadRequest', f'the API version in the data ({obj.get("apiVersion")}) or kind '
                           f'({obj.get("kind")}) does not match the expected {res.api_version} {res.kind}')
        meta = obj.setdefault('metadata', {})
        if not isinstance(meta, dict):
            raise ApiError(400, 'BadRequest', 'metadata must be an object')
        if res.namespaced:
            if not namespace and not meta.get('namespace'):
                if not control:
                    raise ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource')
                meta['namespace'] = 'default'
            if namespace and meta.get('namespace', namespace) != namespace:
                raise ApiError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request')
            meta['namespace'] = namespace or meta['namespace']
        else:
            meta.pop('namespace', None)
        if not meta.get('name') and meta.get('generateName'):
            meta['name'] = meta['generateName'] + ''.join(random.choices('bcdfghjklmnpqrstvwxz2456789', k=5))
        name = meta.get('name') or ''
        if not name:
            raise self._invalid(res, '', [('metadata.name', 'Required value: name or generateName is required')])
        if not control and (len(name) > 253 or not NAME_RE.fullmatch(name)):
            raise self._invalid(res, name, [('metadata.name', f'Invalid value: "{name}": a lowercase RFC 1123 subdomain '
                                             'must consist of lower case alphanumeric characters, \'-\' or \'.\'')])
        key = (meta.get('namespace', ''), name)
        if res.namespaced and ('', key[0]) not in self.store[('', 'v1', 'namespaces')]:
            if not control:
                raise ApiError(404, 'NotFound', f'namespaces "{key[0]}" not found', {'name': key[0], 'kind': 'namespaces'})
            self._create(self.by_path[('', 'v1', 'namespaces')], None, {'metadata': {'name': key[0]}}, control=True)
        if key in self.store[res.storage]:
            raise ApiError(409, 'AlreadyExists', f'{res.qualified} "{name}" already exists', res.details(name))
        self._normalize(res, obj, validate=not control)
        for k in ('resourceVersion', 'deletionTimestamp', 'deletionGracePeriodSeconds') if not control else ('resourceVersion',):
            meta.pop(k, None)
        meta['uid'] = meta.get('uid') if control and meta.get('uid') else str(uuid.uuid4())
        meta['creationTimestamp'] = meta.get('creationTimestamp') if control and meta.get('creationTimestamp') else now()
        if res.custom:
            meta['generation'] = 1
        if res.status and not control:
            obj.pop('status', None)
            if res.kind == 'Pod':
                obj['status'] = {'phase': 'Pending'}
        if res.kind == 'Namespace' and res.group == '':
            obj.setdefault('spec', {'finalizers': ['kubernetes']})
            obj.setdefault('status', {'phase': 'Active'})
            meta.setdefault('labels', {})['kubernetes.io/metadata.name'] = name
        stored = res.to_storage(obj)
        if dry:
            stored['metadata']['resourceVersion'] = str(self.rv)
            return res.served(stored)
        self.store[res.storage][key] = stored
        self._bump(res.storage, 'ADDED', stored)
        return res.served(stored)

    def _write(self, res, namespace, name, sub, new, dry):
        """Replaces the stored object with `new` (served form) after the update checks."""
        old = self._get(res, namespace, name)
        meta = new.get('metadata')
        if not isinstance(meta, dict) or meta.get('name', name) != name:
            raise ApiError(400, 'BadRequest', f'the name of the object ({(meta or {}).get("name")}) does not match the name on the URL ({name})')
        if res.namespaced and meta.get('namespace', namespace) != namespace:
            raise ApiError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request')
        if meta.get('resourceVersion') not in (None, '', old['metadata']['resourceVersion']):
            raise ApiError(409, 'Conflict', f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has '
                           'been modified; please apply your changes to the latest version and try again', res.details(name))
        served_old = res.served(old)
        if sub == 'status':
            new = dict(served_old, status=new.get('status'))
        elif res.status:
            new = dict(new)
            if 'status' in served_old:
                new['status'] = served_old['status']
            else:
                new.pop('status', None)
        meta = new['metadata'] = dict(new['metadata'])
        meta['name'] = name
        if res.namespaced:
            meta['namespace'] = namespace
        for k in ('uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation'):
            if k in served_old['metadata']:
                meta[k] = served_old['metadata'][k]
            else:
                meta.pop(k, None)
        self._normalize(res, new, served_old)
        if served_old['metadata'].get('deletionTimestamp') and \
                set(meta.get('finalizers') or []) - set(served_old['metadata'].get('finalizers') or []):
            raise self._invalid(res, name, [('metadata.finalizers', 'Forbidden: no new finalizers can be added if the object is being deleted')])
        strip = lambda o: {k: v for k, v in o.items() if k not in ('metadata', 'status')}
        if res.custom and strip(new) != strip(served_old):
            meta['generation'] = served_old['metadata'].get('generation', 1) + 1
        meta['resourceVersion'] = old['metadata']['resourceVersion']
        stored = res.to_storage(new)
        if stored == old or dry:
            return res.served(stored)
        key = (namespace or '', name)
        if meta.get('deletionTimestamp') and not meta.get('finalizers'):
            del self.store[res.storage][key]
            self._bump(res.storage, 'DELETED', stored)
        else:
            self.store[res.storage][key] = stored
            self._bump(res.storage, 'MODIFIED', stored, old)
        return res.served(stored)

    def _update(self, res, namespace, name, sub, body, dry):
        self._get(res, namespace, name)  # 404 before any 400 or 422
        if body.get('apiVersion', res.api_version) != res.api_version or body.get('kind', res.kind) != res.kind:
            raise ApiError(400, 'BadRequest', f'the API version or kind in the data does not match {res.api_version} {res.kind}')
        if res.custom and not (body.get('metadata') or {}).get('resourceVersion'):
            raise self._invalid(res, name, [('metadata.resourceVersion', 'Invalid value: 0x0: must be specified for an update')])
        return self._write(res, namespace, name, sub, body, dry)

    def _patch(self, res, namespace, name, sub, body, ctype, dry):
        served = res.served(self._get(res, namespace, name))
        if ctype == 'application/json-patch+json':
            try:
                new = jsonpatch.apply_patch(served, body or [])
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as e:
                raise ApiError(422, 'Invalid', f'the server rejected our request due to an error in our request: {e}')
        else:  # merge patch; strategic merge patch approximated by it (lists replaced, no $patch directives)
            new = merge_patch(served, body if body is not None else {})
        if not isinstance(new, dict):
            raise ApiError(400, 'BadRequest', 'the patched object is not an object')
        return self._write(res, namespace, name, sub, new, dry)

    def _delete(self, res, namespace, name, options, dry, as_object=False):
        old = self._get(res, namespace, name)
        meta = old['metadata']
        pre = options.get('preconditions') or {}
        for field, key in (('uid', 'UID'), ('resourceVersion', 'ResourceVersion')):
            if pre.get(field) and pre[field] != meta.get(field):
                raise ApiError(409, 'Conflict', f'Operation cannot be fulfilled on {res.qualified} "{name}": Precondition '
                               f'failed: {key} in precondition: {pre[field]}, {key} in object meta: {meta.get(field)}',
                               res.details(name))
        if dry:
            return res.served(old)
        key = (namespace or '', name)
        if meta.get('finalizers'):
            if not meta.get('deletionTimestamp'):
                new = copy.deepcopy(old)
                new['metadata'].update(deletionTimestamp=now(), deletionGracePeriodSeconds=0)
                self.store[res.storage][key] = new
                self._bump(res.storage, 'MODIFIED', new, old)
            return res.served(self.store[res.storage][key])
        del self.store[res.storage][key]
        gone = copy.deepcopy(old)
        self._bump(res.storage, 'DELETED', gone)
        if res.custom or res.kind == 'Pod' or as_object:
            return res.served(gone)
        return {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Success',
                'details': dict(res.details(name), uid=meta.get('uid'))}

    # --- watch
    async def _watch(self, raw, res, namespace, name):
        q = raw.query
        labels = parse_label_selector(q.get('labelSelector'))
        fields = parse_field_selector(q.get('fieldSelector'), res)
        if name:
            fields.append((['metadata', 'name'], True, name))
        timeout = float(q.get('timeoutSeconds') or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = q.get('allowWatchBookmarks', '').lower() in ('1', 'true')
        rv_param = q.get('resourceVersion', '')
        initial = q.get('sendInitialEvents', '').lower() in ('1', 'true')

        def visible(obj):
            if obj is None or (namespace and obj['metadata'].get('namespace') != namespace):
                return None
            served = res.served(obj)
            return served if labels_match(labels, served['metadata'].get('labels') or {}) and fields_match(fields, served) else None

        def translate(kind, obj, prev):
            cur, was = visible(obj), visible(prev) if kind == 'MODIFIED' else None
            if kind == 'MODIFIED' and cur is None and was is not None:
                return {'type': 'DELETED', 'object': res.served(obj)}
            if kind == 'MODIFIED' and cur is not None and was is None and prev is not None:
                return {'type': 'ADDED', 'object': cur}
            return {'type': kind, 'object': cur} if cur is not None else None

        if rv_param not in ('', '0') and not initial and not rv_param.isdigit():
            raise ApiError(400, 'BadRequest', f'resourceVersion: Invalid value: "{rv_param}": must be an integer')
        response = aiohttp.web.StreamResponse(headers={'Content-Type': 'application/json'})
        response.enable_chunked_encoding()
        await response.prepare(raw)
        queue = asyncio.Queue()
        self.watchers[res.storage].add(queue)
        try:
            events, last = [], self.rv
            if rv_param in ('', '0') or initial:
                for stored in sorted(self.store[res.storage].values(), key=lambda o: int(o['metadata']['resourceVersion'])):
                    if (cur := visible(stored)) is not None:
                        events.append({'type': 'ADDED', 'object': cur})
                if initial and bookmarks:
                    events.append({'type': 'BOOKMARK', 'object': {'kind': res.kind, 'apiVersion': res.api_version, 'metadata': {
                        'resourceVersion': str(last), 'annotations': {'k8s.io/initial-events-end': 'true'}}}})
            else:
                since = int(rv_param)
                if since < self.floor or (self.history and since < self.history[0][0] - 1 and len(self.history) == HISTORY):
                    events.append({'type': 'ERROR', 'object': ApiError(
                        410, 'Expired', f'too old resource version: {since} ({self.floor})').status()})
                else:
                    for rv, storage, kind, obj, prev in self.history:
                        if rv > since and storage == res.storage and (ev := translate(kind, obj, prev)):
                            events.append(ev)
            for ev in events:
                await response.write(json.dumps(ev).encode() + b'\n')
            if events and events[-1]['type'] == 'ERROR':
                return response
            idle = time.monotonic()
            while (left := deadline - time.monotonic()) > 0:
                if raw.transport is None or raw.transport.is_closing():
                    return response
                try:
                    rv, kind, obj, prev = await asyncio.wait_for(queue.get(), timeout=min(left, 1.0))
                except asyncio.TimeoutError:
                    if bookmarks and time.monotonic() - idle >= self.bookmark_interval:
                        idle = time.monotonic()
                        await response.write(json.dumps({'type': 'BOOKMARK', 'object': {
                            'kind': res.kind, 'apiVersion': res.api_version,
                            'metadata': {'resourceVersion': str(self.rv)}}}).encode() + b'\n')
                    continue
                if kind == 'CLOSE':
                    break
                if rv > last and (ev := translate(kind, obj, prev)):
                    await response.write(json.dumps(ev).encode() + b'\n')
            await response.write_eof()
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            pass
        finally:
            self.watchers[res.storage].discard(queue)
        return response

    # --- fixtures and control
    def upsert(self, obj):
        """Creates or replaces an object as given (status kept), as a test's setup would."""
        res = self.res_for(obj)
        meta = obj.get('metadata') or {}
        ns = meta.get('namespace') or ('default' if res.namespaced else None)
        key = (ns or '', meta.get('name'))
        if key in self.store[res.storage]:
            old = self.store[res.storage][key]
            new = res.to_storage(obj)
            new['metadata'] = dict(new['metadata'], uid=old['metadata']['uid'],
                                   creationTimestamp=old['metadata']['creationTimestamp'], resourceVersion=None)
            if ns:
                new['metadata']['namespace'] = ns
            self._normalize(res, new, validate=False)
            self.store[res.storage][key] = new
            self._bump(res.storage, 'MODIFIED', new, old)
            return res.served(new)
        return self._create(res, ns, obj, control=True)

    def load_objects(self, doc):
        if doc is None:
            return []
        if isinstance(doc, list):
            return [o for d in doc for o in self.load_objects(d)]
        if isinstance(doc, dict) and doc.get('kind', '').endswith('List') and 'items' in doc:
            return self.load_objects(doc['items'])
        if not isinstance(doc, dict):
            raise ApiError(400, 'BadRequest', f'not an object: {doc!r}')
        return [self.upsert(doc)]

    def reset(self):
        before = self.rv
        for queues in self.watchers.values():
            for queue in queues:
                queue.put_nowait((0, 'CLOSE', None, None))
        self.store.clear()
        self.rules.clear()
        self.log.clear()
        self.history.clear()
        for ns in ('default', 'kube-system'):
            self.upsert({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': ns}})
        for doc in self.fixtures:
            self.load_objects(copy.deepcopy(doc))
        self.floor = before + 1

    async def _control(self, raw):
        """
        POST   /_emulator/forbid    {verb, resource, group?, namespace?, name?, times?, user?, message?} -> 403s
        POST   /_emulator/fail      the same plus {code, reason?, message?, retryAfter?} -> that error
        DELETE /_emulator/rules     drops the fault rules
        POST   /_emulator/reset     drops rules, the request log and all objects, reloads the fixtures
        POST   /_emulator/objects   an object, a list of them or a kind: List -> created or replaced as given
        DELETE /_emulator/objects?apiVersion=&kind=|resource=&namespace=&name=  -> deleted at once (finalizers ignored)
        GET    /_emulator/objects   every stored object
        POST   /_emulator/resources {apiVersion, kind, plural?, namespaced?, status?} -> served (like a CRD)
        GET    /_emulator/requests  the API requests so far: method, path, query, authorization yes/no, status
        DELETE /_emulator/requests  clears that log
        """
        what, method = raw.path[len('/_emulator/'):].strip('/'), raw.method
        text = await raw.text()
        try:
            body = json.loads(text) if text.strip() else {}
        except ValueError as e:
            raise ApiError(400, 'BadRequest', f'not JSON: {e}')
        if what in ('forbid', 'fail') and method == 'POST':
            rule = dict(body, code=403) if what == 'forbid' else dict(body)
            rule.setdefault('code', 500)
            self.rules.append(rule)
            return aiohttp.web.json_response({'rules': len(self.rules)})
        if what == 'rules' and method == 'DELETE':
            self.rules.clear()
            return aiohttp.web.json_response({'rules': 0})
        if what == 'reset' and method == 'POST':
            self.reset()
            return aiohttp.web.json_response({'resourceVersion': str(self.rv)})
        if what == 'objects' and method == 'POST':
            return aiohttp.web.json_response({'items': self.load_objects(body)})
        if what == 'objects' and method == 'GET':
            return aiohttp.web.json_response({'items': [self.by_kind[(o['apiVersion'], o['kind'])].served(o)
                                                        for objs in self.store.values() for o in objs.values()]})
        if what == 'objects' and method == 'DELETE':
            q = dict(raw.query, **body)
            res = self.res_for({'apiVersion': q.get('apiVersion', ''), 'kind': q.get('kind', '')}, q.get('resource'))
            ns = q.get('namespace') or ('default' if res.namespaced else '')
            old = self._get(res, ns, q.get('name'))
            del self.store[res.storage][(ns if res.namespaced else '', q.get('name'))]
            self._bump(res.storage, 'DELETED', copy.deepcopy(old))
            return aiohttp.web.json_response(res.served(old))
        if what == 'resources' and method == 'POST':
            res = self.register(Res(body['apiVersion'], body.get('plural') or guess_plural(body['kind']), body['kind'],
                                    body.get('namespaced', True), body.get('status', True), True))
            return aiohttp.web.json_response({'plural': res.plural})
        if what == 'requests' and method == 'GET':
            return aiohttp.web.json_response({'requests': self.log})
        if what == 'requests' and method == 'DELETE':
            self.log.clear()
            return aiohttp.web.json_response({'requests': []})
        raise ApiError(404, 'NotFound', f'no control endpoint {method} {raw.path}')


def read_fixture(path):
    with open(path, encoding='utf-8') as f:
        text = f.read()
    if path.endswith('.json'):
        return json.loads(text)
    import yaml  # PyYAML: pinned in requirements.txt (moto needs it; kmock does not)
    return list(yaml.safe_load_all(text))


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=0)
    parser.add_argument('--token', help='require Authorization: Bearer TOKEN (401 otherwise)')
    parser.add_argument('--fixture', action='append', default=[], help='YAML (multi-document) or .json objects')
    parser.add_argument('--bookmark-interval', type=float, default=10.0)
    args = parser.parse_args()
    emulator = Emulator(token=args.token, bookmark_interval=args.bookmark_interval)
    for path in args.fixture:
        emulator.fixtures.append(read_fixture(path))
    emulator.reset()
    async with emulator, kmock.Server(emulator, host=args.host, port=args.port or None) as server:
        print(f'listening on {server.host}:{server.port}', flush=True)
        await asyncio.Event().wait()


if __name__ == '__main__':
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
