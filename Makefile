# Paygate: `make dev` runs the whole system, `make test` runs every test. Both install what they need first.
SHELL := /bin/bash
PNPM_VERSION := 9.15.9
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
WITH_INFRA := tsx deploy/scripts/with-infra.ts

.PHONY: dev test check unit bench load fuzz chaos chaos-short dist deps node-deps system-deps lint typecheck format jest clean

dev: deps
	tsx deploy/dev/main.ts

# The typecheck runs beside jest, niced: it takes the CPU jest's suites leave while they wait for blocks and timers
# instead of slowing the first, busiest suites. Either failing fails the target.
test: deps lint
	@$(MAKE) --no-print-directory -j2 TYPECHECK_PRIORITY='nice -n 10' typecheck jest

# The quick loop: lint, typecheck and the unit tests (*.unit.test.ts: no Postgres, NATS, chain or browser).
check: node-deps
	@$(MAKE) --no-print-directory -j3 lint typecheck unit

unit:
	jest --ci --testPathPattern '\.unit\.test\.ts$$'

bench: deps
	$(WITH_INFRA) tsx bench/run-all.ts

# Sustained load on the whole system as real processes (deploy/load/main.ts): 2 replicas of each service, a NATS
# cluster of 3, anvil with 1 s blocks, a mix of agents for LOAD_SECONDS (default 300) beside the reference x402
# facilitator, then the money invariants; writes bench/results/load-<date>.json. Starts its own Postgres and NATS.
load: deps
	tsx deploy/load/main.ts

# The full property test of every write route: 2,000 bodies per route (make test sends the first 100 of them).
fuzz: deps
	FUZZ_RUNS=$${FUZZ_RUNS:-2000} $(WITH_INFRA) jest --ci deploy/test/fuzz.test.ts

# Seeded fault injection on the whole system as real processes (docs/reliability.md): 3 seeds of at most 5 min;
# CHAOS_SEED=<n> reproduces one. Starts its own Postgres, NATS cluster and chain; never the shared ones.
chaos: deps
	tsx deploy/chaos/main.ts

# The short seed (about 90 s): deploy/test/chaos-short.test.ts, its report checked by jest (not part of make test).
chaos-short: deps
	PAYGATE_CHAOS_TESTS=1 $(WITH_INFRA) jest --ci deploy/test/chaos-short.test.ts

# The compiled JavaScript the images run (the Dockerfile's build stage runs the same script).
dist: node-deps
	tsx deploy/scripts/build-contracts.ts --check
	tsx deploy/scripts/build-dist.ts

deps: node-deps system-deps

# Installed again only when the lockfile or a package.json changed: an up-to-date `pnpm install` still costs about
# 4.5 s of CPU, a sixth of `make check`.
node-deps: node_modules/.paygate-installed
	@:

node_modules/.paygate-installed: pnpm-lock.yaml pnpm-workspace.yaml package.json $(wildcard */package.json libs/*/package.json services/*/package.json)
	@command -v pnpm >/dev/null 2>&1 || npm install -g pnpm@$(PNPM_VERSION)
	@pnpm install --frozen-lockfile --reporter=silent
	@touch $@

# Debian packages the tests use: Chromium (browser tests), docker-compose (checks docker-compose.yml) and
# prometheus, for its promtool (checks and unit-tests the alert rules in k8s/monitoring).
system-deps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "please install the Debian packages:$$missing (sudo apt-get install$$missing)"; exit 1; \
	  fi; \
	fi

lint:
	biome check .

format:
	biome check --write .

# tsgo, TypeScript's native compiler (the 7.0 preview, pinned), checks the same tsconfig as tsc 5.9 in about a
# quarter of its CPU (9 s against 33-42 s on 2 cores); it also emits the SDKs' declarations (build-sdk.ts).
typecheck:
	$(TYPECHECK_PRIORITY) tsgo -p tsconfig.json --noEmit

# The run's results also go to artifacts/jest-results.json: `tsx deploy/scripts/test-timings.ts` turns them into
# jest.timings.json, the suite times the sequencer starts the longest of first.
jest:
	@mkdir -p artifacts
	$(WITH_INFRA) jest --ci --json --outputFile=artifacts/jest-results.json

clean:
	rm -rf .dev artifacts services/*/dist deploy/dist
