# kube-nats-relay. Needs only Go, make and gcc: everything else is built from pinned Go modules.
GO ?= go
# The whole suite runs against a real control plane and nats-server; on a busy 2-core machine
# it takes minutes, not hours: the timeout only catches a hang.
TEST_TIMEOUT ?= 30m
CLUSTER_DIR ?= .cluster
# CLUSTER_FLAGS=-light runs etcd and kube-apiserver only; -nodes N sets the simulated nodes.
CLUSTER_FLAGS ?=

.PHONY: all build tools test vet fmt-check check-deploy demo cluster-up cluster-down clean bench

all: build

build:
	$(GO) build ./...

## tools: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok,
## nats-server, nats, helm and promql-check into .bin (skipped when already built for the pinned versions).
tools:
	hack/build-tools.sh

## test: every unit and integration test, against the real components.
test: tools
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## demo: run the relay's main job end to end: a real cluster (control plane, controllers,
## scheduler, a kwok node), the relay with its embedded nats-server, a consumer, and changes
## made with client-go that controllers follow up on (see hack/demo).
## DEMO_FLAGS=-full also prints every message: subject, headers, body.
demo: tools
	$(GO) build -o .bin/relay ./cmd/relay
	$(GO) run ./hack/demo $(DEMO_FLAGS)

## bench: throughput, latency and memory of the relay side by side with the ceiling (nats.go
## alone), bare lists and watches, the machine limit and naive informer relays, on a real
## control plane and nats-server on loopback; writes docs/benchmarks.md and its plots (see
## hack/bench). The issue's sizes take
## about an hour on 2 cores; BENCH_FLAGS=-quick runs reduced sizes in a few minutes.
# -trimpath: the profiles the bench saves name source files by module path, not by where the
# repository happens to be checked out.
bench: tools
	$(GO) run -trimpath ./hack/bench -invoked-as "make bench BENCH_FLAGS='$(BENCH_FLAGS)'" $(BENCH_FLAGS)

.PHONY: chart-docs
## chart-docs: write charts/kube-nats-relay/README.md from its Chart.yaml and the `# -- `
## comments of its values.yaml (a test fails when the README is out of date).
chart-docs:
	$(GO) run ./hack/chartdoc

vet:
	$(GO) vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## check-deploy: check the Dockerfile and docker-compose.yml without a container engine: the
## static build with the Dockerfile's flags, BuildKit's Dockerfile frontend and linter, the
## compose-spec loader, and the relay accepting the environment both give it.
check-deploy:
	hack/check-deploy.sh

## cluster-up: start a cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
## kwok with one simulated node) and nats-server in the background and print the export lines
## that point kubectl, nats and the relay at them. CLUSTER_FLAGS passes flags: -light (etcd and
## kube-apiserver only), -nodes=N, and -clusters=2 for the fan-in of docs/operations.md ("Many
## clusters"): two clusters, each with a leaf nats-server, and a hub with an aggregate stream.
cluster-up: tools
	@mkdir -p $(CLUSTER_DIR)
	@if [ -f $(CLUSTER_DIR)/pid ] && kill -0 "$$(cat $(CLUSTER_DIR)/pid)" 2>/dev/null; then \
		echo "cluster already running (pid $$(cat $(CLUSTER_DIR)/pid))"; cat $(CLUSTER_DIR)/env; exit 0; fi
	$(GO) build -o .bin/cluster ./hack/cluster
	@nohup .bin/cluster -dir $(CLUSTER_DIR) $(CLUSTER_FLAGS) >$(CLUSTER_DIR)/cluster.log 2>&1 & echo $$! >$(CLUSTER_DIR)/pid
	@for i in $$(seq 1 1500); do \
		[ -f $(CLUSTER_DIR)/env ] && break; \
		kill -0 "$$(cat $(CLUSTER_DIR)/pid)" 2>/dev/null || { cat $(CLUSTER_DIR)/cluster.log; exit 1; }; \
		sleep 0.2; done
	@[ -f $(CLUSTER_DIR)/env ] || { echo "cluster not ready after 300s"; cat $(CLUSTER_DIR)/cluster.log; exit 1; }
	@echo "# cluster is up; run:"; cat $(CLUSTER_DIR)/env

## cluster-down: stop what cluster-up started.
cluster-down:
	@if [ -f $(CLUSTER_DIR)/pid ]; then \
		pid="$$(cat $(CLUSTER_DIR)/pid)"; kill "$$pid" 2>/dev/null || true; \
		while kill -0 "$$pid" 2>/dev/null; do sleep 0.2; done; \
		rm -f $(CLUSTER_DIR)/pid; echo "cluster stopped"; \
	else echo "no cluster running"; fi

clean: cluster-down
	rm -rf .bin $(CLUSTER_DIR)
