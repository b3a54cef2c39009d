#!/usr/bin/env bash
# scripts/kube-tools.sh [--dir]
#   Builds kube-apiserver, etcd and helm for the end-to-end tests
#   (tests/src/kube_apiserver.rs): `scripts/go-tools.sh kube`, which says
#   where and how.
exec "$(dirname "$0")/go-tools.sh" kube "$@"
