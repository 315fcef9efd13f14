# Lazaret build, test and install.
#
#   make build            static, reproducible binaries in bin/
#   make test             unit tests, no privilege needed
#   make test-root        the privileged tests too (LAZARET_TEST_ROOT=1: a
#                         missing capability fails instead of skipping)
#   make e2e              end-to-end tests against the built binaries
#   make check            what CI runs: vet, build, test(-root), e2e, fuzz-smoke
#   make bench            every Go benchmark
#   make fuzz-smoke       every fuzz target for $(FUZZTIME)
#   make runsc            build the pinned gVisor runsc into bin/ (cached)
#   make install          all binaries; install-<binary> installs one
#                         (install-lazaret-cli also its shell completions
#                         and man pages)
#   make tla              check the lifecycle model exhaustively (Go checker)
#   make prober-image     the readiness prober image of `kube render`, as a
#                         docker-archive tar in bin/lazaret-prober.tar
#   make kube-bin         build the pinned kube-apiserver and etcd (cached
#                         in $(KUBE_BIN))
#   make kube-validate    validate `kube render` output on a real API server
#
# Install layout: lazaret-cli in $(BINDIR); the helpers it starts in
# $(LIBEXECDIR)/lazaret, where lazaret-cli finds them (see pkg/locate);
# lazaret-cli's bash, zsh and fish completions and man pages under
# $(DATADIR) and $(MANDIR).

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR    ?= $(PREFIX)/share
MANDIR     ?= $(DATADIR)/man
DESTDIR    ?=

GO         ?= go
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION   ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
FUZZTIME   ?= 1s

CLI      := lazaret-cli
HELPERS  := lazaret-coordinator lazaret-supervisor lazaret-anchor \
            lazaret-gitroute lazaret-netsidecar lazaret-guest
BINARIES := $(CLI) $(HELPERS)
MODULES  := pkg $(BINARIES)

LDFLAGS := -s -w -buildid= \
	-X lazaret.dev/pkg/buildinfo.version=$(VERSION) \
	-X lazaret.dev/pkg/buildinfo.revision=$(REVISION)
BUILDENV := CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# urfave_cli_no_docs leaves out urfave/cli's man and Markdown generators,
# which lazaret-cli (the one binary on urfave/cli) never uses: their
# Markdown parser's tables were built at every start of the CLI.
BUILDFLAGS := -trimpath -tags urfave_cli_no_docs -ldflags '$(LDFLAGS)'

.PHONY: prober-image kube-bin kube-validate runsc install-runsc bench-runsc all build $(addprefix bin/,$(BINARIES)) bin/$(CLI)-docs bin/testinternet bin/tracecheck test test-root test-user e2e check vet \
	bench fuzz-smoke install $(addprefix install-,$(BINARIES)) clean tla

all: build

build: $(addprefix bin/,$(BINARIES))

# Each binary builds from its own module directory; GOWORK=off proves the
# module stands alone through its replace of lazaret.dev/pkg.
$(addprefix bin/,$(BINARIES)): bin/%:
	@mkdir -p bin
	cd $* && $(BUILDENV) GOWORK=off $(GO) build $(BUILDFLAGS) -o ../bin/$* .

# The test internet of pkg/netlab as a program (root): .ci/run starts it for
# the unprivileged run, scripts/in-test-internet for benchmarks. Not installed.
bin/tracecheck:
	@mkdir -p bin
	cd pkg && $(BUILDENV) $(GO) build -trimpath -o ../bin/tracecheck ./conform/cmd/tracecheck

bin/testinternet:
	@mkdir -p bin
	cd pkg && $(BUILDENV) $(GO) build -trimpath -o ../bin/testinternet ./netlab/cmd/testinternet

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	cd kubetest && GOWORK=off $(GO) vet ./...
	@out=$$(gofmt -l $(MODULES) kubetest); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test:
	@for m in $(MODULES); do (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

test-root:
	@for m in $(MODULES); do (cd $$m && LAZARET_TEST_ROOT=1 $(GO) test -count=1 ./...) || exit 1; done

# The packages whose tests depend on who runs them (they check the
# effective UID or gate on a capability), coordinator end-to-end tests
# included: what an unprivileged run has to repeat after a root run. The
# other packages' tests behave the same for every user.
USER_TESTS := pkg:./anchor,./audit,./gitignore,./hostid,./image/unpack,./kube,./netpath,./testgate \
	lazaret-anchor:./internal/daemon lazaret-coordinator:./internal/coordinator \
	lazaret-gitroute:./internal/daemon lazaret-netsidecar:./internal/sidecar \
	lazaret-supervisor:./internal/supervisor
test-user:
	@for mp in $(USER_TESTS); do m=$${mp%%:*}; p=$${mp#*:}; \
		(cd $$m && $(GO) test -count=1 $$(echo $$p | tr , ' ')) || exit 1; done

# End-to-end tests drive the built binaries in bin/.
e2e: build runsc
	cd lazaret-cli && LAZARET_E2E_BIN=$(CURDIR)/bin $(GO) test -count=1 -tags e2e ./e2e/...

check: vet build runsc
	@if [ "$$LAZARET_TEST_ROOT" = 1 ]; then $(MAKE) --no-print-directory test-root; else $(MAKE) --no-print-directory test; fi
	$(MAKE) --no-print-directory e2e
	$(MAKE) --no-print-directory kube-validate
	$(MAKE) --no-print-directory fuzz-smoke

# The Kubernetes API server and etcd that validate `kube render`, built
# from the pinned module kubetest/apiserver (about ten minutes on two
# cores) and cached under $(KUBE_CACHE) by the hash of its go.sum, so a
# version change builds anew and nothing else does.
KUBE_CACHE ?= $(HOME)/.cache/lazaret/kube
KUBE_BIN   ?= $(KUBE_CACHE)/$(shell sha256sum kubetest/apiserver/go.sum | cut -c1-16)

kube-bin: $(KUBE_BIN)/kube-apiserver $(KUBE_BIN)/etcd

$(KUBE_BIN)/kube-apiserver:
	@mkdir -p $(KUBE_BIN)
	cd kubetest/apiserver && CGO_ENABLED=0 GOWORK=off $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver && mv $@.tmp $@

$(KUBE_BIN)/etcd:
	@mkdir -p $(KUBE_BIN)
	cd kubetest/apiserver && CGO_ENABLED=0 GOWORK=off $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp go.etcd.io/etcd/server/v3 && mv $@.tmp $@

# LAZARET_TEST_KUBE=1: missing binaries fail the suite instead of
# skipping it.
kube-validate: kube-bin bin/$(CLI)
	cd kubetest && GOWORK=off LAZARET_KUBE_BIN=$(KUBE_BIN) LAZARET_E2E_BIN=$(CURDIR)/bin LAZARET_TEST_KUBE=1 $(GO) test -count=1 ./...

# The readiness prober of a rendered Sandbox: lazaret-guest alone, as
# 65534, in a one-layer image; `kube render --prober-image` names where
# the cluster pulls it from (load it with docker load, kind load
# image-archive, or push it with skopeo or crane).
PROBER_TAG ?= localhost/lazaret-prober:1
prober-image: bin/lazaret-guest bin/$(CLI)
	rm -rf bin/prober-root && mkdir -p bin/prober-root
	cp bin/lazaret-guest bin/prober-root/lazaret-guest
	bin/$(CLI) image build-dir --tag $(PROBER_TAG) --entrypoint '["/lazaret-guest","readiness"]' \
		--user 65534:65534 --source-date-epoch 0 --output bin/lazaret-prober.tar bin/prober-root
	rm -rf bin/prober-root

bench:
	@for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...) || exit 1; done

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz-smoke $(MODULES)

install: $(addprefix install-,$(BINARIES)) install-runsc

# lazaret-cli's completion scripts and man pages, written from its command
# tree by internal/gendocs run on the build host (GOOS and GOARCH cleared,
# so a cross build still gets them); the installed binary prints the same
# scripts with `lazaret-cli completion bash|zsh|fish`.
bin/$(CLI)-docs:
	cd $(CLI) && GOWORK=off GOOS= GOARCH= $(GO) run -trimpath ./internal/gendocs ../bin/$(CLI)-docs

install-$(CLI): bin/$(CLI) bin/$(CLI)-docs
	install -D -m 0755 bin/$(CLI) $(DESTDIR)$(BINDIR)/$(CLI)
	install -D -m 0644 bin/$(CLI)-docs/completions/$(CLI).bash $(DESTDIR)$(DATADIR)/bash-completion/completions/$(CLI)
	install -D -m 0644 bin/$(CLI)-docs/completions/_$(CLI) $(DESTDIR)$(DATADIR)/zsh/site-functions/_$(CLI)
	install -D -m 0644 bin/$(CLI)-docs/completions/$(CLI).fish $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/$(CLI).fish
	install -d $(DESTDIR)$(MANDIR)/man1
	install -m 0644 bin/$(CLI)-docs/man1/*.1 $(DESTDIR)$(MANDIR)/man1/

$(addprefix install-,$(HELPERS)): install-%: bin/%
	install -D -m 0755 bin/$* $(DESTDIR)$(LIBEXECDIR)/lazaret/$*

# The pinned, statically built gVisor runsc (docs/RUNSC.md); cached in bin/.
runsc:
	GO=$(GO) scripts/build-runsc bin/runsc

install-runsc: runsc
	install -D -m 0755 bin/runsc $(DESTDIR)$(LIBEXECDIR)/lazaret/runsc

# Bare runsc start-up on a busybox root: the baseline of the sandbox-start
# benchmark.
bench-runsc: runsc
	bench/runsc-baseline bin/runsc

# The Go explicit-state checker explores the whole tla/Lazaret.cfg fixture
# and checks every Safety invariant (see tla/CHECKER.md).
tla:
	cd pkg && $(GO) test -count=1 -v -run '^TestCheckFixture$$' ./model

clean:
	rm -rf bin
