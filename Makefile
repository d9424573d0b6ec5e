# etcd-operator Makefile. Every tool is pinned here and built into bin/ from
# the Go module proxy; nothing is downloaded as a prebuilt binary.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= ghcr.io/etcd-operator/etcd-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
# Channels of the bundle and the catalog (docs/olm.md): alpha gets every
# release; stable starts with the first release of the v1 API.
CHANNELS ?= alpha
DEFAULT_CHANNEL ?= alpha
# createdAt of the CSV is pinned to the release so `make bundle` is reproducible.
BUNDLE_CREATED_AT ?= 2026-11-29T00:00:00Z
# The Kubernetes version the bundle is validated against.
KUBE_TARGET_VERSION ?= 1.37

# Tool versions.
CONTROLLER_GEN_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
GOTESTSUM_VERSION ?= v1.13.0
OPERATOR_SDK_VERSION ?= v1.42.2
OPM_VERSION ?= v1.65.0
# The Operator Lifecycle Manager the local cluster can run (bin/olm-VERSION/).
OLM_VERSION ?= v0.38.0
# What the opm image has beside opm: catalog Pods' probes run it.
GRPC_HEALTH_PROBE_VERSION ?= v0.4.63
# The catalog image serves catalog/ with this opm.
OPM_IMAGE ?= quay.io/operator-framework/opm:$(OPM_VERSION)
KUBERNETES_VERSION ?= v1.37.2
# etcd for kube-apiserver and the tests; member images map to these.
ETCD_VERSION ?= v3.6.16
# The local cluster's S3 server (hack/localcluster/s3.yaml); its image
# versity/versitygw:$(VERSITYGW_VERSION) maps to bin/versitygw-$(VERSITYGW_VERSION).
VERSITYGW_VERSION ?= v1.8.0

# Every build is without cgo. The upstream releases are too, except opm's:
# its cgo links SQLite for the deprecated SQLite indexes, which nothing here
# uses (file-based catalogs need none; SQLite's C took 40 s of one core).
# No cgo anywhere also lets the Kubernetes build, cert-manager's, the
# tools', the manager's and the tests' share one build cache: cgo changes
# the standard library's net package, and with it every package above it.
export CGO_ENABLED ?= 0

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

LOCALBIN ?= $(CURDIR)/bin
GO ?= go
GOTEST_FLAGS ?= -count=1
# How many e2e tests run at once on the local cluster (test/e2e/main_test.go
# says which run alone); chosen by measurement on 2 cores (docs/testing.md).
E2E_PARALLEL ?= 6
# Where `make test` keeps the JSON of every test run, for `make test-report`.
TEST_LOGS ?= $(CURDIR)/.testlogs
BENCH_RUNS ?= 3

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
GOTESTSUM ?= $(LOCALBIN)/gotestsum-$(GOTESTSUM_VERSION)
OPERATOR_SDK ?= $(LOCALBIN)/operator-sdk-$(OPERATOR_SDK_VERSION)
OPM ?= $(LOCALBIN)/opm-$(OPM_VERSION)
KUBE_APISERVER ?= $(LOCALBIN)/kube-apiserver-$(KUBERNETES_VERSION)
KUBECTL ?= $(LOCALBIN)/kubectl-$(KUBERNETES_VERSION)
KUBE_CONTROLLER_MANAGER ?= $(LOCALBIN)/kube-controller-manager-$(KUBERNETES_VERSION)
KUBE_SCHEDULER ?= $(LOCALBIN)/kube-scheduler-$(KUBERNETES_VERSION)
CERT_MANAGER_VERSION ?= v1.21.2
CERT_MANAGER_CONTROLLER ?= $(LOCALBIN)/cert-manager-controller-$(CERT_MANAGER_VERSION)
# etcd versions member pods can run (image tag vX.Y.Z maps to bin/etcd-vX.Y.Z).
ETCD_MEMBER_VERSIONS ?= v3.6.16 v3.5.21 v3.5.12
LOCALCLUSTER ?= $(LOCALBIN)/localcluster
LOCALCLUSTER_STATE ?= $(CURDIR)/.localcluster
# Which of the machine's local-cluster networks it runs on (`localcluster
# up --network`): clusters on different networks run side by side.
LOCALCLUSTER_NETWORK ?= 0
# make test's second cluster, beside the first.
LOCALCLUSTER_1 = LOCALCLUSTER_STATE=$(CURDIR)/.localcluster-1 LOCALCLUSTER_NETWORK=1
# Five nodes: TestLostZone puts 5 members on nodes of their own and stops two.
LOCALCLUSTER_NODES ?= 5
ETCD ?= $(LOCALBIN)/etcd-$(ETCD_VERSION)
VERSITYGW ?= $(LOCALBIN)/versitygw-$(VERSITYGW_VERSION)
# envtest looks for binaries by their plain names in one directory.
ENVTEST_ASSETS ?= $(LOCALBIN)/envtest-$(KUBERNETES_VERSION)-etcd-$(ETCD_VERSION)

# Files generated from the sources; `make verify` fails when they drift.
GENERATED = go.mod go.sum api config bundle bundle.Dockerfile catalog catalog.Dockerfile

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) $(KUSTOMIZE) ## Generate CRDs and RBAC from the markers in api/ and controllers/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases
	@# Bounds controller-gen cannot express (config/crd/bounds/kustomization.yaml says why).
	{ echo ---; $(KUSTOMIZE) build --load-restrictor LoadRestrictionsNone config/crd/bounds; } > config/crd/bases/etcd.aenix.io_etcdclusters.yaml.tmp
	mv config/crd/bases/etcd.aenix.io_etcdclusters.yaml.tmp config/crd/bases/etcd.aenix.io_etcdclusters.yaml

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run go fmt.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run

# Suites that run on the local cluster; one package at a time (a fault in
# one must not hit another), after the other packages. Inside a package the
# tests that call t.Parallel() run E2E_PARALLEL at once.
CLUSTER_SUITES = ./test/localcluster/... ./test/e2e/...
CLUSTER_TEST_FLAGS = -p 1 -parallel $(E2E_PARALLEL) -timeout 60m $(GOTEST_FLAGS)
# test/olmlive subscribes to VERSION's catalog image and makes the next
# release with these tools.
OLM_LIVE_ENV = OLM_CATALOG_IMAGE=$(CATALOG_IMG) OPERATOR_SDK_BIN=$(OPERATOR_SDK) OPM_BIN=$(OPM)
# The tools only the OLM suites need (OLM's commands, operator-sdk, opm,
# grpc_health_probe). Two lanes of make test ask for them, so one builds
# them while the other waits on the lock.
olm-tools = flock $(LOCALBIN)/.olm-tools.lock $(MAKE) --no-print-directory -j1 olm-binaries $(OPERATOR_SDK) $(OPM)

.PHONY: test
test: manifests generate $(GOTESTSUM) ## Run the unit tests, the API server tests, the local cluster's suite, the e2e suite, the fault campaign's short seed and the real-OLM suite (needs root).
	rm -rf $(TEST_LOGS) && mkdir -p $(TEST_LOGS)
	$(MAKE) --no-print-directory -j3 test-cluster test-cluster-1 test-host

# `make test` runs three lanes at once. The local clusters' suites mostly
# wait on probes, timers and restarts (the e2e suite's serial part keeps
# about 10% of two cores busy), so two clusters, on two networks of the
# machine, run them side by side, and the host lane runs beside both.
# - test-cluster (network 0): the local cluster's suite, then the e2e
#   suite.
# - test-cluster-1 (network 1): the fault campaign's short seed, then
#   test/olmlive on a fresh cluster of its own (it installs the operator
#   and cert-manager another way, through OLM). Alone after the e2e suite
#   on one cluster, they took 504 s of a cold CI's 1626 s of tests.
# - test-host: first the unit, API server and cert-manager tests (niced, so
#   the cluster suites' compile gets the cores first; one cold run showed
#   no measurable gain: 185 s before the first cluster test, against 174 s
#   and 194 s before); then it builds the tools only the OLM suites need
#   (niced: the clusters keep the CPU they ask for) and runs test/olm.
#   (Built first, on a cold cache, the tools pushed the unit tests into
#   the e2e suite's parallel group, at a load average of 15.)
.PHONY: test-cluster
test-cluster: compile-cluster-tests localcluster-binaries $(KUSTOMIZE) $(GOTESTSUM)
	hack/with-localcluster.sh $(LOCALCLUSTER) $(LOCALCLUSTER_STATE) $(LOCALBIN) $(LOCALCLUSTER_NODES) $(LOCALCLUSTER_NETWORK) -- \
		$(GOTESTSUM) --format testname --jsonfile $(TEST_LOGS)/cluster.json -- $(CLUSTER_TEST_FLAGS) $(CLUSTER_SUITES)

.PHONY: test-cluster-1
test-cluster-1: compile-cluster-tests localcluster-binaries $(KUSTOMIZE) $(GOTESTSUM)
	$(MAKE) --no-print-directory $(LOCALCLUSTER_1) chaos SEED=1 STEPS=10
	$(olm-tools)
	$(MAKE) --no-print-directory $(LOCALCLUSTER_1) test-olm-live

# The suites' test binaries, compiled (and vetted) first on both cores (the
# runs' `-p 1` also compiles one package at a time): -exec true links each
# without running it, and the runs find them in the build cache. A compile
# error shows here, with the compiler's output.
compile-tests = mkdir -p $(TEST_LOGS) && $(GO) test -count=1 -exec true $(1) > $(TEST_LOGS)/compile.log || { cat $(TEST_LOGS)/compile.log; exit 1; }

.PHONY: compile-cluster-tests
compile-cluster-tests:
	$(call compile-tests,$(CLUSTER_SUITES) ./test/chaos ./test/olmlive)

.PHONY: test-host
test-host: $(ENVTEST_ASSETS) $(CERT_MANAGER_CONTROLLER) $(KUSTOMIZE) $(GOTESTSUM)
	mkdir -p $(TEST_LOGS)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) KUSTOMIZE_BIN=$(KUSTOMIZE) \
		nice -n 5 $(GOTESTSUM) --format pkgname --jsonfile $(TEST_LOGS)/unit.json -- $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v -e /test/localcluster -e /test/e2e -e '/test/chaos$$' -e /test/olm)
	cd hack/cert-manager && KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) CERT_MANAGER_CONTROLLER_BIN=$(CERT_MANAGER_CONTROLLER) \
		nice -n 5 $(GOTESTSUM) --format pkgname --jsonfile $(TEST_LOGS)/cert-manager.json -- $(GOTEST_FLAGS) ./...
	nice -n 10 $(olm-tools)
	OPERATOR_SDK_BIN=$(OPERATOR_SDK) OPM_BIN=$(OPM) KUSTOMIZE_BIN=$(KUSTOMIZE) \
		$(GOTESTSUM) --format pkgname --jsonfile $(TEST_LOGS)/olm.json -- $(GOTEST_FLAGS) ./test/olm/...

.PHONY: test-e2e
test-e2e: localcluster-binaries $(KUSTOMIZE) $(GOTESTSUM) ## Run the e2e suite on the local cluster (started, or reused when running).
	mkdir -p $(TEST_LOGS)
	$(call compile-tests,./test/e2e/...)
	hack/with-localcluster.sh $(LOCALCLUSTER) $(LOCALCLUSTER_STATE) $(LOCALBIN) $(LOCALCLUSTER_NODES) $(LOCALCLUSTER_NETWORK) -- \
		$(GOTESTSUM) --format testname --jsonfile $(TEST_LOGS)/e2e.json -- $(CLUSTER_TEST_FLAGS) ./test/e2e/...

# The fault campaign (test/chaos): `make test` runs its short fixed seed;
# this runs any seeds (SEED=7 or SEED=7,8,9: in turn, on one local
# cluster), longer.
SEED ?= 1
STEPS ?= 10

.PHONY: chaos
chaos: localcluster-binaries $(KUSTOMIZE) $(GOTESTSUM) ## Run the randomized fault campaign on the local cluster: make chaos SEED=7 STEPS=40 (or SEED=7,8,9).
	mkdir -p $(TEST_LOGS)
	hack/with-localcluster.sh $(LOCALCLUSTER) $(LOCALCLUSTER_STATE) $(LOCALBIN) $(LOCALCLUSTER_NODES) $(LOCALCLUSTER_NETWORK) -- \
		$(GOTESTSUM) --format testname --jsonfile $(TEST_LOGS)/chaos.json -- -count=1 -timeout 120m -v ./test/chaos -args -chaos.seed=$(SEED) -chaos.steps=$(STEPS)

.PHONY: test-tools
test-tools: $(KUSTOMIZE) $(GOTESTSUM) ## Build the tools every `make test` lane runs (CI builds them with the local cluster's binaries).

.PHONY: print-golangci-lint print-cert-manager
print-cert-manager:
	@echo $(CERT_MANAGER_CONTROLLER)
print-golangci-lint:
	@echo $(GOLANGCI_LINT)

.PHONY: test-report
test-report: ## The ten slowest tests of the last `make test`, each timed from when it got its slot to run.
	@$(GO) run ./hack/slowest -n 10 $(TEST_LOGS)/*.json

.PHONY: bench
bench: localcluster-binaries $(KUSTOMIZE) ## Measure bootstrap, scaling, recovery and roll times, the operator at rest and with many clusters (medians of BENCH_RUNS runs).
	hack/with-localcluster.sh $(LOCALCLUSTER) $(LOCALCLUSTER_STATE) $(LOCALBIN) $(LOCALCLUSTER_NODES) $(LOCALCLUSTER_NETWORK) -- \
		$(GO) run ./hack/bench --runs $(BENCH_RUNS) $(BENCH_FLAGS)

.PHONY: verify
verify: manifests generate bundle catalog ## Fail when generated files differ from what the sources produce (catalog/ is validated by opm and our graph lint).
	$(GO) mod tidy
	@for pair in "examples/simple.yaml config/samples/etcd_v1alpha1_etcdcluster.yaml" \
	             "examples/persistent-storage.yaml config/samples/etcd_v1alpha1_etcdcluster_persistent.yaml" \
	             "examples/tenants/tenant-a.yaml config/samples/etcd_v1alpha1_etcdtenant.yaml" \
	             "examples/backups/backup-s3.yaml config/samples/etcd_v1alpha1_etcdbackup.yaml"; do \
		set -- $$pair; cmp -s $$1 $$2 || { echo "$$2 must be a copy of $$1"; exit 1; }; \
	done
	@if ! git diff --quiet -- $(GENERATED) || [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED))" ]; then \
		echo "Generated files are out of date; run 'make verify' and commit the result:"; \
		git status --porcelain -- $(GENERATED); \
		git --no-pager diff -- $(GENERATED) | head -100; \
		exit 1; \
	fi

##@ Build

.PHONY: build binaries
build: generate fmt vet ## Build the manager binary into bin/manager and the kubectl etcd plugin into bin/kubectl-etcd.
	$(MAKE) --no-print-directory binaries

# The same, without generating first: what the local cluster runs is built
# this way, so that `make test`'s lanes, which build it each, never rewrite
# a source file another lane is compiling.
binaries:
	CGO_ENABLED=0 $(GO) build -o $(LOCALBIN)/manager ./cmd
	CGO_ENABLED=0 $(GO) build -o $(LOCALBIN)/kubectl-etcd ./cmd/kubectl-etcd

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster in $KUBECONFIG.
	$(GO) run ./cmd

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine, which these machines lack).
	docker build -t $(IMG) .

.PHONY: install
install: manifests $(KUSTOMIZE) $(KUBECTL) ## Install the CRDs into the cluster in $KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) $(KUBECTL) ## Deploy the operator from config/default to the cluster in $KUBECONFIG.
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

##@ Packaging

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Generate the OLM bundle from config/.
	$(OPERATOR_SDK) generate kustomize manifests -q
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
	hack/pin-created-at.sh bundle/manifests/etcd-operator.clusterserviceversion.yaml $(BUNDLE_CREATED_AT)
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework --optional-values=k8s-version=$(KUBE_TARGET_VERSION)

# The catalog is rendered from bundle/ offline (no image is pulled) and
# points at BUNDLE_IMG. Adding a VERSION that is already there only
# refreshes its rendering, so running this twice gives no diff.
.PHONY: catalog
catalog: bundle $(OPM) ## Add VERSION's bundle to the file-based catalog in catalog/ (new channel head), validate it and lint its upgrade graph.
	$(GO) run ./hack/catalog add --opm $(OPM) --bundle bundle --image $(BUNDLE_IMG) --channels $(CHANNELS) --default-channel $(DEFAULT_CHANNEL) catalog
	rm -f catalog.Dockerfile
	$(OPM) generate dockerfile catalog --base-image $(OPM_IMAGE) --builder-image $(OPM_IMAGE)
	$(OPM) validate catalog
	$(GO) run ./hack/catalog lint catalog

.PHONY: bundle-build
bundle-build: ## Build the bundle image (needs a container engine).
	docker build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: catalog-build
catalog-build: ## Build the catalog image (needs a container engine).
	docker build -f catalog.Dockerfile -t $(CATALOG_IMG) .

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(KUSTOMIZE): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/kustomize $@

$(GOTESTSUM): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)
	mv $(LOCALBIN)/gotestsum $@

$(GOLANGCI_LINT): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

# The Operator Framework tools, from hack/tools/operator-framework (the proxy
# will not list their versions; that module requires the exact ones): OLM's
# commands (the olm and catalog operators, and copy-content and cpb, which
# the Pods and Jobs they make run), opm and operator-sdk. One go build for
# the six: they share most of their packages, and the Kubernetes libraries
# with the Kubernetes build. Tags and version flags as in their own
# Makefiles; a -X for a package a binary does not link is ignored. No cgo:
# opm then leaves out only its deprecated SQLite index commands.
OLM_PKG = github.com/operator-framework/operator-lifecycle-manager
OPM_PKG = github.com/operator-framework/operator-registry
OPERATOR_SDK_PKG = github.com/operator-framework/operator-sdk
OLM_DIR ?= $(LOCALBIN)/olm-$(OLM_VERSION)
OLM_BINARIES = $(addprefix $(OLM_DIR)/,olm catalog copy-content cpb)
OPERATOR_FRAMEWORK_TMP = $(LOCALBIN)/operator-framework.tmp
$(OLM_BINARIES) $(OPM) $(OPERATOR_SDK) &: hack/tools/operator-framework/go.mod | $(LOCALBIN)
	rm -rf $(OPERATOR_FRAMEWORK_TMP)
	cd hack/tools/operator-framework && CGO_ENABLED=0 $(GO) build -tags=json1,containers_image_openpgp -o $(OPERATOR_FRAMEWORK_TMP)/ \
		-ldflags "-s -w \
		-X '$(OLM_PKG)/pkg/version.OLMVersion=$(OLM_VERSION:v%=%)' -X '$(OLM_PKG)/pkg/version.GitCommit=$(OLM_VERSION)' \
		-X '$(OPM_PKG)/cmd/opm/version.opmVersion=$(OPM_VERSION)' \
		-X '$(OPERATOR_SDK_PKG)/internal/version.Version=$(OPERATOR_SDK_VERSION)' \
		-X '$(OPERATOR_SDK_PKG)/internal/version.GitVersion=$(OPERATOR_SDK_VERSION)' \
		-X '$(OPERATOR_SDK_PKG)/internal/version.KubernetesVersion=$(KUBERNETES_VERSION)' \
		-X '$(OPERATOR_SDK_PKG)/internal/version.ImageVersion=$(OPERATOR_SDK_VERSION)'" \
		$(OLM_PKG)/cmd/olm $(OLM_PKG)/cmd/catalog $(OLM_PKG)/cmd/copy-content $(OLM_PKG)/util/cpb \
		$(OPM_PKG)/cmd/opm $(OPERATOR_SDK_PKG)/cmd/operator-sdk
	mv $(OPERATOR_FRAMEWORK_TMP)/opm $(OPM)
	mv $(OPERATOR_FRAMEWORK_TMP)/operator-sdk $(OPERATOR_SDK)
	rm -rf $(OLM_DIR) && mv $(OPERATOR_FRAMEWORK_TMP) $(OLM_DIR)

GRPC_HEALTH_PROBE ?= $(LOCALBIN)/grpc_health_probe-$(GRPC_HEALTH_PROBE_VERSION)
$(GRPC_HEALTH_PROBE): hack/tools/grpc-health-probe/go.mod | $(LOCALBIN)
	cd hack/tools/grpc-health-probe && CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $@ github.com/grpc-ecosystem/grpc-health-probe

.PHONY: olm-binaries
olm-binaries: $(OLM_BINARIES) $(OPM) $(GRPC_HEALTH_PROBE) ## Build what the local cluster runs OLM and catalogs with: OLM's commands (bin/olm-$(OLM_VERSION)/), opm, grpc_health_probe.

# Kubernetes binaries, from hack/kube (k8s.io/kubernetes with its staging
# modules replaced by their releases).
KUBE_LDFLAGS = -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBERNETES_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBERNETES_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=$(word 1,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
	-X k8s.io/client-go/pkg/version.gitMinor=$(word 2,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
	-X k8s.io/client-go/pkg/version.gitTreeState=clean
KUBE_BINARIES = $(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(KUBECTL)
# One go build for all four: they share most of their packages, and one
# build compiles each package once with every core busy (two builds at once
# would compile the shared packages twice).
$(KUBE_BINARIES) &: hack/kube/go.mod | $(LOCALBIN)
	cd hack/kube && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o $(LOCALBIN)/kube-$(KUBERNETES_VERSION).tmp/ \
		$(addprefix k8s.io/kubernetes/cmd/,kube-apiserver kube-controller-manager kube-scheduler kubectl)
	for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do \
		mv $(LOCALBIN)/kube-$(KUBERNETES_VERSION).tmp/$$b $(LOCALBIN)/$$b-$(KUBERNETES_VERSION); \
	done
	rmdir $(LOCALBIN)/kube-$(KUBERNETES_VERSION).tmp

# etcd, from hack/etcd/<version> (a main that calls etcdmain.Main).
$(LOCALBIN)/etcd-%: hack/etcd/%/go.mod | $(LOCALBIN)
	cd hack/etcd/$* && $(GO) build -o $@ .

# etcdctl, for people poking at clusters and the etcd image of that version.
ETCDCTL ?= $(LOCALBIN)/etcdctl-$(ETCD_VERSION)
$(ETCDCTL): hack/etcd/$(ETCD_VERSION)/go.mod | $(LOCALBIN)
	cd hack/etcd/$(ETCD_VERSION) && $(GO) build -o $@ go.etcd.io/etcd/etcdctl/v3

# etcdutl, which the etcd image of that version ships: a restore from a
# backup runs it in the seed member's container (docs/backups.md).
ETCDUTL ?= $(LOCALBIN)/etcdutl-$(ETCD_VERSION)
$(ETCDUTL): hack/etcd/$(ETCD_VERSION)/go.mod | $(LOCALBIN)
	cd hack/etcd/$(ETCD_VERSION) && $(GO) build -o $@ go.etcd.io/etcd/etcdutl/v3

# cert-manager's controllers, from hack/cert-manager (its cmd/controller
# module is not on the proxy; its controller packages are).
$(CERT_MANAGER_CONTROLLER): hack/cert-manager/go.mod hack/cert-manager/main.go | $(LOCALBIN)
	cd hack/cert-manager && $(GO) build -o $@ .

# versitygw, from hack/s3 (its go.mod requires the version); the version is
# stamped as versitygw's own Makefile does.
$(VERSITYGW): hack/s3/go.mod | $(LOCALBIN)
	cd hack/s3 && $(GO) build -trimpath -ldflags "-s -w -X main.Version=$(VERSITYGW_VERSION)" -o $@ github.com/versity/versitygw/cmd/versitygw

$(ENVTEST_ASSETS): $(KUBE_APISERVER) $(ETCD)
	mkdir -p $@
	ln -sf $(KUBE_APISERVER) $@/kube-apiserver
	ln -sf $(ETCD) $@/etcd

.PHONY: kube-binaries
kube-binaries: $(KUBE_BINARIES) ## Build kube-apiserver, kube-controller-manager, kube-scheduler and kubectl.

.PHONY: envtest-assets
envtest-assets: $(ENVTEST_ASSETS) ## Build kube-apiserver and etcd for the schema tests.

##@ Local cluster

.PHONY: localcluster
localcluster: ## Build the local cluster's own binary (control plane supervisor and node agents).
	$(GO) build -o $(LOCALCLUSTER) ./cmd/localcluster

.PHONY: localcluster-binaries
# etcdctl goes with the etcd image of its version, as in a real image: the
# tests run it in member Pods (kubectl exec, exec probes) and as printed by
# kubectl etcd credentials.
localcluster-binaries: localcluster binaries $(KUBE_BINARIES) $(CERT_MANAGER_CONTROLLER) pod-binaries ## Build everything the local cluster runs.

# What member, S3 and backup Pods run. Their packages are nearly all their
# own (etcd and versitygw pin other versions of what they share with the
# rest), so CI builds them beside the Kubernetes build.
.PHONY: pod-binaries
pod-binaries: $(foreach v,$(ETCD_MEMBER_VERSIONS),$(LOCALBIN)/etcd-$(v)) $(ETCDCTL) $(ETCDUTL) $(VERSITYGW)

.PHONY: localcluster-up
localcluster-up: localcluster-binaries ## Start the local cluster in the background (KUBECONFIG=.localcluster/admin.kubeconfig).
	$(LOCALCLUSTER) up --detach --state-dir $(LOCALCLUSTER_STATE) --bin-dir $(LOCALBIN) --nodes $(LOCALCLUSTER_NODES) --network $(LOCALCLUSTER_NETWORK)

# OLM=1: install OLM, then cert-manager and the operator through it, from
# VERSION's catalog image (bin/images/).
.PHONY: demo
demo: localcluster-up $(KUSTOMIZE) $(ETCDCTL) $(if $(OLM),olm-binaries local-images) ## Start the local cluster, install cert-manager and the operator (OLM=1: through OLM), bring up a sample EtcdCluster.
	$(if $(OLM),CATALOG_IMAGE=$(CATALOG_IMG)) hack/demo.sh $(KUBECTL) $(KUSTOMIZE) $(ETCDCTL) $(LOCALCLUSTER_STATE)

.PHONY: localcluster-s3
localcluster-s3: localcluster-up ## Run the S3 server (versitygw over HTTPS, hack/localcluster/s3.yaml) in the local cluster and say how to reach it.
	KUBECONFIG=$(LOCALCLUSTER_STATE)/admin.kubeconfig hack/localcluster/install-s3.sh $(KUBECTL) --print

# The bundle and catalog images of VERSION as the local cluster runs them
# (bin/images/: it pulls from no registry), with the files their
# Dockerfiles copy.
LOCAL_IMAGES ?= $(LOCALBIN)/images
.PHONY: local-images
local-images: $(OPM) ## Make VERSION's bundle and catalog images for the local cluster (bin/images/), from bundle/ and catalog/.
	hack/localcluster/directory-image.sh $(LOCAL_IMAGES) $(BUNDLE_IMG) '{"from":"scratch"}' \
		bundle/manifests:/manifests bundle/metadata:/metadata bundle/tests/scorecard:/tests/scorecard
	@# As catalog.Dockerfile: the catalog, and the cache opm serve checks
	@# it against, made by opm serve --cache-only (which would write the
	@# host's /dev/termination-log).
	hack/localcluster/directory-image.sh $(LOCAL_IMAGES) $(CATALOG_IMG) \
		'{"from":"$(OPM_IMAGE)","entrypoint":["/bin/opm"],"cmd":["serve","/configs","--cache-dir=/tmp/cache"]}' catalog:/configs
	$(OPM) serve $(LOCAL_IMAGES)/$(subst :,/,$(CATALOG_IMG))/rootfs/configs --cache-dir=$(LOCAL_IMAGES)/$(subst :,/,$(CATALOG_IMG))/rootfs/tmp/cache --cache-only --termination-log=/dev/null
	hack/localcluster/community-catalog.sh $(LOCAL_IMAGES) $(OPM) $(OPM_IMAGE)

.PHONY: test-olm-live
test-olm-live: localcluster-binaries olm-binaries local-images $(OPERATOR_SDK) $(KUSTOMIZE) $(GOTESTSUM) ## Run only the suite that installs and upgrades the operator through the real OLM (test/olmlive) on the local cluster.
	mkdir -p $(TEST_LOGS)
	$(OLM_LIVE_ENV) hack/with-localcluster.sh $(LOCALCLUSTER) $(LOCALCLUSTER_STATE) $(LOCALBIN) $(LOCALCLUSTER_NODES) $(LOCALCLUSTER_NETWORK) -- \
		$(GOTESTSUM) --format testname --jsonfile $(TEST_LOGS)/olmlive.json -- -count=1 -timeout 30m $(GOTEST_FLAGS) ./test/olmlive

.PHONY: olm-up
olm-up: localcluster-up olm-binaries local-images ## Run the Operator Lifecycle Manager (hack/localcluster/olm.yaml) in the local cluster, with VERSION's catalog image.
	KUBECONFIG=$(LOCALCLUSTER_STATE)/admin.kubeconfig hack/localcluster/install-olm.sh $(KUBECTL)

.PHONY: demo-down
demo-down: localcluster-down ## Stop the demo's local cluster and remove what it created.

.PHONY: localcluster-down
localcluster-down: localcluster ## Stop the local cluster and remove what it created.
	$(LOCALCLUSTER) down --state-dir $(LOCALCLUSTER_STATE)

.PHONY: tools
tools: $(CONTROLLER_GEN) $(KUSTOMIZE) $(GOLANGCI_LINT) $(GOTESTSUM) $(OPERATOR_SDK) $(OPM) ## Build every pinned tool into bin/.
